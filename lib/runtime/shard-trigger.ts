/**
 * One trigger of one state partition (a Kinesis shard): what a Lambda invocation, a scheduled
 * trigger, `sluice dev` and the tests all run. The backends (checkpoint, state, sink, dead
 * letters, watermarks) are interfaces; the AWS adapters implement them, and so can memory.
 *
 *   1. Validate the query (analyzer, sink, co-partitioning) before reading any state.
 *   2. Recover the partition from its checkpoint (StreamExecution.start: fingerprint check, the
 *      pending batch if one was planned and not committed).
 *   3. Drop the delivered records that are already committed (Lambda redelivers after a crash).
 *   4. A pending batch re-runs with exactly its planned records: when the delivery does not hold
 *      them all (a bisected retry), they are read from the shard.
 *   5. Write the undecodable records to the dead-letter location (idempotent), then run batches
 *      until none is due: the re-run, the new records, a no-data batch if the watermark moved.
 *
 * Whatever fails, the answer says where the uncommitted records start, so the caller retries from
 * there (Lambda's batchItemFailures): nothing is lost, reordered or applied twice.
 */
import type { StreamingQueryDefinition } from '../api/query-definition.js';
import { KINESIS_SOURCE_NAME, sourceSchemaOf, validateQuery } from '../api/validate-query.js';
import type { Checkpoint } from '../checkpoint/checkpoint.js';
import type { DeadLetterRecord, DeadLetterWriter } from '../sources/dead-letter.js';
import { planRepartition } from '../analysis/stages.js';
import type { OutputMode } from '../core/output-mode.js';
import type { StructField } from '../plan/data-types.js';
import type { LogicalPlan } from '../plan/logical-plan.js';
import { RepartitionShardSource } from '../sources/repartition-shard-source.js';
import type { Offset } from '../sources/source.js';
import { asKinesisOffset, KinesisShardSource, type KinesisOffset, type ShardRecord } from '../sources/kinesis-shard-source.js';
import { createRecordDecoder } from '../sources/record-decoder.js';
import type { Sink } from '../sinks/sink.js';
import { systemClock, type Clock } from './clock.js';
import type { CostMeter } from './cost-meter.js';
import type { StreamingQueryProgress } from './progress.js';
import { StreamExecution } from './stream-execution.js';
import { Trigger } from './trigger.js';
import type { WatermarkCoordinator } from './watermark-coordinator.js';

/** Reads a shard's records between two sequence numbers (inclusive): GetRecords on AWS. */
export interface ShardReader {
  read(shardId: string, firstSequenceNumber: string, lastSequenceNumber: string): Promise<ShardRecord[]>;
}

export interface PartitionBackends {
  readonly checkpoint: Checkpoint;
  readonly sink: Sink;
  readonly deadLetters: DeadLetterWriter;
  readonly watermarks?: WatermarkCoordinator;
  readonly shardReader?: ShardReader;
  readonly costMeter?: CostMeter;
  readonly clock?: Clock;
  /** Stage 2: the source stream's shards, so one not heard from yet holds the watermark back. */
  readonly sourcePartitions?: () => Promise<readonly string[]>;
}

export interface ShardTriggerRequest {
  readonly definition: StreamingQueryDefinition;
  readonly shardId: string;
  /** The delivered records, in shard order (may include already committed ones). */
  readonly records: readonly ShardRecord[];
  readonly expectedShardCount?: number;
  /** A scheduled trigger: a no-data batch may run right after recovery. */
  readonly scheduled?: boolean;
  /** Upper bound on batches in one trigger (a re-run, a data batch, a no-data batch). */
  readonly maxBatches?: number;
  /** Default `single`: the whole query on this shard. */
  readonly stage?: TriggerStage;
}

export interface ShardTriggerResult {
  /** Which part of the query ran (with a repartition stage, stage 1 or 2). */
  readonly stage: TriggerStage;
  readonly progress: readonly StreamingQueryProgress[];
  /** The committed position of the shard after this trigger. */
  readonly committed: KinesisOffset | null;
  /** The first delivered record not committed (retry from it), or null when all are committed. */
  readonly firstUncommittedSequenceNumber: string | null;
  readonly error?: Error;
}

/**
 * Which part of the query a trigger runs: the whole query (`single`), or with a repartition stage,
 * stage 1 on a source shard (`source`: stateless part, rows routed by state key) or stage 2 on a
 * shard of the internal stream (`state`: the stateful part, the output mode and the sink).
 */
export type TriggerStage = 'single' | 'source' | 'state';

/** The repartition stream's source name in offsets. */
export const REPARTITION_SOURCE_NAME = 'repartition';

interface ShardSource {
  readonly name: string;
  setCommitted(offset: Offset | null): void;
  offer(records: readonly ShardRecord[]): unknown;
  covers(start: Offset | null, end: Offset): boolean;
}

interface PreparedStage {
  readonly source: ShardSource;
  readonly plan: LogicalPlan;
  readonly columns: readonly string[];
  readonly schema: readonly StructField[];
  readonly outputMode: OutputMode;
  readonly conf: ReadonlyMap<string, string>;
  readonly watermarks: WatermarkCoordinator | undefined;
  readonly deadLetters: () => DeadLetterRecord[];
}

