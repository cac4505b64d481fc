/**
 * A query's monthly cost before it is deployed (`sluice cost`), from its plan and the per-request
 * formulas the cost meter uses (dynamodb-cost.ts: write units per started KB, x2 in a transaction;
 * read units per started 4 KB).
 *
 * The per-batch figures come from running the compiled query for real, in memory, on synthetic
 * records shaped by its source schema (`keys` distinct partition keys, event time advancing with
 * the rate): the engine's own output rows, state updates and progress record. Each DynamoDB item a
 * batch writes is then sized the way the adapters build it (offset entry, state delta chunk, sink
 * item, commit and progress in one transaction, watermark row), and priced.
 *
 * What it models per shard: the event source mapping invokes once a batch is full (`batchSize`) or
 * once per batching window (1 s) with what arrived. Each invocation runs what the real shard
 * invocation runs (in memory): recovery, the data batch and a no-data batch when the watermark
 * moved. Its log reads and writes are counted as they happen (one strongly consistent read unit
 * per GetItem or Query page, these items being small); per batch the watermark Query and update,
 * the state delta (a snapshot every `snapshotEvery` versions, and the deletes it makes), one sink
 * item per output row, and the commit transaction (condition check, commit, progress record).
 * The scheduled function runs once a minute; warm containers keep state cached, so state is not
 * re-read.
 */
import { gzipSync } from 'node:zlib';
import { MemoryCheckpoint } from '../checkpoint/memory-checkpoint.js';
import type { Checkpoint, MetadataLog } from '../checkpoint/checkpoint.js';
import type { StructField } from '../plan/data-types.js';
import { compileQuery, type CompiledQuery } from '../query/compiled-query.js';
import type { KinesisSourceSpec, StreamingQueryDefinition } from '../query/query-definition.js';
import { runShardInvocation } from '../query/shard-invocation.js';
import { sourceSchemaOf } from '../query/validate-query.js';
import { MemorySink } from '../sinks/memory-sink.js';
import { MemoryDeadLetterWriter } from '../sources/dead-letter.js';
import type { ShardRecord } from '../sources/kinesis-shard-source.js';
import { MemoryStateStoreProvider } from '../state/memory-state-store.js';
import type { StateStore, StateStoreId, StateStoreProvider } from '../state/state-store.js';
import { encodeStateJson } from './dynamodb-state-store.js';
import { itemSize, writeUnitsFor, type Item } from './dynamodb-cost.js';
import { CURRENT_PRICES, type PriceTable } from '../core/price-table.js';
import { commitProgressAttributes } from './progress-record.js';


// The price table lives in the engine core (the dashboard and the benchmark use it too).
export { PRICES_2026_12_US_EAST_1, type PriceTable } from '../core/price-table.js';

export interface CostEstimateInput {
  readonly recordsPerSecond: number;
  /** Distinct partition-key values (default 100). */
  readonly keys?: number;
  readonly shards?: number;
  /** The event source mapping's batch size (default 100, the construct's). */
  readonly batchSize?: number;
  readonly memoryMb?: number;
  /** Average Kinesis-trigger invocation duration (default 200 ms). */
  readonly invocationMs?: number;
  readonly snapshotEvery?: number;
  readonly prices?: PriceTable;
  /** Shards of each internal stream of a repartitioned query (default: `shards`). */
  readonly internalShards?: number;
}

/** What one steady-state invocation of one shard costs, in requests and units. */
export interface BatchUnits {
  readonly records: number;
  /** The data batch and, when the watermark moved, a no-data batch. */
  readonly batchesPerInvocation: number;
  readonly outputRows: number;
  readonly checkpointWriteUnits: number;
  readonly checkpointReadUnits: number;
  readonly stateWriteUnits: number;
  readonly sinkWriteUnits: number;
  readonly s3Puts: number;
  readonly stateBytes: number;
}

export interface CostLine {
  /** 1 for the source stage; k + 1 for hop k's internal stream and the stage reading it. */
  readonly stage: number;
  readonly component: string;
  readonly quantity: number;
  readonly unit: string;
  readonly usd: number;
}

