/**
 * A query's stages run for real in memory at the given rates, second by second, sized as the
 * DynamoDB, S3 and Kinesis adapters would write (`sluice cost` for a query with hops).
 *
 * Each second, every source shard receives its share of its stream's records (event time advancing
 * with the stream's rate) and is invoked once per full batch and once with the rest, as the event
 * source mapping does within its 1 s batching window. Each source stage routes its rows onto the
 * first internal stream, held in memory; then each later stage's internal shards are invoked in the
 * same way with what arrived on them that second. So each hop's batch rate is what actually crosses
 * it: stage 1's batches for hop 1, the join's batches for hop 2, and so on.
 *
 * A join's inputs: each later source's rows carry, for the join keys the hop routes by, the key of a
 * row of the first source at the same event time in `matchRate` of the rows, and a key no row of the
 * first source has in the rest; the first source's keys are distinct (an order id). The join's state
 * writes (each side's buffered rows, their eviction) and output follow from running the plan.
 */
import { MemoryCheckpoint } from '../checkpoint/memory-checkpoint.js';
import type { Checkpoint } from '../checkpoint/checkpoint.js';
import type { CompiledQuery } from '../query/compiled-query.js';
import { sourcesOf } from '../query/query-definition.js';
import type { QueryStage } from '../query/query-stage.js';
import { runShardInvocation, type ShardInvocationResult } from '../query/shard-invocation.js';
import { RepartitionSink, type RepartitionChannel, type RepartitionRecordOut, type RepartitionTarget } from '../sinks/repartition-sink.js';
import { MemorySink } from '../sinks/memory-sink.js';
import { MemoryDeadLetterWriter } from '../sources/dead-letter.js';
import type { ShardRecord } from '../sources/kinesis-shard-source.js';
import { sourceSchemaOf } from '../query/validate-query.js';
import { itemSize, writeUnitsFor } from './dynamodb-cost.js';
import { checkpointItem, CountingLog, syntheticSourceRecords, type StageRates } from './cost-estimate.js';
import { DeployedStateSizer } from './state-write-sizing.js';
import { commitProgressAttributes } from './progress-record.js';

export type { StageRates } from './cost-estimate.js';

export interface StagedRunOptions {
  /** Records per second of each source stream, by source name. */
  readonly sourceRates: Readonly<Record<string, number>>;
  readonly shards: number;
  readonly internalShards: number;
  readonly batchSize: number;
  readonly keys: number;
  readonly snapshotEvery: number;
  /** Of each later source's rows, the share whose join key matches a row of the first source. */
  readonly matchRate: number;
  /** Seconds simulated; the first `warmupSeconds` are not counted. */
  readonly seconds: number;
  readonly warmupSeconds: number;
}

/** An internal stream in memory: shards by hash range, records in order; counts what a sender puts. */
class MemoryHop implements RepartitionChannel {
  readonly records = new Map<string, ShardRecord[]>();
  private readonly targets: RepartitionTarget[];
  private seq = 1n;

  constructor(shards: number) {
    const span = (2n ** 128n) / BigInt(shards);
    this.targets = Array.from({ length: shards }, (_, i) => ({
      shardId: `internal-${i}`, startingHashKey: span * BigInt(i), endingHashKey: i === shards - 1 ? 2n ** 128n - 1n : span * BigInt(i + 1) - 1n,
    }));
    for (const t of this.targets) this.records.set(t.shardId, []);
  }

  async shards(): Promise<readonly RepartitionTarget[]> { return this.targets; }

  async put(records: readonly RepartitionRecordOut[]): Promise<void> {
    for (const r of records) {
      const hash = BigInt(r.explicitHashKey);
      const target = this.targets.find((t) => hash >= t.startingHashKey && hash <= t.endingHashKey)!;
      this.records.get(target.shardId)!.push({
        sequenceNumber: String(this.seq++), partitionKey: r.partitionKey, dataBase64: Buffer.from(r.data).toString('base64'), approximateArrivalTimestampMs: 0,
      });
    }
  }

