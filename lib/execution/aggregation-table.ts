import type { DataType } from '../plan/data-types.js';
import type { VersionedTable } from '../state/state-store.js';
import { createGroupIndex, type GroupIndex } from './group-index.js';
import { encodeKey } from './values.js';
import { UndoLog, type UndoVisitor } from './aggregation-undo-log.js';

/** A group's state: its aggregate buffers. Never mutated once set (older versions share it). */
export type GroupState = readonly unknown[];

/** A group in the table: its state, plus what the current batch is folding into it. */
export interface GroupEntry {
  readonly keyValues: unknown[];
  /** The group's state as of the last batch (null: new in this batch). */
  state: GroupState | null;
  /** This batch's buffers, from the group's first row of the batch until the batch ends. */
  partial: unknown[] | null;
  /** Its key in a key-value state store, built once per group (only when one is written). */
  encoded: string | null;
  /** The batch (table stamp) that last touched the group. */
  touched: number;
}

/** Logs kept for reuse once forgotten: a committed one per retained version, plus the open one. */
const SPARE_LOGS = 2;

/**
 * A streaming aggregation's groups, indexed by key values and by event time. Two uses:
 *
 * - Versioned (`versioned: true`): the state itself, kept by an in-process state store
 *   (`StateStore.ownTable`), which commits, aborts and rolls it back through its undo logs. No
 *   key strings and no key-value writes per group: the fast path of local runs and tests.
 * - A cache (`versioned: false`) of a key-value store (DynamoDB), valid for one store version; the
 *   operator writes each change through the store as well.
 */
export class AggregationTable implements VersionedTable {
  readonly index: GroupIndex<GroupEntry>;
  /** Groups by their key's event time (ms): eviction visits only the groups it closes. */
  private byTime: Map<number, GroupEntry[]> | null;
  /** The time index's last list (new groups mostly share their window's time): one lookup less. */
  private lastTime = NaN;
  private lastTimeEntries: GroupEntry[] | null = null;
  size = 0;
  /** Cache use: the store version the table reflects (-1: none, e.g. during a batch). */
  forVersion = -1;
  private stamp = 0;
  private log: UndoLog<GroupEntry, GroupState> | null;
  private version = -1;
  private readonly committed = new Map<number, UndoLog<GroupEntry, GroupState>>();
  private readonly spareLogs: UndoLog<GroupEntry, GroupState>[] = [];
  private readonly undoVisitor: UndoVisitor<GroupEntry, GroupState> = {
    inserted: (entry) => {
      this.index.delete(entry.keyValues);
      this.size--;
    },
    changed: (entry, previous) => {
      entry.state = previous;
    },
    removed: (entry) => {
      this.index.set(entry.keyValues, entry);
      this.size++;
    },
  };
  private readonly timeIsFirstLevel: boolean;

  constructor(
    keyTypes: readonly DataType[],
    windowKeys: readonly boolean[],
    private readonly keyEventTimeMs: ((keyValues: readonly unknown[]) => number) | null,
    readonly versioned: boolean,
    /** The key-value store key of a group (as the operator writes it through). */
    private readonly keyOf: (keyValues: readonly unknown[]) => string = encodeKey,
    /** The key column `keyEventTimeMs` reads (null: unknown). */
    timeKeyIndex: number | null = null,
  ) {
    this.index = createGroupIndex<GroupEntry>(keyTypes, windowKeys);
    // The event time is the first key's window: a time's groups are exactly the window's level.
    this.timeIsFirstLevel = timeKeyIndex === 0 && windowKeys[0] === true;
    this.byTime = keyEventTimeMs ? new Map() : null;
    this.log = versioned ? new UndoLog<GroupEntry, GroupState>() : null;
  }

  /** A stamp for a new batch, unique for the table's life (it outlives operator instances). */
  nextBatchStamp(): number {
    return ++this.stamp;
  }

  /** Adds a group (`entry.keyValues` must not be in the table). */
  insert(entry: GroupEntry): void {
    this.index.set(entry.keyValues, entry);
    this.addByTime(entry);
    this.size++;
    this.log?.insert(entry);
  }

