/**
 * DynamoDbStateStoreProvider: the engine's versioned state stores in one DynamoDB table, laid out
 * like Spark's HDFS-backed store (delta files plus periodic snapshots) because DynamoDB bills by
 * the item-kilobyte: one packed, gzip'd item per committed version costs a handful of write units
 * where one item per key would cost one unit per changed key.
 *
 * Items, per store (pk = `${queryName}#${partitionId}#${operatorId}/${storeName}`):
 *
 *   d#<version>#<chunk>   the delta that made `version`: the puts and the removals of that batch
 *   s#<version>#<chunk>   the whole state at `version`, written instead of a delta every
 *                         `snapshotEvery` versions (version % snapshotEvery == 0), or, with
 *                         `snapshotByBytes` (the deployed runtime), once the deltas since the last
 *                         snapshot outweigh a new one and `snapshotEvery` versions have passed
 *   m#<version>           the snapshot's marker, written after all its chunks: a snapshot without
 *                         a marker is an unfinished write and is never read
 *
 * In S3 when cheaper: with an object location (the deployed runtime's S3 sinks: the sink bucket,
 * under `<prefix>_sluice_state/<store pk>/`, hidden from the sink's readers), a payload whose chunk
 * items would cost more (written, then deleted by a purge) than one S3 PUT at the price table's
 * prices is one object instead, its hash
 * in the object's metadata: a delta as `d<version>` and no item at all (a version with no delta item
 * is read from its object; a version with neither was never committed), a snapshot as
 * `s<version>`, named by its marker (`s3`), which is written after it. The snapshot's marker lists
 * the objects the next snapshot deletes, as it lists items. A reader needs the same location.
 *
 * A payload (JSON, then gzip) above `chunkBytes` (~350 KB; DynamoDB's item limit is 400 KB) is split
 * into chunks. Every chunk records the chunk count `n` and a hash `h` of the whole payload; chunk 0
 * of a delta (resp. the marker of a snapshot) is written last and is the authority: a reader uses
 * only the chunks whose hash matches it, and refuses a version whose chunks are incomplete. A
 * re-run of the same batch rewrites its version with identical bytes (payloads are sorted by key,
 * so the same state gives the same bytes and the same hash).
 *
 * open(V) loads the latest complete snapshot <= V and the deltas after it up to V, all strongly
 * consistent (3 requests: the marker, then the snapshot chunks and the deltas in parallel); a
 * version that was never committed is an error. A process-level cache (module scope: it survives
 * between invocations of a warm Lambda container) holds the latest committed state per store: an
 * open at the cached version costs no request at all; any other version is loaded from the table.
 * Only a successful commit updates the cache, and it is keyed by table and store, so two
 * DynamoDB endpoints with the same table names must not be used from one process.
 *
 * Purging: a snapshot's marker lists the items it makes obsolete (the previous snapshot and the
 * deltas between them). When the next snapshot is written, the items listed by the previous one are
 * deleted by key (no reads needed), so the table keeps the previous snapshot and everything after
 * it: any version since the previous snapshot can still be opened (a re-run needs only one back).
 *
 * Values: the engine's immutable JSON-friendly values. JSON alone would turn `undefined` array
 * elements and non-finite numbers into null and -0 into 0; those are written as tagged objects
 * (`{"\u0000t": "u" | "NaN" | "Infinity" | "-Infinity" | "-0"}`) and restored on load, so a value
 * round-trips exactly (an object property whose value is undefined is kept too); a long beyond
 * 2^53 (a bigint) is `{"\u0000t": "n<digits>"}`, a decimal `{"\u0000t": "d<scale>:<unscaled>"}`,
 * binary `{"\u0000t": "b<base64>"}`, a map `{"\u0000t": "m", "e": [[key, value], ...]}`. Sets and
 * other class instances are not supported (the engine stores none).
 */
import { createHash } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import { CURRENT_PRICES, unitPrices, type UnitPrices } from '../core/price-table.js';
import { s3Sdk } from './s3-sdk.js';
import { deleteKeys, encodeKeySegment, normalizePrefix } from './s3-util.js';
import { CheckpointError } from '../errors/sluice-error.js';
import type { CostMeter } from '../core/cost-meter.js';
import type { StateStore, StateStoreId, StateStoreProvider, StateView } from '../state/state-store.js';
import { batchWriteAll, itemSize, mapLimited, meterUnits, queryAll, writeUnitsFor, type Item } from './dynamodb-cost.js';
import { STATE_ITEMS, padChunk, padId } from './tables.js';
import { decodeStateJson } from './state-json.js';
import { gzipJsonParts, type PayloadStats } from './state-payload-stream.js';