export interface CostEstimate {
  readonly query: string;
  readonly prices: string;
  readonly shards: number;
  readonly recordsPerSecond: number;
  readonly invocationsPerMonth: number;
  readonly perBatch: BatchUnits;
  /** Per hop: records crossing per second, and the receiving stage's per-invocation units. */
  readonly hops: readonly HopEstimate[];
  readonly lines: readonly CostLine[];
  readonly totalUsd: number;
  /** Components left out of the total because they cannot be measured in memory yet. */
  readonly notEstimated?: readonly string[];
  /** What the estimate assumes beyond the options (a join's match rate, the span run in memory). */
  readonly assumptions?: readonly string[];
  /** Per stage, per second, as run in memory (queries over several streams). */
  readonly stages?: readonly StageRates[];
}

/** What one stage (one source's stage 1, or stage k) did per simulated second, summed over its shards. */
export interface StageRates {
  /** 1 for a source stage; k + 1 for the stage reading hop k. */
  readonly stage: number;
  /** The source stream a stage 1 reads. */
  readonly source?: string;
  readonly shards: number;
  readonly inputRecords: number;
  readonly invocations: number;
  readonly batches: number;
  readonly outputRows: number;
  readonly checkpointWriteUnits: number;
  readonly checkpointReadUnits: number;
  readonly stateWriteUnits: number;
  /** Held at the end of the run (gzip'd snapshot bytes over all shards). */
  readonly stateBytes: number;
  readonly sinkWriteUnits: number;
  readonly s3Puts: number;
  /** Records this stage put on its output hop, and their 25 KB payload units. */
  readonly hopRecords: number;
  readonly hopPayloadUnits: number;
}


export interface HopEstimate {
  readonly hop: number;
  readonly internalShards: number;
  readonly recordsPerSecond: number;
  readonly invocationsPerMonth: number;
  /** One invocation of the receiving stage on one internal shard. */
  readonly perBatch: BatchUnits;
}

export const SECONDS_PER_MONTH = 730 * 3600;
export const MINUTES_PER_MONTH = 730 * 60;

/** Records shaped by the source schema: `keys` partition keys in turn, event time advancing with the rate. */
export function syntheticRecords(
  definition: StreamingQueryDefinition, count: number, options: SyntheticOptions,
): ShardRecord[] {
  return syntheticSourceRecords(definition.source, count, options);
}

export interface SyntheticOptions {
  readonly keys: number;
  readonly recordsPerSecond: number;
  readonly startMs: number;
  readonly firstIndex?: number;
  /** Columns (lower case) whose value record `i` takes from a function instead (a join key that must match). */
  readonly columnValues?: Readonly<Record<string, (i: number, eventMs: number) => unknown>>;
}

/** One source stream's records (`syntheticRecords` for a source spec of a query over several streams). */
export function syntheticSourceRecords(spec: KinesisSourceSpec, count: number, options: SyntheticOptions): ShardRecord[] {
  const schema = sourceSchemaOf(spec);
  const partitionKey = spec.partitionKey?.toLowerCase();
  const records: ShardRecord[] = [];
  for (let n = 0; n < count; n++) {
    const i = (options.firstIndex ?? 0) + n;
    const eventMs = options.startMs + Math.floor((i * 1000) / options.recordsPerSecond);
    const values = schema.map((f) => options.columnValues?.[f.name.toLowerCase()]?.(i, eventMs)
      ?? syntheticValue(f, i, options.keys, eventMs, f.name.toLowerCase() === partitionKey));
    const key = partitionKey ? String(values[schema.findIndex((f) => f.name.toLowerCase() === partitionKey)]) : `k${i % options.keys}`;
    const data = spec.format === 'csv'
      ? values.map((v) => String(v)).join(',')
      : spec.format === 'raw' ? `event ${i} key ${key}`
        : JSON.stringify(Object.fromEntries(schema.map((f, j) => [f.name, values[j]])));
    records.push({
      sequenceNumber: `4968${String(i).padStart(52, '0')}`, partitionKey: key,
      dataBase64: Buffer.from(data).toString('base64'), approximateArrivalTimestampMs: eventMs,
    });
  }
  return records;
}

function syntheticValue(field: StructField, i: number, keys: number, eventMs: number, isKey: boolean): unknown {
  switch (field.type) {
    case 'timestamp': return new Date(eventMs).toISOString();
    case 'string': return isKey ? `key-${i % keys}` : `value-${i % 50}`;
    case 'int': case 'long': return isKey ? i % keys : i % 1000;
    case 'double': return isKey ? i % keys : ((i * 37) % 10_000) / 100;
    case 'boolean': return i % 2 === 0;
    default: return null;
  }
}


/**
 * `inner`, passing every call through, that after each commit hands `measure` the delta's size as
 * the deployed store encodes it (sorted puts and removes, gzipped JSON) and the number of changed keys.
 */
