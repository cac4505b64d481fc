import { CheckpointError } from '../errors/sluice-error.js';
import type { StateStore, StateStoreId, StateStoreProvider } from './state-store.js';

const TOMBSTONE = Symbol('removed');
type Delta<V> = Map<string, V | typeof TOMBSTONE>;

/** What one committed version changed: each key's value before it (TOMBSTONE: absent). */
interface Undo<V> {
  readonly keys: string[];
  readonly previous: (V | typeof TOMBSTONE)[];
}

/**
 * In-memory versioned state: the latest committed map plus, per version, what its commit
 * overwrote, so that committing costs O(changed keys) and an older version can be rebuilt by
 * undoing the newer versions over a copy of the latest. Plays the role of Spark's HDFS-backed
 * store in tests and local runs. (Undo records instead of a snapshot plus forward deltas: no
 * second copy of the state to keep up to date, and dropping old versions is free.)
 */
class VersionedMap<V> {
  /** Committed state at `latestVersion`. */
  live = new Map<string, V>();
  latestVersion = 0;
  /** The oldest version that can still be rebuilt. */
  private oldestVersion = 0;
  /** Per version v in (oldestVersion, latestVersion]: how to get version v - 1 back from v. */
  private readonly undo = new Map<number, Undo<V>>();

  constructor(private readonly snapshotEvery: number) {}

  load(version: number): Map<string, V> {
    if (version === this.latestVersion) return this.live;
    if (version > this.latestVersion || version < this.oldestVersion) {
      throw new CheckpointError(`State version ${version} is not available (latest ${this.latestVersion}, oldest ${this.oldestVersion}).`, {
        code: 'STATE_VERSION_MISSING',
        hint: 'the checkpoint and the state store disagree; restore both from the same point or start with a new checkpoint.',
      });
    }
    // Re-executing an older batch: rebuild that version and make it the latest again.
    const rebuilt = new Map(this.live);
    for (let v = this.latestVersion; v > version; v--) {
      const { keys, previous } = this.undo.get(v)!;
      for (let i = 0; i < keys.length; i++) {
        const old = previous[i]!;
        if (old === TOMBSTONE) rebuilt.delete(keys[i]!);
        else rebuilt.set(keys[i]!, old);
      }
      this.undo.delete(v);
    }
    this.live = rebuilt;
    this.latestVersion = version;
    return this.live;
  }

  /** Applies `delta` (made over version `fromVersion`); `undo` holds what it overwrites. */
  commit(fromVersion: number, delta: Delta<V>, undo: Undo<V>): number {
    if (fromVersion !== this.latestVersion) {
      throw new CheckpointError(`Concurrent update to state: version ${fromVersion} is no longer the latest (${this.latestVersion}).`, {
        code: 'STATE_CONCURRENT_UPDATE', retryable: true,
      });
    }
    const live = this.live;
    // forEach, not for-of with destructuring: no [key, value] array per entry.
    delta.forEach((v, k) => {
      if (v === TOMBSTONE) live.delete(k);
      else live.set(k, v);
    });
    this.latestVersion = fromVersion + 1;
    this.undo.set(this.latestVersion, undo);
    // The same retention as a snapshot every `snapshotEvery` versions: between snapshotEvery and
    // 2 * snapshotEvery - 1 older versions stay available.
    if (this.latestVersion - this.oldestVersion >= this.snapshotEvery * 2) {
      const target = this.latestVersion - this.snapshotEvery;
      for (let v = this.oldestVersion + 1; v <= target; v++) this.undo.delete(v);
      this.oldestVersion = target;
    }
    return this.latestVersion;
  }
}

class MemoryStateStore<V> implements StateStore<V> {
  private delta: Delta<V> = new Map();
  /** Each key's base value before its first write in this version, in write order. */
  private undo: Undo<V> = { keys: [], previous: [] };
  private sizeDelta = 0;
  /**
   * The last key looked up, whether it was present, whether this version already wrote it, and
   * (if not) its base value: operators read a key and then write or remove it, so put() and
   * remove() usually know without a second lookup, and the undo record costs no extra lookup.
   */
  private lastKey: string | null = null;
  private lastPresent = false;
  private lastWritten = false;
  private lastBase: V | undefined = undefined;

  constructor(private readonly map: VersionedMap<V>, private readonly base: Map<string, V>, readonly version: number) {}

  get(key: string): V | undefined {
    const d = this.delta.get(key);
    let v: V | undefined;
    if (d !== undefined) {
      v = d === TOMBSTONE ? undefined : d;
      this.lastWritten = true;
    } else {
      v = this.base.get(key);
      this.lastWritten = false;
      this.lastBase = v;
    }
    this.lastKey = key;
    this.lastPresent = v !== undefined;
    return v;
  }

  /** Looks `key` up unless it is the last key looked up or written (see `lastKey`). */
  private lookUp(key: string): void {
    if (key !== this.lastKey) this.get(key);
  }

  /** Before the first write of the last key looked up in this version: remember its base value. */
  private recordFirstWrite(key: string): void {
    if (this.lastWritten) return;
    this.undo.keys.push(key);
    this.undo.previous.push(this.lastBase === undefined ? TOMBSTONE : this.lastBase);
    this.lastBase = undefined;
  }

  put(key: string, value: V): void {
    this.lookUp(key);
    if (!this.lastPresent) this.sizeDelta++;
    this.recordFirstWrite(key);
    this.delta.set(key, value);
    this.lastKey = key;
    this.lastPresent = true;
    this.lastWritten = true;
  }

  remove(key: string): void {
    this.lookUp(key);
    if (!this.lastPresent) return;
    this.sizeDelta--;
    this.recordFirstWrite(key);
    this.delta.set(key, TOMBSTONE);
    this.lastKey = key;
    this.lastPresent = false;
    this.lastWritten = true;
  }

  *entries(): IterableIterator<[string, V]> {
    for (const [k, v] of this.base) {
      if (!this.delta.has(k)) yield [k, v];
    }
    for (const [k, v] of this.delta) {
      if (v !== TOMBSTONE) yield [k, v];
    }
  }

  get size(): number {
    return this.base.size + this.sizeDelta;
  }

  async commit(): Promise<number> {
    const { delta, undo } = this;
    this.reset();
    return this.map.commit(this.version, delta, undo);
  }

  abort(): void {
    this.reset();
  }

  private reset(): void {
    this.delta = new Map();
    this.undo = { keys: [], previous: [] };
    this.sizeDelta = 0;
    this.lastKey = null;
    this.lastPresent = false;
    this.lastWritten = false;
    this.lastBase = undefined;
  }
}

export class MemoryStateStoreProvider implements StateStoreProvider {
  private readonly maps = new Map<string, VersionedMap<unknown>>();

  /** Spark keeps 100 versions by default (spark.sql.streaming.minBatchesToRetain). */
  constructor(private readonly versionsToRetain = 100) {}

  async open<V>(id: StateStoreId, version: number): Promise<StateStore<V>> {
    const key = `${id.operatorId}/${id.storeName}`;
    let map = this.maps.get(key) as VersionedMap<V> | undefined;
    if (!map) {
      map = new VersionedMap<V>(this.versionsToRetain);
      this.maps.set(key, map as VersionedMap<unknown>);
    }
    if (version > map.latestVersion && map.latestVersion === 0 && map.live.size === 0) {
      // An operator that had nothing to commit yet (e.g. added after a compatible change) starts empty.
      map.latestVersion = version;
    }
    return new MemoryStateStore<V>(map, map.load(version), version);
  }
}
