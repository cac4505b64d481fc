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
    const { times, keys } = this;
    const stack: number[] = times.length > 0 ? [0] : [];
    while (stack.length > 0) {
      const i = stack.pop()!;
      if (times[i]! > thresholdMs) continue;
      if (isLive(keys[i]!, times[i]!)) out.add(keys[i]!);
      const l = 2 * i + 1;
      if (l < times.length) stack.push(l);
      if (l + 1 < times.length) stack.push(l + 1);
    }
    return out;
  }

  /** The earliest live time, or null; visits only the items before it (in time order). */
  earliest(isLive: (key: string, timeMs: number) => boolean): number | null {
    const { times, keys } = this;
    // A second heap, of positions in this one by their time: walks its items in time order without changing it.
    const frontier: number[] = times.length > 0 ? [0] : [];
    const less = (a: number, b: number): boolean => times[frontier[a]!]! < times[frontier[b]!]!;
    while (frontier.length > 0) {
      const i = frontier[0]!;
      if (isLive(keys[i]!, times[i]!)) return times[i]!;
      const last = frontier.pop()!;
      if (frontier.length > 0) {
        frontier[0] = last;
        siftDown(frontier, 0, less);
      }
      for (const child of [2 * i + 1, 2 * i + 2]) {
        if (child >= times.length) continue;
        frontier.push(child);
        siftUp(frontier, frontier.length - 1, less);
      }
    }
    return null;
  }

  /**
   * After a commit: drops dead items from the top, and rebuilds from `live` when most items are
   * dead, so the heap stays within twice the live entries.
   */
  prune(isLive: (key: string, timeMs: number) => boolean, live: () => Iterable<[string, number]>, liveCount: number): void {
    if (this.times.length > 2 * liveCount + 64) {
      this.times = [];
      this.keys = [];
      for (const [key, timeMs] of live()) this.add(timeMs, key);
      return;
    }
    while (this.times.length > 0 && !isLive(this.keys[0]!, this.times[0]!)) this.popKey();
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

function siftUp(heap: number[], i: number, less: (a: number, b: number) => boolean): void {
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!less(i, parent)) return;
    [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
    i = parent;
  }
}

function siftDown(heap: number[], i: number, less: (a: number, b: number) => boolean): void {
  for (;;) {
    const l = 2 * i + 1;
    let smallest = i;
    if (l < heap.length && less(l, smallest)) smallest = l;
    if (l + 1 < heap.length && less(l + 1, smallest)) smallest = l + 1;
    if (smallest === i) return;
    [heap[i], heap[smallest]] = [heap[smallest]!, heap[i]!];
    i = smallest;
  }
}