export function deltaMeasuringStore<V>(inner: StateStore<V>, measure: (payloadBytes: number, changedKeys: number, store: StateStore<V>) => void): StateStore<V> {
  const puts = new Map<string, V>();
  const removes = new Set<string>();
  const store: StateStore<V> = {
    get version() { return inner.version; },
    get size() { return inner.size; },
    get: (k) => inner.get(k),
    put: (k, v) => { puts.set(k, v); removes.delete(k); inner.put(k, v); },
    remove: (k) => { if (inner.get(k) !== undefined) { removes.add(k); puts.delete(k); } inner.remove(k); },
    entries: () => inner.entries(),
    abort: () => { puts.clear(); removes.clear(); inner.abort(); },
    async commit() {
      const entries = [...puts].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      const payload = gzipSync(encodeStateJson({ p: entries, r: [...removes].sort() }, entries.map((e) => e[1])));
      const changedKeys = entries.length + removes.size;
      const committed = await inner.commit();
      measure(payload.byteLength, changedKeys, store);
      return committed;
    },
  };
  return store;
}

/**
 * A state store provider that keeps state in memory and sizes what the DynamoDB store would write
 * for each committed version: its delta (gzip'd `{ p, r }` JSON in chunks of 350 KB) and, at the
 * end, a full snapshot. No `ownTable`, so operators write through put/remove as on DynamoDB.
 */
class SizingStateStoreProvider implements StateStoreProvider {
  readonly memory = new MemoryStateStoreProvider();
  /** Write units of each committed delta, in commit order. */
  readonly deltaUnits: number[] = [];
  readonly openStores = new Map<string, StateStore<unknown>>();

  constructor(private readonly pkPrefix: string) {}

  async open<V>(id: StateStoreId, version: number): Promise<StateStore<V>> {
    const inner = await this.memory.open<V>(id, version);
    const name = `${id.operatorId}/${id.storeName}`;
    const store = deltaMeasuringStore(inner, (payloadBytes) => {
      this.deltaUnits.push(chunkWriteUnits(`${this.pkPrefix}#${name}`, 'd#', payloadBytes));
    });
    this.openStores.set(name, store as StateStore<unknown>);
    return store;
  }

  get versionsCommitted(): number {
    return this.deltaUnits.length;
  }

  deltaUnitsSince(index: number): number {
    return this.deltaUnits.slice(index).reduce((a, b) => a + b, 0);
  }

  /** Write units of a full snapshot of every store as it stands, marker included. */
  snapshotWriteUnits(): { units: number; bytes: number } {
    let units = 0;
    let bytes = 0;
    for (const [name, store] of this.openStores) {
      const entries = [...store.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1));
      const payload = gzipSync(encodeStateJson({ e: entries }, entries.map((e) => e[1])));
      bytes += payload.byteLength;
      units += chunkWriteUnits(`${this.pkPrefix}#${name}`, 's#', payload.byteLength) + 1;
    }
    return { units, bytes };
  }
}

const CHUNK_BYTES = 350 * 1024;

/** The state store's chunk items for a payload of `bytes`, as dynamodb-state-store.ts builds them. */
export function chunkWriteUnits(pk: string, prefix: string, bytes: number): number {
  let units = 0;
  const count = Math.max(1, Math.ceil(bytes / CHUNK_BYTES));
  for (let c = 0; c < count; c++) {
    const item: Item = {
      pk: { S: pk }, sk: { S: `${prefix}000000000001#0000` }, fmt: { N: '1' }, v: { N: '1' }, c: { N: String(c) }, n: { N: String(count) },
      h: { S: '0'.repeat(32) }, z: { B: new Uint8Array(Math.min(CHUNK_BYTES, bytes - c * CHUNK_BYTES)) },
    };
    units += writeUnitsFor(itemSize(item));
  }
  return units;
}

export function checkpointItem(pk: string, sk: string, batchId: number, entry: unknown): Item {
  return { pk: { S: pk }, sk: { S: sk }, fmt: { N: '1' }, batchId: { N: String(batchId) }, entry: { S: JSON.stringify(entry) } };
}