export { decodeStateJson, encodeStateJson } from './state-json.js';

/** Format of the state payloads; a reader refuses a newer one. */
export const STATE_FORMAT_VERSION = 1;
export const DEFAULT_SNAPSHOT_EVERY = 20;
/** Payload bytes per item: DynamoDB's limit is 400 KB per item, names and key included. */
export const DEFAULT_CHUNK_BYTES = 350 * 1024;

// ---------------------------------------------------------------------------------------------
// The process-level cache

interface SnapshotInfo {
  readonly version: number;
  readonly chunks: number;
  /** Its gzip'd payload bytes and entry count (to tell when the deltas since it outweigh a new one). */
  readonly bytes: number;
  readonly entries: number;
  /** Sort keys that become deletable once a snapshot after this one exists. */
  readonly obsolete: readonly string[];
  /** S3 object keys that become deletable then (payloads stored as objects). */
  readonly obsoleteObjects: readonly string[];
  /** Its own payload's object, when it is one. */
  readonly object?: string;
}

/** A store's committed state at `version` and what the table holds for it since its snapshot. */
interface LoadedState {
  map: Map<string, unknown>;
  version: number;
  /** The latest snapshot <= version (null: none, versions 1.. are all deltas). */
  base: SnapshotInfo | null;
  /** The deltas after `base` up to `version`: [version, chunk count]. */
  deltas: [number, number][];
  /** Their gzip'd payload bytes and entries (puts and removals), summed. */
  deltaBytes: number;
  deltaEntries: number;
  /** The S3 objects among those deltas' payloads (deltas with no item: chunk count 0). */
  deltaObjects: string[];
  /** Operators' indexes of `map` (`StateStore.view`), told every committed change. */
  views?: Map<string, StateView>;
}

/** Latest committed state per store, least recently used evicted beyond `maxEntries`. */
export class StateCache {
  private readonly entries = new Map<string, LoadedState>();

  constructor(readonly maxEntries = 32) {}

  get(key: string): LoadedState | undefined {
    const e = this.entries.get(key);
    if (e) {
      this.entries.delete(key);
      this.entries.set(key, e);
    }
    return e;
  }

  set(key: string, state: LoadedState): void {
    this.entries.delete(key);
    this.entries.set(key, state);
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }

  /** The cached version of a store, if any (for tests and diagnostics). */
  versionOf(key: string): number | undefined {
    return this.entries.get(key)?.version;
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}

/** Shared by every provider in the process (a warm Lambda container keeps it between invocations). */
export const sharedStateCache = new StateCache();

// ---------------------------------------------------------------------------------------------
// The store

const TOMBSTONE: unique symbol = Symbol('removed');
type Delta = Map<string, unknown>;

class DynamoDbStateStore<V> implements StateStore<V> {
  private delta: Delta = new Map();
  private sizeDelta = 0;
  private committed = false;

  constructor(
    private readonly provider: DynamoDbStateStoreProvider,
    private readonly pk: string,
    private readonly state: LoadedState,
    readonly version: number,
  ) {}

  private get base(): Map<string, V> {
    return this.state.map as Map<string, V>;
  }

  get(key: string): V | undefined {
    const d = this.delta.get(key);
    if (d !== undefined) return d === TOMBSTONE ? undefined : (d as V);
    return this.base.get(key);
  }

  put(key: string, value: V): void {
    this.checkOpen();
    if (this.get(key) === undefined) this.sizeDelta++;
    this.delta.set(key, value);
  }

  remove(key: string): void {
    this.checkOpen();
    if (this.get(key) === undefined) return;
    this.sizeDelta--;
    this.delta.set(key, TOMBSTONE);
  }

  *entries(): IterableIterator<[string, V]> {
    for (const [k, v] of this.base) if (!this.delta.has(k)) yield [k, v];
    for (const [k, v] of this.delta) if (v !== TOMBSTONE) yield [k, v as V];
  }

  get size(): number {
    return this.base.size + this.sizeDelta;
  }

