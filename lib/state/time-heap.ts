/**
 * State keys ordered by a time (a timer's expiry, a TTL's expiry, a timeout), so that a batch finds
 * what is due without visiting every entry. A binary min-heap with lazy deletion: a changed or
 * removed entry's old item stays until it reaches the top, and every question takes an `isLive`
 * check from the caller (who knows the entry's current time). An entry's current time always has an
 * item, because every write of it adds one.
 *
 * A hand-written heap rather than a library (e.g. @datastructures-js/priority-queue): it needs
 * non-destructive "everything at or before T" and "earliest live" walks that queue APIs do not offer.
 */
export class TimeHeap {
  private times: number[] = [];
  private keys: string[] = [];

  get size(): number {
    return this.times.length;
  }

  add(timeMs: number, key: string): void {
    let i = this.times.length;
    this.times.push(timeMs);
    this.keys.push(key);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.times[parent]! <= timeMs) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  /** Keys of live items at or before `thresholdMs`, without changing the heap (a batch may abort). */
  due(thresholdMs: number, isLive: (key: string, timeMs: number) => boolean): Set<string> {
    const out = new Set<string>();
    const stack = this.times.length > 0 ? [0] : [];
    while (stack.length > 0) {
      const i = stack.pop()!;
      if (this.times[i]! > thresholdMs) continue;
      if (isLive(this.keys[i]!, this.times[i]!)) out.add(this.keys[i]!);
      for (const child of [2 * i + 1, 2 * i + 2]) if (child < this.times.length) stack.push(child);
    }
    return out;
  }

  /** The earliest live time, or null; visits only the items before it (in time order). */
  earliest(isLive: (key: string, timeMs: number) => boolean): number | null {
    if (this.times.length === 0) return null;
    // A second heap of positions, by time: pops the first heap's items in order without changing it.
    const frontier = new TimeHeap();
    frontier.add(this.times[0]!, '0');
    while (frontier.size > 0) {
      const i = Number(frontier.popKey());
      if (isLive(this.keys[i]!, this.times[i]!)) return this.times[i]!;
      for (const child of [2 * i + 1, 2 * i + 2]) if (child < this.times.length) frontier.add(this.times[child]!, String(child));
    }
    return null;
  }

  /**
   * After a commit: drops dead items from the top, and rebuilds from `live` when most items are
   * dead, so the heap stays within twice the live entries.
   */
  prune(isLive: (key: string, timeMs: number) => boolean, live: () => Iterable<[string, number]>, liveCount: number): void {
    while (this.times.length > 0 && !isLive(this.keys[0]!, this.times[0]!)) this.popKey();
    if (this.times.length > 2 * liveCount + 64) {
      this.times = [];
      this.keys = [];
      for (const [key, timeMs] of live()) this.add(timeMs, key);
    }
  }

  private popKey(): string {
    const top = this.keys[0]!;
    const lastTime = this.times.pop()!;
    const lastKey = this.keys.pop()!;
    if (this.times.length === 0) return top;
    this.times[0] = lastTime;
    this.keys[0] = lastKey;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let smallest = i;
      if (l < this.times.length && this.times[l]! < this.times[smallest]!) smallest = l;
      if (r < this.times.length && this.times[r]! < this.times[smallest]!) smallest = r;
      if (smallest === i) return top;
      this.swap(i, smallest);
      i = smallest;
    }
  }

  private swap(a: number, b: number): void {
    [this.times[a], this.times[b]] = [this.times[b]!, this.times[a]!];
    [this.keys[a], this.keys[b]] = [this.keys[b]!, this.keys[a]!];
  }
}
