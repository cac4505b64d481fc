import type { StateStore } from '../../state/state-store.js';
import { isExpired, stateKeys, type Expiry, type StoredList, type StoredMapEntry, type StoredTimer, type StoredValue } from './state-layout.js';
import { indexOf, parseMapEntryKey, ProcessorStateIndex, ttlTimeOf, type KeyTimers } from './state-index.js';

export * from './state-layout.js';

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
 * needs (timers by key and by time, map entries by variable and key, TTL entries by expiry). The
 * indexes of the committed state are kept by the store across batches (state-index.ts); this
 * batch's changes to them are kept here, copied on write, so an aborted batch leaves them intact.
 */
export class KeyedState {
  readonly counters: StateCounters = { updated: 0, removed: 0 };
  private readonly index: ProcessorStateIndex;
  /** Keys whose timers this batch changed: their whole timer set now. */
  private readonly changedTimers = new Map<string, KeyTimers>();
  /** Map indexes this batch read or changed (copies of the committed ones). */
  private readonly mapEntries = new Map<string, Map<string, string>>();
  /** State-variable entries this batch wrote: their earliest TTL now (null: none or removed). */
  private readonly changedTtl = new Map<string, Expiry>();
  /** Store keys holding a TTL that had expired when the batch started (checked again at its end). */
  readonly expiredAtStart: string[];

  constructor(readonly store: StateStore<unknown>, readonly batchTimestampMs: number) {
    this.index = indexOf(store, 'transformWithState', ProcessorStateIndex.build);
    const index = this.index;
    this.expiredAtStart = [...index.ttlHeap.due(batchTimestampMs, (k, t) => index.ttl.get(k) === t)];
  }

  get(storeKey: string): unknown {
    return this.store.get(storeKey);
  }

  put(storeKey: string, value: unknown): void {
    this.store.put(storeKey, value);
    this.counters.updated++;
    if (storeKey[0] !== 't' && storeKey[0] !== 'g') this.changedTtl.set(storeKey, ttlTimeOf(storeKey, value));
  }

  remove(storeKey: string): void {
    if (this.store.get(storeKey) === undefined) return;
    this.store.remove(storeKey);
    this.counters.removed++;
    if (storeKey[0] !== 't' && storeKey[0] !== 'g') this.changedTtl.set(storeKey, null);
  }

  private timersOf(key: string): KeyTimers | undefined {
    return this.changedTimers.get(key) ?? this.index.timers.get(key);
  }

  /** Changes this batch's copy of a key's timers (copied from the committed index on its first change). */
  private changeTimers(key: string, keyValues: readonly unknown[], change: (times: Set<number>) => void): void {
    let own = this.changedTimers.get(key);
    if (!own) this.changedTimers.set(key, (own = { keyValues, times: new Set(this.index.timers.get(key)?.times ?? []) }));
    change(own.times);
  }

  /** Map entries of one variable and grouping key: map key (encoded) -> store key. */
  mapIndex(name: string, key: string): Map<string, string> {
    const id = `${name}|${key}`;
    let entries = this.mapEntries.get(id);
    if (!entries) this.mapEntries.set(id, (entries = new Map(this.index.mapEntries.get(id) ?? [])));
    return entries;
  }

  registerTimer(key: string, keyValues: readonly unknown[], ms: number): boolean {
    if (this.timersOf(key)?.times.has(ms)) return false;
    this.changeTimers(key, keyValues, (times) => times.add(ms));
    this.put(stateKeys.timer(key, ms), [keyValues, ms] satisfies StoredTimer);
    return true;
  }

  deleteTimer(key: string, ms: number): boolean {
    const current = this.timersOf(key);
    if (!current?.times.has(ms)) return false;
    this.changeTimers(key, current.keyValues, (times) => times.delete(ms));
    this.remove(stateKeys.timer(key, ms));
    return true;
  }

  listTimers(key: string): number[] {
    return [...(this.timersOf(key)?.times ?? [])].sort((a, b) => a - b);
  }

  private isTimerNow = (key: string, ms: number): boolean => this.timersOf(key)?.times.has(ms) ?? false;

  /**
   * Timers at or before `thresholdMs`, by time then key: Spark 4.0.1's TimerStateImpl.getExpiredTimers
   * takes `expiry <= threshold` (a timer at exactly the watermark fires; spark-diff's
   * stateful/tws-session-event-time-timer shows it on real Spark).
   */
  expiredTimers(thresholdMs: number): TimerEntry[] {
    const out: TimerEntry[] = [];
    for (const key of this.index.timerHeap.due(thresholdMs, this.isTimerNow)) {
      if (this.changedTimers.has(key)) continue;
      const { keyValues, times } = this.timersOf(key)!;
      for (const ms of times) if (ms <= thresholdMs) out.push({ key, keyValues, expiryMs: ms });
    }
    for (const [key, { keyValues, times }] of this.changedTimers) {
      for (const ms of times) if (ms <= thresholdMs) out.push({ key, keyValues, expiryMs: ms });
    }
    return out.sort((a, b) => a.expiryMs - b.expiryMs || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** How many timers are registered (store entries that Spark keeps in internal column families). */
  timerCount(): number {
    let n = this.index.timerCount;
    for (const [key, { times }] of this.changedTimers) n += times.size - (this.index.timers.get(key)?.times.size ?? 0);
    return n;
  }

  /** The earliest registered timer, or null. */
  earliestTimerMs(): number | null {
    if (this.timerCount() === 0) return null;
    let min = this.index.timerHeap.earliest(this.isTimerNow);
    for (const { times } of this.changedTimers.values()) for (const ms of times) if (min === null || ms < min) min = ms;
    return min;
  }

  /** The earliest TTL expiry of a stored value, or null. */
  earliestExpiryMs(): number | null {
    const { ttl, ttlHeap } = this.index;
    let min = ttlHeap.earliest((k, t) => !this.changedTtl.has(k) && ttl.get(k) === t);
    for (const t of this.changedTtl.values()) if (t !== null && (min === null || t < min)) min = t;
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
        const { id, mapKey } = parseMapEntryKey(storeKey);
        const bar = id.indexOf('|');
        this.mapIndex(id.slice(0, bar), id.slice(bar + 1)).delete(mapKey);
      }
      this.remove(storeKey);
      removed++;
    }
    return removed;
  }
}