  view<T extends StateView>(name: string, build: (committed: Iterable<[string, V]>) => T): T {
    const views = (this.state.views ??= new Map());
    let view = views.get(name);
    if (view === undefined) views.set(name, (view = build(this.base.entries())));
    return view as T;
  }

  async commit(): Promise<number> {
    this.checkOpen();
    const version = await this.provider.commitVersion(this.pk, this.state, this.version, this.delta);
    this.committed = true;
    this.delta = new Map();
    this.sizeDelta = 0;
    return version;
  }

  abort(): void {
    this.delta = new Map();
    this.sizeDelta = 0;
  }

  private checkOpen(): void {
    if (this.committed) {
      throw new CheckpointError(`State store ${this.pk} version ${this.version} was already committed; open the next version to change it.`, {
        code: 'STATE_ALREADY_COMMITTED',
      });
    }
  }
}

export interface DynamoDbStateStoreOptions {
  readonly client: DynamoDBClient;
  readonly table: string;
  readonly queryName: string;
  readonly partitionId: string;
  readonly meter?: CostMeter;
  /**
   * A full snapshot instead of a delta every this many versions (default 20); with
   * `snapshotByBytes`, the fewest versions between two snapshots.
   */
  readonly snapshotEvery?: number;
  /**
   * Snapshot once the deltas since the last snapshot outweigh a new one in bytes (and at least
   * `snapshotEvery` versions passed), so the state's write cost follows its change, not its size:
   * a delta costs what changed, and the snapshots add at most as much again.
   */
  readonly snapshotByBytes?: boolean;
  /** Payload bytes per item before splitting into chunks (default 350 KB). */
  readonly chunkBytes?: number;
  /** The latest-state cache (default: the process-wide one; null: none). */
  readonly cache?: StateCache | null;
  /** Where payloads go when an S3 object is cheaper than their chunk items (default: always items). */
  readonly objects?: StateObjectLocation;
  /** The prices that decide between items and an object (default: the current price table's). */
  readonly prices?: UnitPrices;
}

/** A bucket and key prefix the state store may keep payloads in. */
export interface StateObjectLocation {
  readonly client: S3Client;
  readonly bucket: string;
  /**
   * The key prefix: the deployment's sink prefix (not a replay's: the store key names the
   * namespace), so that a reader given the deployment finds the objects.
   */
  readonly prefix: string;
}

/** The folder, under the location's prefix, of the state objects (hidden: a leading `_`). */
export const STATE_OBJECT_FOLDER = '_sluice_state/';
/** The object metadata entry holding the payload's hash. */
const HASH_METADATA = 'sluice-hash';

interface ChunkItem {
  version: number;
  chunk: number;
  count: number;
  hash: string;
  data: Uint8Array;
}

export class DynamoDbStateStoreProvider implements StateStoreProvider {
  private readonly client: DynamoDBClient;
  private readonly table: string;
  private readonly meter: CostMeter | undefined;
  private readonly snapshotEvery: number;
  private readonly snapshotByBytes: boolean;
  private readonly chunkBytes: number;
  private readonly cache: StateCache | null;
  private readonly objects: StateObjectLocation | undefined;
  private readonly prices: UnitPrices;
  /** The last failure to delete obsolete items (purging never fails a commit). */
  lastPurgeError: unknown = undefined;
  /** When set, what the payload writes handed to zlib (largest piece, whole text): for tests and the bench. */
  payloadStats: PayloadStats | undefined;

  constructor(readonly options: DynamoDbStateStoreOptions) {
    this.client = options.client;
    this.table = options.table;
    this.meter = options.meter;
    this.snapshotEvery = options.snapshotEvery ?? DEFAULT_SNAPSHOT_EVERY;
    this.snapshotByBytes = options.snapshotByBytes ?? false;
    this.chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK_BYTES;
    this.cache = options.cache === undefined ? sharedStateCache : options.cache;
    this.objects = options.objects;
    this.prices = options.prices ?? unitPrices(CURRENT_PRICES);
    if (!Number.isInteger(this.snapshotEvery) || this.snapshotEvery < 1) throw new RangeError(`snapshotEvery must be a positive integer, got ${this.snapshotEvery}`);
    if (!(this.chunkBytes >= 1024 && this.chunkBytes <= 380 * 1024)) throw new RangeError(`chunkBytes must be between 1 KB and 380 KB, got ${this.chunkBytes}`);
  }

