import type { StateStore } from '../../state/state-store.js';

/**
 * How arbitrary stateful operators lay their state out in one key-value state store (the same
 * store, versions and exactly-once commit as every other operator). Every value starts with the
 * grouping key's values, so resharding routes each entry by its key (lib/state/state-routing.ts).
 *
 *   v|<var>|<key>                [keyValues, value, expiresAtMs | null]           ValueState
 *   l|<var>|<key>                [keyValues, [[value, expiresAtMs | null], ...]]  ListState
 *   m|<var>|[<key>,<mapKey>]     [keyValues, mapKey, value, expiresAtMs | null]   MapState entry
 *   t|[<key>,<ms>]               [keyValues, ms]                                 a timer
 *   g|<key>                      [keyValues, state | null, timeoutMs | null]     GroupState
 *
 * `<key>` is the encoded grouping key (execution/values.ts encodeKey). TTL is Spark's: an entry
 * updated at batch timestamp T with ttl D expires once a batch's timestamp is >= T + D; expired
 * values are never read, and are removed at the end of the batch.
 */
export type Expiry = number | null;
export type StoredValue = readonly [keyValues: readonly unknown[], value: unknown, expiresAtMs: Expiry];
export type StoredList = readonly [keyValues: readonly unknown[], elements: readonly (readonly [unknown, Expiry])[]];
export type StoredMapEntry = readonly [keyValues: readonly unknown[], mapKey: unknown, value: unknown, expiresAtMs: Expiry];
export type StoredTimer = readonly [keyValues: readonly unknown[], expiryMs: number];
export type StoredGroup = readonly [keyValues: readonly unknown[], state: unknown, timeoutMs: number | null];

export const stateKeys = {
  value: (name: string, key: string): string => `v|${name}|${key}`,
  list: (name: string, key: string): string => `l|${name}|${key}`,
  mapEntry: (name: string, key: string, mapKey: string): string => `m|${name}|${JSON.stringify([key, mapKey])}`,
  timer: (key: string, ms: number): string => `t|${JSON.stringify([key, ms])}`,
  group: (key: string): string => `g|${key}`,
};

export function isExpired(expiresAtMs: Expiry, batchTimestampMs: number): boolean {
  return expiresAtMs !== null && batchTimestampMs >= expiresAtMs;
}

export interface TimerEntry {
  readonly key: string;
  readonly keyValues: readonly unknown[];
  readonly expiryMs: number;
}

/** Counts what a batch changed, for progress (Spark's numRowsUpdated / numRowsRemoved). */
export interface StateCounters {
  updated: number;
  removed: number;
}

/**
 * One batch's view of the operator's store: reads and writes through it, plus the indexes a batch
 * needs (timers by key, map entries by variable and key), built by one pass over the store.
 */
export class KeyedState {
  readonly counters: StateCounters = { updated: 0, removed: 0 };
  private readonly timers = new Map<string, { keyValues: readonly unknown[]; times: Set<number> }>();
  private readonly mapEntries = new Map<string, Map<string, string>>();
  /** Store keys holding a TTL that had expired when the batch started (checked again at its end). */
  readonly expiredAtStart: string[] = [];

  constructor(readonly store: StateStore<unknown>, readonly batchTimestampMs: number) {
    for (const [storeKey, value] of store.entries()) {
      const kind = storeKey[0];
      if (kind === 't') {
        const [keyValues, ms] = value as StoredTimer;
        const [key] = JSON.parse(storeKey.slice(2)) as [string, number];
        this.timerSet(key, keyValues).add(ms);
      } else if (kind === 'm') {
        const bar = storeKey.indexOf('|', 2);
        const [key, mapKey] = JSON.parse(storeKey.slice(bar + 1)) as [string, string];
        this.mapIndex(storeKey.slice(2, bar), key).set(mapKey, storeKey);
        if (isExpired((value as StoredMapEntry)[3], batchTimestampMs)) this.expiredAtStart.push(storeKey);
      } else if (kind === 'v') {
        if (isExpired((value as StoredValue)[2], batchTimestampMs)) this.expiredAtStart.push(storeKey);
      } else if (kind === 'l') {
        if ((value as StoredList)[1].some(([, e]) => isExpired(e, batchTimestampMs))) this.expiredAtStart.push(storeKey);
      }
    }
  }