  /** A sender's view: counts its records and their payload units (a record under 25 KB is one). */
  countedBy(counter: { hopRecords: number; hopPayloadUnits: number }, counting: () => boolean): RepartitionChannel {
    return {
      shards: () => this.shards(),
      put: async (records) => {
        if (counting()) {
          for (const r of records) {
            counter.hopRecords++;
            counter.hopPayloadUnits += Math.ceil((r.data.byteLength + r.partitionKey.length) / 25_600);
          }
        }
        await this.put(records);
      },
    };
  }
}

type Totals = { -readonly [K in keyof StageRates]: StageRates[K] };

/** One shard of one stage: its checkpoint and state, counted per request as the adapters write them. */
class MeteredPartition {
  readonly memory = new MemoryCheckpoint();
  readonly offsetLog = new CountingLog(this.memory.offsetLog);
  readonly commitLog = new CountingLog(this.memory.commitLog);
  readonly state: DeployedStateSizer;
  metadataReads = 0;
  readonly checkpoint: Checkpoint;

  constructor(readonly pk: string, snapshotEvery: number) {
    this.state = new DeployedStateSizer(pk, snapshotEvery);
    this.checkpoint = {
      offsetLog: this.offsetLog, commitLog: this.commitLog, stateStore: this.state,
      readQueryMetadata: () => { this.metadataReads++; return this.memory.readQueryMetadata(); },
      writeQueryMetadata: (m) => this.memory.writeQueryMetadata(m),
    };
  }
}