  /** The partition key of a store's items. */
  storeKey(id: StateStoreId): string {
    return `${this.options.queryName}#${this.options.partitionId}#${id.operatorId}/${id.storeName}`;
  }

  /** The cache key of a store: table and partition key. */
  cacheKey(id: StateStoreId): string {
    return `${this.table}|${this.storeKey(id)}`;
  }

  async open<V>(id: StateStoreId, version: number): Promise<StateStore<V>> {
    if (!Number.isInteger(version) || version < 0) throw new RangeError(`state version must be a non-negative integer, got ${version}`);
    const pk = this.storeKey(id);
    if (version === 0) return new DynamoDbStateStore<V>(this, pk, { map: new Map(), version: 0, base: null, deltas: [], deltaBytes: 0, deltaEntries: 0, deltaObjects: [] }, 0);
    const cached = this.cache?.get(`${this.table}|${pk}`);
    if (cached && cached.version === version) return new DynamoDbStateStore<V>(this, pk, cached, version);
    return new DynamoDbStateStore<V>(this, pk, await this.load(pk, version), version);
  }

  // -------------------------------------------------------------------------------------------
  // Loading

  private async load(pk: string, version: number): Promise<LoadedState> {
    const markers = await queryAll(this.client, {
      TableName: this.table,
      KeyConditionExpression: 'pk = :pk AND sk BETWEEN :lo AND :hi',
      ExpressionAttributeValues: { ':pk': { S: pk }, ':lo': { S: `${STATE_ITEMS.snapshotMarkerPrefix}${padId(0)}` }, ':hi': { S: `${STATE_ITEMS.snapshotMarkerPrefix}${padId(version)}` } },
      ScanIndexForward: false, Limit: 1, ConsistentRead: true,
    }, this.meter, 1);
    const marker = markers[0];
    const snapshotVersion = marker ? Number(marker.v!.N) : 0;
    const snapshotObject = marker?.s3?.S;
    const [snapshotItems, deltaItems] = await Promise.all([
      marker && snapshotObject === undefined
        ? queryAll(this.client, {
          TableName: this.table,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)',
          ExpressionAttributeValues: { ':pk': { S: pk }, ':p': { S: `${STATE_ITEMS.snapshotPrefix}${padId(snapshotVersion)}#` } },
          ConsistentRead: true,
        }, this.meter)
        : Promise.resolve([]),
      snapshotVersion < version
        ? queryAll(this.client, {
          TableName: this.table,
          KeyConditionExpression: 'pk = :pk AND sk BETWEEN :lo AND :hi',
          ExpressionAttributeValues: {
            ':pk': { S: pk },
            ':lo': { S: `${STATE_ITEMS.deltaPrefix}${padId(snapshotVersion + 1)}#` },
            ':hi': { S: `${STATE_ITEMS.deltaPrefix}${padId(version)}#~` },
          },
          ConsistentRead: true,
        }, this.meter)
        : Promise.resolve([]),
    ]);
    this.meter?.add('stateBytesRead', [...markers, ...snapshotItems, ...deltaItems].reduce((a, i) => a + itemSize(i), 0));
    const versionsWithItems = new Set(deltaItems.map((i) => Number(i.v!.N)));
    const objectDeltas: number[] = [];
    for (let v = snapshotVersion + 1; v <= version; v++) if (!versionsWithItems.has(v)) objectDeltas.push(v);
    const [snapshotPayload, deltaPayloads] = await Promise.all([
      snapshotObject === undefined ? Promise.resolve(undefined) : this.readObject(pk, snapshotObject, marker!.h!.S!),
      this.readDeltaObjects(pk, objectDeltas),
    ]);

    const map = new Map<string, unknown>();
    let base: SnapshotInfo | null = null;
    if (marker) {
      const count = Number(marker.n!.N);
      const hash = marker.h!.S!;
      checkFormat(marker, pk);
      if (snapshotObject !== undefined && snapshotPayload === undefined) throw missingObject(pk, snapshotObject);
      const payload = snapshotPayload ?? assemble(pk, `snapshot ${snapshotVersion}`, snapshotItems.map(toChunk), count, hash);
      const decoded = decodePayload(payload) as { e: [string, unknown][] };
      for (const [k, v] of decoded.e) map.set(k, v);
      const object = snapshotObject;
      base = {
        version: snapshotVersion, chunks: count, obsolete: JSON.parse(marker.o?.S ?? '[]') as string[],
        obsoleteObjects: JSON.parse(marker.os?.S ?? '[]') as string[], ...(object ? { object } : {}),
        bytes: Number(marker.bytes?.N ?? payload.byteLength), entries: Number(marker.entries?.N ?? decoded.e.length),
      };
    }

