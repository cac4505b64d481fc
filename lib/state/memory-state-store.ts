import { CheckpointError } from '../errors/sluice-error.js';
import type { StateStore, StateStoreId, StateStoreProvider, StateView, VersionedTable } from './state-store.js';

const ABSENT = Symbol('absent');

/** What a run of writes overwrote, in write order: undone by restoring `previous` in reverse. */
interface UndoLog<V> {
  readonly keys: string[];
  readonly previous: (V | typeof ABSENT)[];
}

function emptyUndoLog<V>(): UndoLog<V> {
  return { keys: [], previous: [] };
}

/**
 * In-memory versioned state: one live map, written through by the open store, plus per committed
 * version the undo log of its writes, so that a write costs one lookup and one set, committing is
 * free, and an older version is rebuilt by undoing the newer ones. Plays the role of Spark's
 * HDFS-backed store in tests and local runs.
 *
 * One writer at a time: opening a store reverts the uncommitted writes of the store opened before
 * it (a crashed or abandoned batch) and supersedes it, so that store's later writes and its commit
 * are refused (the last opener wins, as a restarted batch must).
 */
class VersionedMap<V> {
  /** Committed state at `latestVersion`, plus the open store's uncommitted writes. */
  readonly live = new Map<string, V>();
  latestVersion = 0;
  /** The oldest version that can still be rebuilt. */
  private oldestVersion = 0;
  /** Per version v in (oldestVersion, latestVersion]: how to get version v - 1 back from v. */
  private readonly undo = new Map<number, UndoLog<V>>();
  /** The store whose writes are in `live` but not committed yet. */
  private writer: MemoryStateStore<V> | null = null;
  /** An operator's own structure (`StateStore.ownTable`), versioned along with `live`. */
  table: VersionedTable | null = null;
  /** The version the table was created at (empty then). */
  tableSince = 0;
  /** Operators' indexes of the committed state (`StateStore.view`); dropped by any revert. */
  readonly views = new Map<string, StateView>();

  constructor(private readonly versionsToRetain: number) {}

  open(version: number): MemoryStateStore<V> {
    this.supersedeWriter();
    if (version > this.latestVersion && this.latestVersion === 0 && this.live.size === 0) {
      // An operator that had nothing to commit yet (e.g. added after a compatible change) starts empty.
      this.latestVersion = version;
      this.oldestVersion = version;
    }
    if (version > this.latestVersion || version < this.oldestVersion) {
      throw new CheckpointError(`State version ${version} is not available (latest ${this.latestVersion}, oldest ${this.oldestVersion}).`, {
        code: 'STATE_VERSION_MISSING',
        hint: 'the checkpoint and the state store disagree; restore both from the same point or start with a new checkpoint.',
      });
    }
    // Re-executing an older batch: undo the newer versions; that version becomes the latest again.
    // The table first: it refuses before changing anything, and before it existed it was empty.
    if (this.table !== null && version < this.tableSince) this.table = null;
    this.table?.rollBackTo(version);
    for (let v = this.latestVersion; v > version; v--) {
      this.revert(this.undo.get(v)!);
      this.undo.delete(v);
    }
    this.latestVersion = version;
    this.writer = new MemoryStateStore<V>(this, version);
    return this.writer;
  }

  isWriter(store: MemoryStateStore<V>): boolean {
    return this.writer === store;
  }

  /** Makes `store`'s writes version `store.version + 1`. */
  commit(store: MemoryStateStore<V>, log: UndoLog<V>): number {
    if (this.writer !== store || store.version !== this.latestVersion) throw supersededError(store.version);
    this.writer = null;
    this.latestVersion = store.version + 1;
    this.undo.set(this.latestVersion, log);
    this.table?.commit(this.latestVersion);
    if (this.views.size > 0) {
      const changed = new Set(log.keys);
      for (const view of this.views.values()) {
        for (const key of changed) view.apply(key, this.live.get(key));
        view.committed?.();
      }
    }
    // Spark's retention: between versionsToRetain and 2 * versionsToRetain - 1 older versions stay available.
    if (this.latestVersion - this.oldestVersion >= this.versionsToRetain * 2) {
      const target = this.latestVersion - this.versionsToRetain;
      for (let v = this.oldestVersion + 1; v <= target; v++) this.undo.delete(v);
      this.table?.forgetBefore(target);
      this.oldestVersion = target;
    }
    return this.latestVersion;
  }

  abort(store: MemoryStateStore<V>, log: UndoLog<V>): void {
    if (this.writer !== store) return;
    this.revert(log);
    this.table?.abort();
    this.writer = null;
  }