function prepareStage(request: ShardTriggerRequest, backends: PartitionBackends): PreparedStage {
  const { definition, shardId } = request;
  const stage = request.stage ?? 'single';
  const validateOptions = { expectedShardCount: request.expectedShardCount, allowRepartition: stage !== 'single' };
  if (stage === 'state') {
    const shape = validateQuery(definition, validateOptions);
    const split = shape.repartition ?? planRepartition(shape.df.plan);
    const source = new RepartitionShardSource(REPARTITION_SOURCE_NAME, split.cutOutput.map((a) => ({ name: a.name, type: a.type })), shardId);
    const delayMs = split.eventTime?.delayMs ?? 0;
    return {
      source,
      plan: split.stage2(source),
      columns: shape.columns,
      schema: shape.schema,
      outputMode: definition.outputMode,
      conf: shape.session.conf,
      // The source shards' watermarks arrive with their rows; batch N runs with what N-1 applied.
      watermarks: {
        combine: async () => source.committedWatermarkMs(delayMs, (await backends.sourcePartitions?.()) ?? []),
        publish: async () => {},
      },
      deadLetters: () => [],
    };
  }
  const schema = sourceSchemaOf(definition.source);
  const source = new KinesisShardSource({
    name: KINESIS_SOURCE_NAME,
    queryName: definition.name,
    shardId,
    schema,
    decode: createRecordDecoder(definition.source, schema),
    partitionKeyColumn: definition.source.partitionKey,
  });
  // Analysis errors are the deployment's, not the data's: they propagate and nothing is touched.
  const validated = validateQuery(definition, { ...validateOptions, source });
  if (stage === 'source' && validated.repartition) {
    const split = validated.repartition;
    return {
      source,
      plan: split.stage1,
      columns: split.cutOutput.map((a) => a.name),
      schema: split.cutOutput.map((a) => ({ name: a.name, type: a.type })),
      outputMode: 'append',
      conf: validated.session.conf,
      // Stage 1 has no watermark of its own; publishing its progress lets the scheduled trigger
      // confirm the shard idle and tell the state partitions.
      watermarks: backends.watermarks,
      deadLetters: () => source.deadLetters(),
    };
  }
  return {
    source,
    plan: validated.df.plan,
    columns: validated.columns,
    schema: validated.schema,
    outputMode: definition.outputMode,
    conf: validated.session.conf,
    watermarks: backends.watermarks,
    deadLetters: () => source.deadLetters(),
  };
}

export async function runShardTrigger(request: ShardTriggerRequest, backends: PartitionBackends): Promise<ShardTriggerResult> {
  const { definition, shardId } = request;
  const prepared = prepareStage(request, backends);
  const { source } = prepared;
  const execution = new StreamExecution({
    plan: prepared.plan,
    columns: prepared.columns,
    schema: prepared.schema,
    outputMode: prepared.outputMode,
    sink: backends.sink,
    trigger: Trigger.ProcessingTime(0),
    checkpoint: backends.checkpoint,
    conf: prepared.conf,
    clock: backends.clock ?? systemClock,
    queryName: definition.name,
    partitionId: shardId,
    watermarkCoordinator: prepared.watermarks,
    costMeter: backends.costMeter,
    noDataBatchAfterRecovery: request.scheduled === true,
  });
  await execution.start();

  const committedOffset = (): KinesisOffset | null => asKinesisOffset(execution.committedSourceOffsets.get(source.name) ?? null);
  const firstUncommitted = (): string | null => {
    const committed = committedOffset();
    const after = committed ? BigInt(committed.sequenceNumber) : -1n;
    return request.records.find((r) => BigInt(r.sequenceNumber) > after)?.sequenceNumber ?? null;
  };

  try {
    source.setCommitted(execution.committedSourceOffsets.get(source.name) ?? null);
    source.offer(request.records);
    await ensurePendingBatchRecords(execution, source, shardId, backends.shardReader);
    const deadLetters = prepared.deadLetters();
    if (deadLetters.length > 0) await backends.deadLetters.write(deadLetters);
    const maxBatches = request.maxBatches ?? 8;
    for (let i = 0; i < maxBatches && (await execution.runOneTrigger()); i++) {
      // Each iteration ran one batch; the loop ends when no batch is due.
    }
    return { stage: request.stage ?? 'single', progress: execution.recentProgress, committed: committedOffset(), firstUncommittedSequenceNumber: firstUncommitted() };
  } catch (error) {
    return {
      stage: request.stage ?? 'single',
      progress: execution.recentProgress,
      committed: committedOffset(),
      firstUncommittedSequenceNumber: firstUncommitted(),
      error: error as Error,
    };
  }
}

/** A planned, uncommitted batch re-runs with exactly its records: fetch them if not delivered. */
async function ensurePendingBatchRecords(
  execution: StreamExecution, source: ShardSource, shardId: string, reader: ShardReader | undefined,
): Promise<void> {
  const pending = execution.pendingBatch;
  if (!pending) return;
  const end = pending.offsets.get(source.name) ?? null;
  const start = execution.committedSourceOffsets.get(source.name) ?? null;
  if (end === null || JSON.stringify(start) === JSON.stringify(end) || source.covers(start, end)) return;
  const planned = asKinesisOffset(end)!;
  if (!reader || planned.firstSequenceNumber === undefined) {
    throw new Error(`batch ${pending.batchId} of ${shardId} must re-run with records ${planned.firstSequenceNumber ?? '?'}..${planned.sequenceNumber}, `
      + 'which this delivery does not hold and no shard reader is configured');
  }
  source.offer(await reader.read(shardId, planned.firstSequenceNumber, planned.sequenceNumber));
  if (!source.covers(start, end)) {
    throw new Error(`batch ${pending.batchId} of ${shardId}: the shard no longer holds all its planned records (retention expired?)`);
  }
}

/** The shard position a partition's checkpoint has committed (null before its first commit). */
export async function committedShardOffset(checkpoint: Checkpoint, sourceName = KINESIS_SOURCE_NAME): Promise<KinesisOffset | null> {
  const commit = await checkpoint.commitLog.getLatest();
  if (!commit) return null;
  const planned = await checkpoint.offsetLog.get(commit[0]);
  return asKinesisOffset(planned?.offsets[sourceName] ?? null);
}