    const byVersion = new Map<number, ChunkItem[]>();
    for (const item of deltaItems) {
      checkFormat(item, pk);
      const c = toChunk(item);
      let list = byVersion.get(c.version);
      if (!list) byVersion.set(c.version, (list = []));
      list.push(c);
    }
    const deltas: [number, number][] = [];
    const deltaObjects: string[] = [];
    let deltaBytes = 0;
    let deltaEntries = 0;
    for (let v = snapshotVersion + 1; v <= version; v++) {
      const chunks = byVersion.get(v);
      const head = chunks?.find((c) => c.chunk === 0);
      const object = head ? undefined : deltaPayloads.get(v);
      if (!head && !object) throw missingVersion(pk, v, version, snapshotVersion);
      const payload = object ? object.payload : assemble(pk, `delta ${v}`, chunks!, head!.count, head!.hash);
      const d = decodePayload(payload) as { p: [string, unknown][]; r: string[] };
      for (const [k, val] of d.p) map.set(k, val);
      for (const k of d.r) map.delete(k);
      deltas.push([v, head ? head.count : 0]);
      if (object) deltaObjects.push(object.key);
      deltaBytes += payload.byteLength;
      deltaEntries += d.p.length + d.r.length;
    }
    return { map, version, base, deltas, deltaBytes, deltaEntries, deltaObjects };
  }

  /** The object key of a store's delta or snapshot payload (`kind`: d or s). */
  objectKey(pk: string, kind: 'd' | 's', version: number): string {
    return `${normalizePrefix(this.objects?.prefix ?? '')}${STATE_OBJECT_FOLDER}${encodeKeySegment(pk)}/${kind}${padId(version)}`;
  }

  /** The deltas of `versions` that are objects (a version missing here was never committed), 8 reads at a time. */
  private async readDeltaObjects(pk: string, versions: readonly number[]): Promise<Map<number, { key: string; payload: Buffer }>> {
    const found = new Map<number, { key: string; payload: Buffer }>();
    if (!this.objects || versions.length === 0) return found;
    await mapLimited(versions, 8, async (v) => {
      const key = this.objectKey(pk, 'd', v);
      const payload = await this.readObject(pk, key);
      if (payload) found.set(v, { key, payload });
    });
    return found;
  }

  /** An object's payload, checked against its hash (the metadata's, or `expectedHash`); undefined if absent. */
  private async readObject(pk: string, key: string, expectedHash?: string): Promise<Buffer | undefined> {
    const objects = this.objects;
    if (!objects) {
      throw new CheckpointError(`State ${pk} has payloads in S3 (${key}), but this state store was given no S3 location.`, {
        code: 'STATE_OBJECTS_UNREACHABLE', hint: 'open the state with the deployment\'s S3 sink location (the runtime passes it).',
      });
    }
    this.meter?.add('s3Gets', 1);
    let payload: Buffer;
    let hash: string | undefined;
    try {
      const out = await objects.client.send(new (await s3Sdk()).GetObjectCommand({ Bucket: objects.bucket, Key: key }));
      payload = Buffer.from((await out.Body?.transformToByteArray()) ?? new Uint8Array());
      hash = out.Metadata?.[HASH_METADATA];
    } catch (error) {
      const name = (error as { name?: string }).name;
      if (name === 'NoSuchKey' || name === 'NotFound') return undefined;
      throw error;
    }
    this.meter?.add('stateBytesRead', payload.byteLength);
    const expected = expectedHash ?? hash;
    if (expected === undefined || hashOf(payload) !== expected) {
      throw new CheckpointError(`State ${pk} object ${key} does not match its hash.`, { code: 'STATE_CORRUPT', retryable: true });
    }
    return payload;
  }

  // -------------------------------------------------------------------------------------------
  // Committing