  private supersedeWriter(): void {
    if (this.writer === null) return;
    this.revert(this.writer.pendingWrites());
    this.table?.abort();
    this.writer = null;
  }

  private revert(log: UndoLog<V>): void {
    const { keys, previous } = log;
    if (keys.length > 0) this.views.clear();
    for (let i = keys.length - 1; i >= 0; i--) {
      const old = previous[i]!;
      if (old === ABSENT) this.live.delete(keys[i]!);
      else this.live.set(keys[i]!, old);
    }
  }
}

function supersededError(version: number): CheckpointError {
  return new CheckpointError(`Concurrent update to state: the store opened at version ${version} was superseded by a newer open or commit.`, {
    code: 'STATE_CONCURRENT_UPDATE', retryable: true,
  });
}

class MemoryStateStore<V> implements StateStore<V> {
  private log: UndoLog<V> = emptyUndoLog();
  private readonly live: Map<string, V>;

  constructor(private readonly map: VersionedMap<V>, readonly version: number) {
    this.live = map.live;
  }

  get(key: string): V | undefined {
    const v = this.live.get(key);
    if (v !== undefined || this.map.table === null) return v;
    // An operator's own table is read through its index; this is for inspection only.
    for (const [k, value] of this.map.table.entries()) if (k === key) return value as V;
    return undefined;
  }

  put(key: string, value: V): void {
    this.checkWriter();
    const previous = this.live.get(key);
    this.log.keys.push(key);
    this.log.previous.push(previous === undefined ? ABSENT : previous);
    this.live.set(key, value);
  }

  remove(key: string): void {
    this.checkWriter();
    const previous = this.live.get(key);
    if (previous === undefined) return;
    this.log.keys.push(key);
    this.log.previous.push(previous);
    this.live.delete(key);
  }

  entries(): IterableIterator<[string, V]> {
    const table = this.map.table;
    if (table === null) return this.live.entries();
    return [...this.live.entries(), ...(table.entries() as IterableIterator<[string, V]>)][Symbol.iterator]();
  }

  get size(): number {
    return this.live.size + (this.map.table?.size ?? 0);
  }

  async commit(): Promise<number> {
    const log = this.log;
    this.log = emptyUndoLog();
    return this.map.commit(this, log);
  }

  abort(): void {
    const log = this.log;
    this.log = emptyUndoLog();
    this.map.abort(this, log);
  }

  ownTable<T extends VersionedTable>(create: () => T): T {
    this.checkWriter();
    if (this.map.table === null) {
      this.map.table = create();
      this.map.tableSince = this.version;
    }
    return this.map.table as T;
  }

  view<T extends StateView>(name: string, build: (committed: Iterable<[string, V]>) => T): T {
    this.checkWriter();
    let view = this.map.views.get(name);
    if (view === undefined) this.map.views.set(name, (view = build(this.committedEntries())));
    return view as T;
  }

  /** The live map without this store's uncommitted writes. */
  private *committedEntries(): IterableIterator<[string, V]> {
    const original = new Map<string, V | typeof ABSENT>();
    this.log.keys.forEach((k, i) => { if (!original.has(k)) original.set(k, this.log.previous[i]!); });
    for (const [k, v] of this.live) if (!original.has(k)) yield [k, v];
    for (const [k, v] of original) if (v !== ABSENT) yield [k, v];
  }

  /** @internal the writes to revert when a newer open supersedes this store */
  pendingWrites(): UndoLog<V> {
    const log = this.log;
    this.log = emptyUndoLog();
    return log;
  }

  private checkWriter(): void {
    if (!this.map.isWriter(this)) throw supersededError(this.version);
  }
}

export class MemoryStateStoreProvider implements StateStoreProvider {
  private readonly maps = new Map<string, VersionedMap<unknown>>();

  /**
   * Versions kept to go back to, as Spark keeps 2 in memory (maxBatchesToRetainInMemory): enough
   * to re-run the last batch, which is all the engine's recovery needs. More costs memory and,
   * since replaced values then outlive many batches, much more garbage-collection time.
   */
  constructor(private readonly versionsToRetain = 2) {}

  async open<V>(id: StateStoreId, version: number): Promise<StateStore<V>> {
    const key = `${id.operatorId}/${id.storeName}`;
    let map = this.maps.get(key) as VersionedMap<V> | undefined;
    if (!map) {
      map = new VersionedMap<V>(this.versionsToRetain);
      this.maps.set(key, map as VersionedMap<unknown>);
    }
    return map.open(version);
  }
}
