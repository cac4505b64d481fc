import type { StateStore, StateView } from '../../state/state-store.js';
import { TimeHeap } from '../../state/time-heap.js';
import type { Expiry, StoredGroup, StoredList, StoredMapEntry, StoredTimer, StoredValue } from './state-layout.js';

/**
 * Indexes of an arbitrary stateful operator's committed state, kept by the state store across
 * batches (`StateStore.view`), so that a batch touches only the keys with input, due timers or
 * expired TTL: built once per loaded state, then updated with each commit's changes.
 */

export interface KeyTimers {
  readonly keyValues: readonly unknown[];
  readonly times: Set<number>;
}

/** `t|[<key>,<ms>]` -> [key, ms]. */
export function parseTimerKey(storeKey: string): [string, number] {
  return JSON.parse(storeKey.slice(2)) as [string, number];
}

/** `m|<var>|[<key>,<mapKey>]` -> the map index id `<var>|<key>` and the map key. */
export function parseMapEntryKey(storeKey: string): { id: string; mapKey: string } {
  const bar = storeKey.indexOf('|', 2);
  const [key, mapKey] = JSON.parse(storeKey.slice(bar + 1)) as [string, string];
  return { id: `${storeKey.slice(2, bar)}|${key}`, mapKey };
}

/** When a state variable's entry first has something expired (the earliest TTL in it), or null. */
export function ttlTimeOf(storeKey: string, value: unknown): Expiry {
  if (value === undefined) return null;
  switch (storeKey[0]) {
    case 'v': return (value as StoredValue)[2];
    case 'm': return (value as StoredMapEntry)[3];
    case 'l': {
      let min: Expiry = null;
      for (const [, e] of (value as StoredList)[1]) if (e !== null && (min === null || e < min)) min = e;
      return min;
    }
    default: return null;
  }
}

/** transformWithState: timers by key and by time, map entries by variable and key, TTL entries by expiry. */
export class ProcessorStateIndex implements StateView {
  readonly timers = new Map<string, KeyTimers>();
  timerCount = 0;
  /** Items: (expiry, encoded grouping key). */
  readonly timerHeap = new TimeHeap();
  readonly mapEntries = new Map<string, Map<string, string>>();
  readonly ttl = new Map<string, number>();
  readonly ttlHeap = new TimeHeap();

  static build(entries: Iterable<[string, unknown]>): ProcessorStateIndex {
    const index = new ProcessorStateIndex();
    for (const [k, v] of entries) index.apply(k, v);
    return index;
  }

  apply(storeKey: string, value: unknown): void {
    const kind = storeKey[0];
    if (kind === 't') this.applyTimer(storeKey, value as StoredTimer | undefined);
    else if (kind === 'm') this.applyMapEntry(storeKey, value);
    if (kind === 'v' || kind === 'l' || kind === 'm') this.applyTtl(storeKey, ttlTimeOf(storeKey, value));
  }

  committed(): void {
    this.timerHeap.prune((k, ms) => this.hasTimer(k, ms), () => this.liveTimers(), this.timerCount);
    this.ttlHeap.prune((k, t) => this.ttl.get(k) === t, () => this.ttl.entries(), this.ttl.size);
  }

  hasTimer(key: string, ms: number): boolean {
    return this.timers.get(key)?.times.has(ms) ?? false;
  }

  private *liveTimers(): IterableIterator<[string, number]> {
    for (const [key, { times }] of this.timers) for (const ms of times) yield [key, ms];
  }

  // Changed in place: only commits change a view, and a batch copies what it changes (KeyedState).
  private applyTimer(storeKey: string, value: StoredTimer | undefined): void {
    const [key, ms] = parseTimerKey(storeKey);
    const entry = this.timers.get(key);
    if (value === undefined) {
      if (!entry?.times.delete(ms)) return;
      if (entry.times.size === 0) this.timers.delete(key);
      this.timerCount--;
      return;
    }
    if (entry?.times.has(ms)) return;
    if (entry) entry.times.add(ms);
    else this.timers.set(key, { keyValues: value[0], times: new Set([ms]) });
    this.timerCount++;
    this.timerHeap.add(ms, key);
  }

  private applyMapEntry(storeKey: string, value: unknown): void {
    const { id, mapKey } = parseMapEntryKey(storeKey);
    let entries = this.mapEntries.get(id);
    if (value === undefined) {
      entries?.delete(mapKey);
      if (entries?.size === 0) this.mapEntries.delete(id);
    } else {
      if (!entries) this.mapEntries.set(id, (entries = new Map()));
      entries.set(mapKey, storeKey);
    }
  }

  private applyTtl(storeKey: string, expiresAtMs: Expiry): void {
    if (expiresAtMs === null) {
      this.ttl.delete(storeKey);
      return;
    }
    if (this.ttl.get(storeKey) === expiresAtMs) return;
    this.ttl.set(storeKey, expiresAtMs);
    this.ttlHeap.add(expiresAtMs, storeKey);
  }
}

/** [flat]mapGroupsWithState: the groups with a timeout, by timeout. */
export class GroupTimeoutIndex implements StateView {
  readonly timeouts = new Map<string, number>();
  readonly heap = new TimeHeap();

  static build(entries: Iterable<[string, unknown]>): GroupTimeoutIndex {
    const index = new GroupTimeoutIndex();
    for (const [k, v] of entries) index.apply(k, v);
    return index;
  }

  apply(storeKey: string, value: unknown): void {
    if (storeKey[0] !== 'g') return;
    const timeoutMs = value === undefined ? null : (value as StoredGroup)[2];
    if (timeoutMs === null) this.timeouts.delete(storeKey);
    else if (this.timeouts.get(storeKey) !== timeoutMs) {
      this.timeouts.set(storeKey, timeoutMs);
      this.heap.add(timeoutMs, storeKey);
    }
  }

  committed(): void {
    this.heap.prune((k, t) => this.timeouts.get(k) === t, () => this.timeouts.entries(), this.timeouts.size);
  }
}

/** The store's kept view, or one built from its entries for this batch (stores without views). */
export function indexOf<T extends StateView>(store: StateStore<unknown>, name: string, build: (entries: Iterable<[string, unknown]>) => T): T {
  return store.view ? store.view(name, build) : build(store.entries());
}