  /** Writes version `fromVersion + 1` of a store and makes it the cached state. */
  async commitVersion(pk: string, state: LoadedState, fromVersion: number, delta: Delta): Promise<number> {
    if (state.version !== fromVersion) {
      throw new CheckpointError(`Concurrent update to state ${pk}: version ${fromVersion} is no longer the latest (${state.version}).`, {
        code: 'STATE_CONCURRENT_UPDATE', retryable: true,
      });
    }
    const version = fromVersion + 1;
    try {
      const encoded = await this.encodeDelta(state, delta);
      if (this.snapshotDue(state, version, delta, encoded)) await this.writeSnapshot(pk, state, version, delta);
      else {
        const written = await this.writeChunks(pk, 'd', version, encoded.payload);
        state.deltas.push([version, written.count]);
        if (written.object) state.deltaObjects.push(written.object);
        state.deltaBytes += encoded.payload.byteLength;
        state.deltaEntries += encoded.entries;
      }
    } catch (error) {
      if (error instanceof CheckpointError) throw error;
      throw new CheckpointError(`Could not write state ${pk} version ${version}: ${(error as Error).message}`, {
        code: 'STATE_WRITE_FAILED', retryable: true, cause: error, context: { pk, version },
      });
    }
    for (const [k, v] of delta) {
      if (v === TOMBSTONE) state.map.delete(k);
      else state.map.set(k, v);
    }
    for (const view of state.views?.values() ?? []) {
      for (const [k, v] of delta) view.apply(k, v === TOMBSTONE ? undefined : v);
      view.committed?.();
    }
    state.version = version;
    this.cache?.set(`${this.table}|${pk}`, state);
    return version;
  }

  /**
   * Every `snapshotEvery` versions; with `snapshotByBytes`, once the deltas since the last snapshot
   * (this one included) weigh at least what a snapshot of the new state would, estimated from the
   * bytes per entry of the last snapshot (or of the deltas, before the first).
   */
  private snapshotDue(state: LoadedState, version: number, delta: Delta, encoded: { payload: Buffer; entries: number }): boolean {
    if (!this.snapshotByBytes) return version % this.snapshotEvery === 0;
    if (version - (state.base?.version ?? 0) < this.snapshotEvery) return false;
    let entries = state.map.size;
    for (const [k, v] of delta) {
      if (v === TOMBSTONE) { if (state.map.has(k)) entries--; } else if (!state.map.has(k)) entries++;
    }
    const deltaBytes = state.deltaBytes + encoded.payload.byteLength;
    const bytesPerEntry = state.base && state.base.entries > 0
      ? state.base.bytes / state.base.entries
      : deltaBytes / Math.max(1, state.deltaEntries + encoded.entries);
    return deltaBytes >= entries * bytesPerEntry;
  }

  private async encodeDelta(state: LoadedState, delta: Delta): Promise<{ payload: Buffer; entries: number }> {
    const puts: string[] = [];
    const removes: string[] = [];
    for (const [k, v] of delta) {
      if (v === TOMBSTONE) {
        if (state.map.has(k)) removes.push(k);
      } else puts.push(k);
    }
    puts.sort();
    removes.sort();
    const payload = await gzipJsonParts(['{"p":[', { elements: entriesOf(puts, (k) => delta.get(k)) }, '],"r":[', { elements: removes }, ']}'], this.payloadStats);
    return { payload, entries: puts.length + removes.length };
  }