  setState(entry: GroupEntry, state: GroupState): void {
    // A group without a state was inserted in this run of changes: undoing its insert drops it,
    // so its first state needs no undo record.
    if (this.log !== null && entry.state !== null) this.log.change(entry, entry.state);
    entry.state = state;
  }

  /** Removes the groups whose event time is at or before `timeMs`, visiting each first. */
  evictUpTo(timeMs: number, visit: (entry: GroupEntry) => void): void {
    if (this.byTime === null) return;
    for (const [time, entries] of this.byTime) {
      if (time > timeMs) continue;
      for (const entry of entries) {
        visit(entry);
        this.log?.remove(entry);
      }
      // A closed window's level goes at once when the window is the first key.
      if (!(this.timeIsFirstLevel && this.index.deleteFirstLevel(entries[0]!.keyValues, entries.length))) {
        for (const entry of entries) this.index.delete(entry.keyValues);
      }
      this.size -= entries.length;
      this.byTime.delete(time);
      if (entries === this.lastTimeEntries) this.lastTimeEntries = null;
    }
  }

  /** The earliest event time of a group held (Infinity: none), or null without a time index. */
  earliestEventTimeMs(): number | null {
    if (this.byTime === null) return null;
    let earliest = Infinity;
    for (const time of this.byTime.keys()) if (time < earliest) earliest = time;
    return earliest;
  }

  forEach(visit: (entry: GroupEntry) => void): void {
    this.index.forEach(visit);
  }

  /** `[key, [key values, buffers]]` per group with a state, as a key-value store holds them. */
  entries(): IterableIterator<[string, unknown]> {
    const pairs: [string, unknown][] = [];
    this.index.forEach((entry) => {
      if (entry.state !== null) pairs.push([entry.encoded ?? this.keyOf(entry.keyValues), [entry.keyValues, entry.state]]);
    });
    return pairs[Symbol.iterator]();
  }

  commit(version: number): void {
    if (this.log === null) return;
    this.committed.set(version, this.log);
    this.version = version;
    this.log = this.spareLogs.pop() ?? new UndoLog<GroupEntry, GroupState>();
  }

  abort(): void {
    const log = this.log;
    if (log === null || log.isEmpty) return;
    log.undo(this.undoVisitor);
    log.clear();
    this.rebuildByTime();
  }

  rollBackTo(version: number): void {
    if (this.log === null || this.version <= version) return;
    for (let v = this.version; v > version; v--) {
      if (!this.committed.has(v)) throw new Error(`aggregation state version ${v} can no longer be rolled back (to ${version})`);
    }
    for (let v = this.version; v > version; v--) {
      this.committed.get(v)!.undo(this.undoVisitor);
      this.forget(v);
    }
    this.version = version;
    this.rebuildByTime();
  }

  forgetBefore(version: number): void {
    for (const v of this.committed.keys()) if (v <= version) this.forget(v);
  }

  private forget(version: number): void {
    const log = this.committed.get(version)!;
    this.committed.delete(version);
    if (this.spareLogs.length >= SPARE_LOGS) return;
    log.clear();
    this.spareLogs.push(log);
  }

  private addByTime(entry: GroupEntry): void {
    if (this.byTime === null) return;
    const time = this.keyEventTimeMs!(entry.keyValues);
    if (time === this.lastTime && this.lastTimeEntries !== null) {
      this.lastTimeEntries.push(entry);
      return;
    }
    let entries = this.byTime.get(time);
    if (entries === undefined) this.byTime.set(time, (entries = [entry]));
    else entries.push(entry);
    this.lastTime = time;
    this.lastTimeEntries = entries;
  }

  /** After undoing: the time index again from the groups (rare: failed or re-executed batches). */
  private rebuildByTime(): void {
    if (this.byTime === null) return;
    this.byTime = new Map();
    this.lastTimeEntries = null;
    this.index.forEach((entry) => this.addByTime(entry));
  }
}