export async function runStagesInMemory(query: CompiledQuery, options: StagedRunOptions): Promise<StageRates[]> {
  const { shards, internalShards, batchSize } = options;
  const startMs = Date.UTC(2026, 0, 1);
  let counting = false;
  const hops = query.hops.map(() => new MemoryHop(internalShards));
  const totals = new Map<QueryStage, Totals>();
  const totalsOf = (stage: QueryStage, number: number, source?: string, stageShards = shards): Totals => {
    if (!totals.has(stage)) {
      totals.set(stage, {
        stage: number, ...(source ? { source } : {}), shards: stageShards, inputRecords: 0, invocations: 0, batches: 0, outputRows: 0,
        checkpointWriteUnits: 0, checkpointReadUnits: 0, stateWriteUnits: 0, stateBytes: 0, sinkWriteUnits: 0, s3Puts: 0, hopRecords: 0, hopPayloadUnits: 0,
      });
    }
    return totals.get(stage)!;
  };
  const sinkKind = query.definition.sink.kind;
  const keyColumns = query.keyColumns.join(', ');

  const invoke = async (stage: QueryStage, t: Totals, part: MeteredPartition, backends: Parameters<typeof runShardInvocation>[2], shardId: string, records: ShardRecord[]): Promise<void> => {
    const reads = part.offsetLog.reads + part.commitLog.reads + part.metadataReads;
    const offsets = part.offsetLog.writes;
    const stateUnits = part.state.units;
    const result: ShardInvocationResult = await runShardInvocation(query, { shardId, records, stage }, backends);
    if (result.error) throw result.error;
    if (!counting) return;
    t.invocations++;
    t.inputRecords += records.length;
    const lastOffsets = part.offsetLog.added.at(-1);
    const offsetUnits = lastOffsets ? writeUnitsFor(itemSize(checkpointItem(part.pk, 'offset#000000000001', lastOffsets[0], lastOffsets[1]))) : 1;
    t.checkpointWriteUnits += (part.offsetLog.writes - offsets) * offsetUnits;
    // The logs' reads, the watermark rows' Query per batch, the namespace pointer once per invocation.
    t.checkpointReadUnits += part.offsetLog.reads + part.commitLog.reads + part.metadataReads - reads + result.progress.length + 1;
    t.stateWriteUnits += part.state.units - stateUnits;
    for (const p of result.progress) {
      t.batches++;
      const rows = p.sink.numOutputRows;
      if (!stage.outputHop) {
        t.outputRows += rows;
        // One conditional PutItem per result row (under 1 KB for these shapes); S3 files: every
        // batch's manifest, and with rows the staged file and its copy (one file unpartitioned).
        if (sinkKind === 'dynamodb') t.sinkWriteUnits += rows;
        else if (sinkKind === 's3-snapshot') t.s3Puts += 1;
        else t.s3Puts += 1 + (rows > 0 ? 2 : 0);
      }
      const deployed = { ...p, sink: { ...p.sink, description: `DynamoDbUpsertSink[${query.name}-sink-table by ${keyColumns}]` },
        cost: { dynamoDbReadUnits: 10, dynamoDbWriteUnits: 56, stateBytesWritten: 1022 } };
      const commit = await part.memory.commitLog.get(p.batchId);
      // The record rides in the commit item (lib/aws/progress-record.ts); the ConditionCheck of commit
      // N-1 is counted although the watermark row may prove it (an upper bound, as cost-estimate.ts).
      const commitItem = { ...checkpointItem(part.pk, 'commit#000000000001', p.batchId, commit), ...commitProgressAttributes(deployed) };
      t.checkpointWriteUnits += 2 * writeUnitsFor(itemSize(commitItem)) + (p.batchId > 0 ? 2 : 0)
        // The watermark row: one update per batch.
        + 1;
    }
  };

  // Source stages: each source's shards, records round-robin, event time advancing with its rate.
  const joinValues = joinColumnValues(query, options.sourceRates, options.matchRate, startMs);
  const sources = sourcesOf(query.definition).map(({ name, spec }) => {
    const stage = query.sourceStageOf(name);
    const rate = options.sourceRates[name]!;
    const t = totalsOf(stage, 1, name);
    const channel = stage.outputHop ? hops[stage.outputHop.index]!.countedBy(t, () => counting) : null;
    const sink = channel ? RepartitionSink.forHop(stage.outputHop!, channel, undefined, stage.hopInput) : new MemorySink();
    const columnValues = joinValues.get(name) ?? {};
    const partitions = Array.from({ length: shards }, (_, i) => new MeteredPartition(`${query.name}#${name}#shard-${i}`, options.snapshotEvery));
    return { name, stage, rate, t, sink, spec, columnValues, partitions, next: 0 };
  });

  // Stage k + 1 reads hop k: its senders are the source shards (k = 0) or hop k - 1's shards.
  const later = query.stages.filter((s) => s.reads === 'internal-stream').map((stage) => {
    const k = stage.inputHop!.index;
    const t = totalsOf(stage, k + 2, undefined, internalShards);
    const channel = stage.outputHop ? hops[stage.outputHop.index]!.countedBy(t, () => counting) : null;
    const senders = k === 0 ? null : [...hops[k - 1]!.records.keys()];
    const sourcePartitions = async (name?: string): Promise<string[]> => (senders
      ?? Array.from({ length: shards }, (_, i) => `shard-${i}`).filter(() => name !== undefined));
    const shardIds = [...hops[k]!.records.keys()];
    const partitions = shardIds.map((id) => {
      const part = new MeteredPartition(`${query.name}#${id}`, options.snapshotEvery);
      const sink = channel ? RepartitionSink.forHop(stage.outputHop!, channel) : new MemorySink();
      return { id, part, backends: { checkpoint: part.checkpoint, sink, deadLetters: new MemoryDeadLetterWriter(), sourcePartitions }, consumed: 0 };
    });
    return { stage, k, t, partitions };
  });

  for (let second = 0; second < options.seconds; second++) {
    counting = second >= options.warmupSeconds;
    for (const s of sources) {
      const upTo = Math.round((second + 1) * s.rate);
      const records = syntheticSourceRecords(s.spec, upTo - s.next, {
        keys: options.keys, recordsPerSecond: s.rate, startMs, firstIndex: s.next, columnValues: s.columnValues,
      });
      s.next = upTo;
      for (let shard = 0; shard < shards; shard++) {
        const mine = records.filter((_, j) => j % shards === shard);
        const part = s.partitions[shard]!;
        const backends = { checkpoint: part.checkpoint, sink: s.sink, deadLetters: new MemoryDeadLetterWriter() };
        for (let at = 0; at < mine.length; at += batchSize) {
          await invoke(s.stage, s.t, part, backends, `shard-${shard}`, mine.slice(at, at + batchSize));
        }
      }
    }
    for (const l of later) {
      for (const p of l.partitions) {
        const arrived = hops[l.k]!.records.get(p.id)!;
        for (; p.consumed < arrived.length; p.consumed = Math.min(arrived.length, p.consumed + batchSize)) {
          await invoke(l.stage, l.t, p.part, p.backends, p.id, arrived.slice(p.consumed, p.consumed + batchSize));
        }
      }
    }
  }

  // What the state holds at the end, for its storage.
  for (const s of sources) for (const part of s.partitions) s.t.stateBytes += part.state.heldBytes();
  for (const l of later) for (const p of l.partitions) l.t.stateBytes += p.part.state.heldBytes();
  const measured = options.seconds - options.warmupSeconds;
  const perSecond = (n: number): number => n / measured;
  return [...totals.values()].map((t) => ({
    ...t,
    inputRecords: perSecond(t.inputRecords), invocations: perSecond(t.invocations), batches: perSecond(t.batches), outputRows: perSecond(t.outputRows),
    checkpointWriteUnits: perSecond(t.checkpointWriteUnits), checkpointReadUnits: perSecond(t.checkpointReadUnits), stateWriteUnits: perSecond(t.stateWriteUnits),
    sinkWriteUnits: perSecond(t.sinkWriteUnits), s3Puts: perSecond(t.s3Puts), hopRecords: perSecond(t.hopRecords), hopPayloadUnits: perSecond(t.hopPayloadUnits),
  }));
}