  /**
   * The whole state at `version`, sorted by key, streamed: only the sorted keys (one reference each)
   * and a piece of text exist beside the state while it is written (state-payload-stream.ts).
   */
  private async writeSnapshot(pk: string, state: LoadedState, version: number, delta: Delta): Promise<void> {
    const keys: string[] = [];
    for (const k of state.map.keys()) if (!delta.has(k)) keys.push(k);
    for (const [k, v] of delta) if (v !== TOMBSTONE) keys.push(k);
    keys.sort();
    const valueOf = (k: string): unknown => (delta.has(k) ? delta.get(k) : state.map.get(k));
    const payload = await gzipJsonParts(['{"e":[', { elements: entriesOf(keys, valueOf) }, ']}'], this.payloadStats);
    const { count, object } = await this.writeChunks(pk, 's', version, payload);
    // What the next snapshot may delete: the previous snapshot and the deltas since it.
    const obsolete: string[] = [];
    const obsoleteObjects: string[] = [...(state.base?.object ? [state.base.object] : []), ...state.deltaObjects];
    if (state.base) {
      obsolete.push(`${STATE_ITEMS.snapshotMarkerPrefix}${padId(state.base.version)}`);
      for (let c = 0; c < state.base.chunks; c++) obsolete.push(`${STATE_ITEMS.snapshotPrefix}${padId(state.base.version)}#${padChunk(c)}`);
    }
    for (const [v, n] of state.deltas) for (let c = 0; c < n; c++) obsolete.push(`${STATE_ITEMS.deltaPrefix}${padId(v)}#${padChunk(c)}`);
    const marker: Item = {
      pk: { S: pk }, sk: { S: `${STATE_ITEMS.snapshotMarkerPrefix}${padId(version)}` },
      fmt: { N: String(STATE_FORMAT_VERSION) }, v: { N: String(version) }, n: { N: String(count) }, h: { S: hashOf(payload) },
      entries: { N: String(keys.length) }, bytes: { N: String(payload.byteLength) }, o: { S: JSON.stringify(obsolete) },
      ...(object ? { s3: { S: object } } : {}),
      ...(obsoleteObjects.length > 0 ? { os: { S: JSON.stringify(obsoleteObjects) } } : {}),
    };
    await this.put(marker);
    const toPurge = state.base?.obsolete ?? [];
    const objectsToPurge = state.base?.obsoleteObjects ?? [];
    state.base = { version, chunks: count, obsolete, obsoleteObjects, ...(object ? { object } : {}), bytes: payload.byteLength, entries: keys.length };
    state.deltas = [];
    state.deltaObjects = [];
    state.deltaBytes = 0;
    state.deltaEntries = 0;
    if (toPurge.length > 0) {
      try {
        await batchWriteAll(this.client, this.table, toPurge.map((sk) => ({ DeleteRequest: { Key: { pk: { S: pk }, sk: { S: sk } } } })), this.meter);
      } catch (error) {
        this.lastPurgeError = error;
      }
    }
    if (objectsToPurge.length > 0 && this.objects) {
      try {
        await deleteKeys(this.objects.client, this.objects.bucket, objectsToPurge);
      } catch (error) {
        this.lastPurgeError = error;
      }
    }
  }

  /**
   * Whether a payload of `bytes` costs less as one S3 PUT than as chunk items, at this provider's
   * prices, over its life: DynamoDB charges the items' write units twice (the write, then the
   * purge's delete, charged by the item's size), S3 nothing for the DELETE. Reads are left out: a
   * payload is read back only on a cold start (one GET against the items' read units), most never.
   */
  payloadAsObject(pk: string, bytes: number): boolean {
    if (!this.objects) return false;
    const itemOverhead = pk.length + 2 + 12 + 1 + 4 + 120;
    const items = Math.max(1, Math.ceil(bytes / this.chunkBytes));
    let itemUnits = 0;
    for (let c = 0; c < items; c++) itemUnits += writeUnitsFor(itemOverhead + Math.min(this.chunkBytes, bytes - c * this.chunkBytes));
    return this.prices.s3Put < 2 * itemUnits * this.prices.dynamoDbWriteUnit;
  }

  /**
   * Writes a payload as one object when that is cheaper (chunk count 0), else as chunk items;
   * chunk 0 goes last so that, for a delta, its presence means every chunk is there.
   */
  private async writeChunks(pk: string, kind: 'd' | 's', version: number, payload: Buffer): Promise<{ count: number; object?: string }> {
    const hash = hashOf(payload);
    const objects = this.objects;
    if (objects && this.payloadAsObject(pk, payload.byteLength)) {
      const object = this.objectKey(pk, kind, version);
      this.meter?.add('s3Puts', 1);
      await objects.client.send(new (await s3Sdk()).PutObjectCommand({
        Bucket: objects.bucket, Key: object, Body: payload, ContentLength: payload.byteLength, ContentType: 'application/gzip',
        Metadata: { [HASH_METADATA]: hash },
      }));
      this.meter?.add('stateBytesWritten', payload.byteLength);
      return { count: 0, object };
    }
    const prefix = kind === 'd' ? STATE_ITEMS.deltaPrefix : STATE_ITEMS.snapshotPrefix;
    const headLast = kind === 'd';
    const count = Math.max(1, Math.ceil(payload.byteLength / this.chunkBytes));
    const item = (c: number): Item => ({
      pk: { S: pk }, sk: { S: `${prefix}${padId(version)}#${padChunk(c)}` },
      fmt: { N: String(STATE_FORMAT_VERSION) }, v: { N: String(version) }, c: { N: String(c) }, n: { N: String(count) }, h: { S: hash },
      z: { B: payload.subarray(c * this.chunkBytes, Math.min((c + 1) * this.chunkBytes, payload.byteLength)) },
    });
    const rest = Array.from({ length: count - (headLast ? 1 : 0) }, (_, i) => (headLast ? i + 1 : i));
    await mapLimited(rest, 8, (c) => this.put(item(c)));
    if (headLast) await this.put(item(0));
    return { count };
  }

