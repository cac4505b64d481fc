import { CheckpointError } from '../errors/sluice-error.js';
import type { StateStore, StateStoreId, StateStoreProvider } from './state-store.js';

const TOMBSTONE = Symbol('removed');
type Delta<V> = Map<string, V | typeof TOMBSTONE>;

/**
 * In-memory versioned state: the latest committed map plus one delta per version, so that
 * committing costs O(changed keys) and an older version can be rebuilt by replaying deltas over
 * the last snapshot. Plays the role of Spark's HDFS-backed store in tests and local runs.
 */
class VersionedMap<V> {
  /** Committed state at `latestVersion`. */
  live = new Map<string, V>();
  latestVersion = 0;
  private snapshotVersion = 0;
  private snapshot = new Map<string, V>();
  private readonly deltas = new Map<number, Delta<V>>();

  constructor(private readonly snapshotEvery: number) {}

  load(version: number): Map<string, V> {
    if (version === this.latestVersion) return this.live;
    if (version > this.latestVersion || version < this.snapshotVersion) {
      throw new CheckpointError(`State version ${version} is not available (latest ${this.latestVersion}, oldest ${this.snapshotVersion}).`, {
        code: 'STATE_VERSION_MISSING',
        hint: 'the checkpoint and the state store disagree; restore both from the same point or start with a new checkpoint.',
      });
    }
    // Re-executing an older batch: rebuild that version and make it the latest again.
    const rebuilt = new Map(this.snapshot);
    for (let v = this.snapshotVersion + 1; v <= version; v++) applyDelta(rebuilt, this.deltas.get(v)!);
    for (const v of [...this.deltas.keys()]) if (v > version) this.deltas.delete(v);
    this.live = rebuilt;
    this.latestVersion = version;
    return this.live;
  }

  commit(fromVersion: number, delta: Delta<V>): number {
    if (fromVersion !== this.latestVersion) {
      throw new CheckpointError(`Concurrent update to state: version ${fromVersion} is no longer the latest (${this.latestVersion}).`, {
        code: 'STATE_CONCURRENT_UPDATE', retryable: true,
      });
    }
    applyDelta(this.live, delta);
    this.latestVersion = fromVersion + 1;
    this.deltas.set(this.latestVersion, delta);
    if (this.latestVersion - this.snapshotVersion >= this.snapshotEvery * 2) this.compact();
    return this.latestVersion;
  }

  /** Folds the oldest deltas into the snapshot, keeping `snapshotEvery` versions replayable. */
  private compact(): void {
    const target = this.latestVersion - this.snapshotEvery;
    for (let v = this.snapshotVersion + 1; v <= target; v++) {
      applyDelta(this.snapshot, this.deltas.get(v)!);
      this.deltas.delete(v);
    }
    this.snapshotVersion = target;
  }
}

function applyDelta<V>(target: Map<string, V>, delta: Delta<V>): void {
  // forEach, not for-of with destructuring: no [key, value] array per entry.
  delta.forEach((v, k) => {
    if (v === TOMBSTONE) target.delete(k);
    else target.set(k, v);
  });
}

class MemoryStateStore<V> implements StateStore<V> {
  private delta: Delta<V> = new Map();
  private sizeDelta = 0;
  /**
   * The last key looked up and whether it was present: operators read a key and then write or
   * remove it, so put() and remove() usually know without a second lookup.
   */
  private lastKey: string | null = null;
  private lastPresent = false;

  constructor(private readonly map: VersionedMap<V>, private readonly base: Map<string, V>, readonly version: number) {}

  get(key: string): V | undefined {
    const d = this.delta.get(key);
    const v = d !== undefined ? (d === TOMBSTONE ? undefined : d) : this.base.get(key);
    this.lastKey = key;
    this.lastPresent = v !== undefined;
    return v;
  }

  private has(key: string): boolean {
    return key === this.lastKey ? this.lastPresent : this.get(key) !== undefined;
  }

  put(key: string, value: V): void {
    if (!this.has(key)) this.sizeDelta++;
    this.delta.set(key, value);
    this.lastKey = key;
    this.lastPresent = true;
  }

  remove(key: string): void {
    if (!this.has(key)) return;
    this.sizeDelta--;
    this.delta.set(key, TOMBSTONE);
    this.lastKey = key;
    this.lastPresent = false;
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
    const delta = this.delta;
    this.reset();
    return this.map.commit(this.version, delta);
  }

  abort(): void {
    this.reset();
  }

  private reset(): void {
    this.delta = new Map();
    this.sizeDelta = 0;
    this.lastKey = null;
    this.lastPresent = false;
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