  get(storeKey: string): unknown {
    return this.store.get(storeKey);
  }

  put(storeKey: string, value: unknown): void {
    this.store.put(storeKey, value);
    this.counters.updated++;
  }

  remove(storeKey: string): void {
    if (this.store.get(storeKey) === undefined) return;
    this.store.remove(storeKey);
    this.counters.removed++;
  }

  private timerSet(key: string, keyValues: readonly unknown[]): Set<number> {
    let entry = this.timers.get(key);
    if (!entry) this.timers.set(key, (entry = { keyValues, times: new Set() }));
    return entry.times;
  }

  /** Map entries of one variable and grouping key: map key (encoded) -> store key. */
  mapIndex(name: string, key: string): Map<string, string> {
    const id = `${name}|${key}`;
    let index = this.mapEntries.get(id);
    if (!index) this.mapEntries.set(id, (index = new Map()));
    return index;
  }

  registerTimer(key: string, keyValues: readonly unknown[], ms: number): boolean {
    const times = this.timerSet(key, keyValues);
    if (times.has(ms)) return false;
    times.add(ms);
    this.put(stateKeys.timer(key, ms), [keyValues, ms] satisfies StoredTimer);
    return true;
  }

  deleteTimer(key: string, ms: number): boolean {
    const times = this.timers.get(key)?.times;
    if (!times?.has(ms)) return false;
    times.delete(ms);
    this.remove(stateKeys.timer(key, ms));
    return true;
  }

  listTimers(key: string): number[] {
    return [...(this.timers.get(key)?.times ?? [])].sort((a, b) => a - b);
  }

  /**
   * Timers at or before `thresholdMs`, by time then key: Spark 4.0.1's TimerStateImpl.getExpiredTimers
   * takes `expiry <= threshold` (a timer at exactly the watermark fires; spark-diff's
   * stateful/tws-session-event-time-timer shows it on real Spark).
   */
  expiredTimers(thresholdMs: number): TimerEntry[] {
    const out: TimerEntry[] = [];
    for (const [key, { keyValues, times }] of this.timers) {
      for (const ms of times) if (ms <= thresholdMs) out.push({ key, keyValues, expiryMs: ms });
    }
    return out.sort((a, b) => a.expiryMs - b.expiryMs || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** How many timers are registered (store entries that Spark keeps in internal column families). */
  timerCount(): number {
    let n = 0;
    for (const { times } of this.timers.values()) n += times.size;
    return n;
  }

  /** The earliest registered timer, or null. */
  earliestTimerMs(): number | null {
    let min: number | null = null;
    for (const { times } of this.timers.values()) for (const ms of times) if (min === null || ms < min) min = ms;
    return min;
  }

  /** Spark's TTL cleanup at the end of a batch: removes what had expired; returns the values removed. */
  removeExpired(): number {
    let removed = 0;
    const now = this.batchTimestampMs;
    for (const storeKey of this.expiredAtStart) {
      const value = this.store.get(storeKey);
      if (value === undefined) continue;
      if (storeKey[0] === 'l') {
        const [keyValues, elements] = value as StoredList;
        const live = elements.filter(([, e]) => !isExpired(e, now));
        removed += elements.length - live.length;
        if (live.length === 0) this.remove(storeKey);
        else if (live.length < elements.length) this.put(storeKey, [keyValues, live] satisfies StoredList);
        continue;
      }
      const expiresAt = storeKey[0] === 'm' ? (value as StoredMapEntry)[3] : (value as StoredValue)[2];
      if (!isExpired(expiresAt, now)) continue;
      if (storeKey[0] === 'm') {
        const bar = storeKey.indexOf('|', 2);
        const [key, mapKey] = JSON.parse(storeKey.slice(bar + 1)) as [string, string];
        this.mapIndex(storeKey.slice(2, bar), key).delete(mapKey);
      }
      this.remove(storeKey);
      removed++;
    }
    return removed;
  }
}