/** A metadata log that counts its requests: each read is one strongly consistent GetItem or Query page. */
export class CountingLog<T> implements MetadataLog<T> {
  reads = 0;
  writes = 0;
  readonly added: [number, T][] = [];
  constructor(private readonly inner: MetadataLog<T>) {}
  add(batchId: number, entry: T): Promise<boolean> { this.writes++; this.added.push([batchId, entry]); return this.inner.add(batchId, entry); }
  get(batchId: number): Promise<T | undefined> { this.reads++; return this.inner.get(batchId); }
  getLatest(): Promise<[number, T] | undefined> { this.reads++; return this.inner.getLatest(); }
  purge(beforeBatchId: number): Promise<void> { return this.inner.purge(beforeBatchId); }
}

/**
 * Runs `invocations` invocations of `recordsPerBatch` records on one shard in memory (each runs
 * its data batch and the no-data batch a moved watermark calls for, as on Lambda) and sizes the
 * requests of the last `measured` of them, averaged per invocation.
 */
export async function measureInvocation(
  definition: StreamingQueryDefinition, query: CompiledQuery,
  options: { recordsPerBatch: number; keys: number; perShardRate: number; snapshotEvery: number; invocations?: number; measured?: number },
): Promise<BatchUnits> {
  const shardId = 'shardId-000000000000';
  const pk = `${definition.name}#${shardId}`;
  const memory = new MemoryCheckpoint();
  const state = new SizingStateStoreProvider(pk);
  const offsetLog = new CountingLog(memory.offsetLog);
  const commitLog = new CountingLog(memory.commitLog);
  let metadataReads = 0;
  const checkpoint: Checkpoint = {
    offsetLog, commitLog, stateStore: state,
    readQueryMetadata: () => { metadataReads++; return memory.readQueryMetadata(); },
    writeQueryMetadata: (m) => memory.writeQueryMetadata(m),
  };
  const sink = new MemorySink();
  const startMs = Date.UTC(2026, 0, 1);
  const total = options.invocations ?? 12;
  const measured = options.measured ?? 4;
  const mark = { reads: 0, offsets: 0, commits: 0, batches: 0, outputRows: 0, deltaUnits: 0, commitUnits: 0 };
  let batches = 0;
  let outputRows = 0;
  let deltaUnits = 0;
  let commitUnits = 0;
  const keyColumns = query.keyColumns.join(', ');
  for (let inv = 0; inv < total; inv++) {
    if (inv === total - measured) {
      Object.assign(mark, { reads: offsetLog.reads + commitLog.reads + metadataReads, offsets: offsetLog.writes, commits: commitLog.writes, batches, outputRows, deltaUnits, commitUnits });
    }
    const records = syntheticRecords(definition, options.recordsPerBatch, {
      keys: options.keys, recordsPerSecond: options.perShardRate, startMs, firstIndex: inv * options.recordsPerBatch,
    });
    const before = state.versionsCommitted;
    const result = await runShardInvocation(query, { shardId, records }, { checkpoint, sink, deadLetters: new MemoryDeadLetterWriter() });
    if (result.error) throw result.error;
    deltaUnits += state.deltaUnitsSince(before);
    for (const p of result.progress) {
      batches++;
      outputRows += p.sink.numOutputRows;
      // Sized as the deployed record is: Kinesis offsets, the sink's name, a cost map.
      const deployed = { ...p, sink: { ...p.sink, description: `DynamoDbUpsertSink[${definition.name}-sink-table by ${keyColumns}]` },
        cost: { dynamoDbReadUnits: 10, dynamoDbWriteUnits: 56, stateBytesWritten: 1022 } };
      // The record rides in the commit item (lib/aws/progress-record.ts): it counts where it makes that item larger.
      const commit = await memory.commitLog.get(p.batchId);
      const commitItem = { ...checkpointItem(pk, 'commit#000000000001', p.batchId, commit), ...commitProgressAttributes(deployed) };
      // The ConditionCheck of commit N-1 is counted although the watermark row's Update proves it once
      // the row recorded a commit (lib/aws/dynamodb-watermarks.ts): an upper bound.
      commitUnits += 2 * writeUnitsFor(itemSize(commitItem)) + (p.batchId > 0 ? 2 : 0);
    }
  }
  const n = measured;
  const perInvocation = (now: number, then: number): number => (now - then) / n;
  const lastOffsets = offsetLog.added.at(-1);
  const offsetUnits = lastOffsets ? writeUnitsFor(itemSize(checkpointItem(pk, 'offset#000000000001', lastOffsets[0], lastOffsets[1]))) : 1;
  const batchesPerInvocation = perInvocation(batches, mark.batches);
  const snapshot = state.snapshotWriteUnits();
  // A snapshot every `snapshotEvery` versions replaces a delta; it then deletes the previous
  // snapshot (about as many items as it wrote) and the deltas since (one unit each).
  const deltaPerVersion = perInvocation(deltaUnits, mark.deltaUnits) / Math.max(batchesPerInvocation, 1e-9);
  const stateUnitsPerVersion = ((options.snapshotEvery - 1) * deltaPerVersion + snapshot.units + snapshot.units + (options.snapshotEvery - 1)) / options.snapshotEvery;
  const sinkKind = definition.sink.kind;
  const rows = perInvocation(outputRows, mark.outputRows);
  return {
    records: options.recordsPerBatch,
    batchesPerInvocation,
    outputRows: rows,
    checkpointWriteUnits: perInvocation(offsetLog.writes, mark.offsets) * offsetUnits
      + perInvocation(commitUnits, mark.commitUnits)
      // The watermark row: one update per batch.
      + batchesPerInvocation,
    // The logs' reads, plus the watermark rows' Query per batch (combine), plus the namespace
    // pointer read at the start of each invocation (lib/aws/query-namespace.ts).
    checkpointReadUnits: perInvocation(offsetLog.reads + commitLog.reads + metadataReads, mark.reads) + batchesPerInvocation + 1,
    stateWriteUnits: stateUnitsPerVersion * batchesPerInvocation,
    // One conditional PutItem per result row; result items stay under 1 KB for these shapes.
    sinkWriteUnits: sinkKind === 'dynamodb' ? rows : 0,
    // s3-files: every batch's manifest, and the staged file and its copy once committed; s3-snapshot: the partition's one object.
    s3Puts: sinkKind === 'dynamodb' ? 0 : sinkKind === 's3-snapshot' ? batchesPerInvocation : batchesPerInvocation + (rows > 0 ? 2 * batchesPerInvocation : 0),
    stateBytes: snapshot.bytes,
  };
}