  private async put(item: Item): Promise<void> {
    const out = await this.client.send(new PutItemCommand({ TableName: this.table, Item: item, ReturnConsumedCapacity: 'TOTAL' }));
    const size = itemSize(item);
    meterUnits(this.meter, 'write', out.ConsumedCapacity, () => writeUnitsFor(size));
    this.meter?.add('stateBytesWritten', size);
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/** `[key, value]` of each key in order, made one at a time. */
function* entriesOf(keys: readonly string[], valueOf: (key: string) => unknown): Generator<[string, unknown]> {
  for (const k of keys) yield [k, valueOf(k)];
}

function hashOf(payload: Uint8Array): string {
  return createHash('sha256').update(payload).digest('hex').slice(0, 32);
}

function toChunk(item: Item): ChunkItem {
  return { version: Number(item.v!.N), chunk: Number(item.c!.N), count: Number(item.n!.N), hash: item.h!.S!, data: item.z!.B! };
}

function missingObject(pk: string, key: string): CheckpointError {
  return new CheckpointError(`State ${pk}: the snapshot object ${key} its marker names is not there.`, {
    code: 'STATE_CHUNK_MISSING', retryable: true,
    hint: 'the state objects under the sink prefix were deleted or moved by hand; restore them or start with a new checkpoint.',
  });
}

function checkFormat(item: Item, pk: string): void {
  const fmt = Number(item.fmt?.N ?? '1');
  if (fmt > STATE_FORMAT_VERSION) {
    throw new CheckpointError(`State ${pk} item ${item.sk?.S} has format ${fmt}; this Sluice reads up to ${STATE_FORMAT_VERSION}.`, {
      code: 'STATE_FORMAT_TOO_NEW', hint: 'run the Sluice version that wrote this state, or start with a new checkpoint.',
    });
  }
}

/** The payload from its chunks: only chunks of the authoritative hash, all `count` of them. */
function assemble(pk: string, what: string, chunks: readonly ChunkItem[], count: number, hash: string): Buffer {
  const parts: Uint8Array[] = [];
  for (let c = 0; c < count; c++) {
    const chunk = chunks.find((x) => x.chunk === c && x.hash === hash);
    if (!chunk) {
      throw new CheckpointError(`State ${pk} ${what} is incomplete: chunk ${c} of ${count} is missing or from another write.`, {
        code: 'STATE_CHUNK_MISSING', retryable: true,
        hint: 'a write of this version is in progress or was interrupted; retry. If it persists the state table was modified by hand.',
      });
    }
    parts.push(chunk.data);
  }
  const payload = Buffer.concat(parts);
  if (hashOf(payload) !== hash) {
    throw new CheckpointError(`State ${pk} ${what} does not match its hash.`, { code: 'STATE_CORRUPT', retryable: true });
  }
  return payload;
}

function decodePayload(payload: Buffer): unknown {
  return decodeStateJson(gunzipSync(payload).toString('utf8'));
}

function missingVersion(pk: string, missing: number, wanted: number, snapshotVersion: number): CheckpointError {
  const what = missing === wanted
    ? `State version ${wanted} of ${pk} was never committed`
    : `State version ${wanted} of ${pk} cannot be rebuilt: the delta of version ${missing} is missing (snapshot ${snapshotVersion})`;
  return new CheckpointError(`${what}.`, {
    code: 'STATE_VERSION_MISSING', context: { pk, version: wanted, missing, snapshotVersion },
    hint: 'the checkpoint and the state table disagree; restore both from the same point or start with a new checkpoint.',
  });
}