/**
 * Per source, the values of its join-key columns: distinct in the first source (an order id); in
 * each later one the key of the first source's row at the same event time in `matchRate` of the
 * rows (spread evenly), else a key the first source never has.
 */
export function joinColumnValues(
  query: CompiledQuery, sourceRates: Readonly<Record<string, number>>, matchRate: number, startMs: number,
): Map<string, Record<string, (i: number, eventMs: number) => unknown>> {
  const out = new Map<string, Record<string, (i: number, eventMs: number) => unknown>>();
  const joinKeys = joinKeyColumns(query);
  const sources = sourcesOf(query.definition);
  const firstRate = sourceRates[sources[0]!.name]!;
  sources.forEach(({ name, spec }, sourceIndex) => {
    const schema = sourceSchemaOf(spec);
    const values: Record<string, (i: number, eventMs: number) => unknown> = {};
    for (const column of joinKeys.get(name) ?? []) {
      const type = schema.find((f) => f.name.toLowerCase() === column)?.type;
      const numeric = type === 'int' || type === 'long' || type === 'double';
      const key = (n: number): unknown => (numeric ? n : `key-${n}`);
      values[column] = sourceIndex === 0
        ? key
        : (i, eventMs) => (Math.floor((i + 1) * matchRate) > Math.floor(i * matchRate)
          ? key(Math.floor(((eventMs - startMs) * firstRate) / 1000))
          : (numeric ? -1 - i : `unmatched-${i}`));
    }
    out.set(name, values);
  });
  return out;
}

/** Each source's records for `seconds` of input at its rate, as the estimate runs them (for a measured run to compare). */
export function syntheticInput(
  query: CompiledQuery, options: { sourceRates: Readonly<Record<string, number>>; keys: number; matchRate: number; startMs: number }, seconds: number,
): Map<string, ShardRecord[]> {
  const values = joinColumnValues(query, options.sourceRates, options.matchRate, options.startMs);
  return new Map(sourcesOf(query.definition).map(({ name, spec }) => [name, syntheticSourceRecords(spec, Math.round(seconds * options.sourceRates[name]!), {
    keys: options.keys, recordsPerSecond: options.sourceRates[name]!, startMs: options.startMs, columnValues: values.get(name) ?? {},
  })]));
}

/** Per source, the columns (lower case) its rows are routed by into a join: those that must match. */
export function joinKeyColumns(query: CompiledQuery): Map<string, string[]> {
  const out = new Map<string, string[]>();
  if (!query.hop || !/Join/.test(query.hop.statefulOperator.kind)) return out;
  for (const input of query.hop.inputs) {
    out.set(input.sourceId, input.routingOrdinals.map((o) => input.cutOutput[o]!.name.toLowerCase()));
  }
  return out;
}