/** The event source mapping invokes when a batch is full, else once per 1 s batching window with what came. */
function invocationModel(recordsPerSecond: number, shards: number, batchSize: number) {
  const perShardRate = recordsPerSecond / shards;
  const invocationsPerShardSecond = perShardRate >= batchSize ? perShardRate / batchSize : Math.min(1, perShardRate);
  const recordsPerBatch = Math.max(1, Math.round(perShardRate / Math.max(invocationsPerShardSecond, 1e-9)));
  return { perShardRate, recordsPerBatch, invocationsPerMonth: invocationsPerShardSecond * shards * SECONDS_PER_MONTH };
}

export async function estimateMonthlyCost(definition: StreamingQueryDefinition, input: CostEstimateInput): Promise<CostEstimate> {
  const prices = input.prices ?? CURRENT_PRICES;
  const shards = input.shards ?? 1;
  const internalShards = input.internalShards ?? shards;
  const keys = input.keys ?? 100;
  const batchSize = input.batchSize ?? 100;
  const memoryMb = input.memoryMb ?? 1024;
  const invocationMs = input.invocationMs ?? 200;
  const snapshotEvery = input.snapshotEvery ?? 20;
  const staged = compileQuery(definition, { expectedShardCount: shards, allowRepartition: true });
  // The per-invocation units are measured on the whole query as one stage (one shard makes every
  // operator co-partitioned); with hops, stage 1 keeps its checkpoint share and the last stage the
  // state and sink writes, measured at that stage's own batch size.
  const whole = staged.hops.length === 0 ? staged : compileQuery(definition, { expectedShardCount: 1 });
  const source = invocationModel(input.recordsPerSecond, shards, batchSize);
  const measured = await measureInvocation(definition, whole, {
    recordsPerBatch: source.recordsPerBatch, keys: Math.max(1, Math.round(keys / shards)), perShardRate: source.perShardRate, snapshotEvery,
  });
  // Stage 1 sends, per batch, one record to every internal shard (empty ones too, so each state
  // partition hears of every source shard's progress; repartition-sink.ts), holding the rows
  // routed there; one payload unit each while a record stays under 25 KB.
  const sourceBatchesPerSecond = (source.invocationsPerMonth / SECONDS_PER_MONTH) * measured.batchesPerInvocation;
  const hops: HopEstimate[] = [];
  for (const hop of staged.hops) {
    const receiving = invocationModel(sourceBatchesPerSecond * internalShards, internalShards, batchSize);
    // A receiving invocation holds the rows of `recordsPerBatch` stage-1 batches for its share of
    // the keys: measured as the whole query over as many source records on that share.
    const rawRecords = Math.max(1, Math.round((receiving.recordsPerBatch * source.recordsPerBatch) / internalShards));
    const units = await measureInvocation(definition, whole, {
      recordsPerBatch: rawRecords, keys: Math.max(1, Math.round(keys / internalShards)), perShardRate: input.recordsPerSecond / internalShards, snapshotEvery,
    });
    hops.push({
      hop: hop.index + 1, internalShards, recordsPerSecond: sourceBatchesPerSecond * internalShards,
      invocationsPerMonth: receiving.invocationsPerMonth, perBatch: { ...units, records: receiving.recordsPerBatch },
    });
  }
  const last = hops.length;
  const stageUnits = (stage: number, units: BatchUnits): BatchUnits => (stage === last + 1 ? units
    : { ...units, stateWriteUnits: 0, sinkWriteUnits: 0, s3Puts: 0, stateBytes: 0 });
  const ticks = MINUTES_PER_MONTH;
  const line = (stage: number, component: string, quantity: number, unit: string, usdPerUnit: number): CostLine => ({ stage, component, quantity, unit, usd: quantity * usdPerUnit });
  const stageLines = (stage: number, invocations: number, units: BatchUnits, streamShards: number, records: number, tick: boolean): CostLine[] => {
    const prefix = stage === 1 ? '' : `stage ${stage} `;
    // Per tick: the namespace pointer, the watermark rows, and per shard its commit, offsets and idle check.
    const tickReads = tick ? ticks * (2 + 4 * streamShards) : ticks * 4 * streamShards;
    return [
      line(stage, `${prefix}Lambda requests`, invocations + (tick ? ticks : 0), 'requests', prices.lambdaPerMillionRequests / 1e6),
      line(stage, `${prefix}Lambda compute`, (invocations * invocationMs + (tick ? ticks * 500 : 0)) / 1000 * (memoryMb / 1024), 'GB-seconds', prices.lambdaPerGbSecond),
      line(stage, `${prefix}DynamoDB state writes`, invocations * units.stateWriteUnits, 'write units', prices.dynamoDbPerMillionWriteUnits / 1e6),
      line(stage, `${prefix}DynamoDB checkpoint writes`, invocations * units.checkpointWriteUnits + ticks * streamShards, 'write units', prices.dynamoDbPerMillionWriteUnits / 1e6),
      line(stage, `${prefix}DynamoDB checkpoint reads`, invocations * units.checkpointReadUnits + tickReads, 'read units', prices.dynamoDbPerMillionReadUnits / 1e6),
      line(stage, `${prefix}DynamoDB sink writes`, invocations * units.sinkWriteUnits, 'write units', prices.dynamoDbPerMillionWriteUnits / 1e6),
      line(stage, `${prefix}DynamoDB storage (state)`, (units.stateBytes * streamShards) / 1024 ** 3, 'GB-months', prices.dynamoDbPerGbMonth),
      line(stage, `${prefix}S3 requests`, invocations * units.s3Puts, 'PUTs', prices.s3PerThousandPuts / 1000),
      line(stage, `${prefix}Kinesis shard-hours`, streamShards * 730, 'shard-hours', prices.kinesisPerShardHour),
      // A record under 25 KB is one payload unit (stage 1's PutRecords ships each hop row as one record).
      line(stage, `${prefix}Kinesis PUT payload units`, records, '25 KB units', prices.kinesisPerMillionPutPayloadUnits / 1e6),
    ];
  };
  const lines: CostLine[] = [
    ...stageLines(1, source.invocationsPerMonth, stageUnits(1, measured), shards, input.recordsPerSecond * SECONDS_PER_MONTH, true),
    line(1, 'EventBridge schedule', ticks, 'events', prices.eventBridgePerMillionEvents / 1e6),
    ...hops.flatMap((h) => stageLines(h.hop + 1, h.invocationsPerMonth, stageUnits(h.hop + 1, h.perBatch), h.internalShards, h.recordsPerSecond * SECONDS_PER_MONTH, false)),
  ];
  return {
    query: definition.name, prices: prices.version, shards, recordsPerSecond: input.recordsPerSecond,
    invocationsPerMonth: source.invocationsPerMonth, perBatch: stageUnits(1, measured), hops, lines, totalUsd: lines.reduce((a, l) => a + l.usd, 0),
  };
}
