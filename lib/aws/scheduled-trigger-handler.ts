/**
 * The scheduled trigger (an EventBridge rule, e.g. every minute): what the engine needs when no
 * records arrive. For each shard it
 *   1. checks with GetRecords whether the shard is caught up (nothing after its committed
 *      position); a caught-up shard quiet for the idle timeout leaves the watermark minimum;
 *   2. runs the shard's trigger without new records: a pending batch re-runs, and a no-data batch
 *      runs when the watermark moved (closing windows in append mode, evicting state).
 * With `{ "mode": "drain" }` it instead reads every shard from its checkpointed position with
 * GetRecords and runs batches until caught up (Spark's availableNow), for backfills and for
 * queries that run only on a schedule.
 *
 * It never races the Kinesis-triggered invocation of the same shard into a wrong result: both
 * plan batch N with a conditional put, and the loser stops.
 */
import type { StreamingQueryDefinition } from '../api/query-definition.js';
import { validateQuery } from '../api/validate-query.js';
import { CostMeter } from '../runtime/cost-meter.js';
import { readRuntimeConfig, type RuntimeConfig } from '../runtime/runtime-config.js';
import { committedShardOffset, REPARTITION_SOURCE_NAME, runShardTrigger, type ShardTriggerResult, type TriggerStage } from '../runtime/shard-trigger.js';
import type { ShardRecord } from '../sources/kinesis-shard-source.js';
import type { Sink } from '../sinks/sink.js';
import { createAwsClients, type AwsClientOptions, type AwsClients } from './clients.js';
import { createAwsQueryBackends, type AwsQueryBackends } from './aws-backends.js';
import { listStreamShards } from './kinesis-shard-reader.js';
import { createObservability, recordBatchProgress, type Observability } from './observability.js';

export interface ScheduledTriggerOptions {
  readonly config?: RuntimeConfig;
  readonly clientOptions?: AwsClientOptions;
  readonly clients?: AwsClients;
  readonly observability?: Observability;
  readonly now?: () => number;
  readonly onTrigger?: (shardId: string, result: ShardTriggerResult, stage: TriggerStage) => void | Promise<void>;
  readonly decorateSink?: (sink: Sink) => Sink;
  /** Records per batch when draining (default 1000). */
  readonly drainBatchSize?: number;
}

export interface ScheduledTriggerEvent {
  readonly mode?: 'tick' | 'drain';
}

export interface ScheduledTriggerSummary {
  readonly shards: readonly { shardId: string; stage: TriggerStage; caughtUp: boolean; batches: number; error?: string }[];
}

export type ScheduledTriggerHandler = (event?: ScheduledTriggerEvent | Record<string, unknown>) => Promise<ScheduledTriggerSummary>;


interface Context {
  readonly definition: StreamingQueryDefinition;
  readonly config: RuntimeConfig;
  readonly backends: AwsQueryBackends;
  readonly observability: Observability;
  readonly options: ScheduledTriggerOptions;
}

export function createScheduledTriggerHandler(definition: StreamingQueryDefinition, options: ScheduledTriggerOptions = {}): ScheduledTriggerHandler {
  const config = options.config ?? readRuntimeConfig();
  const validated = validateQuery(definition, { expectedShardCount: config.expectedShardCount, allowRepartition: config.repartitionStreamName !== undefined });
  const meter = new CostMeter();
  const clients = options.clients ?? createAwsClients(options.clientOptions);
  const backends = createAwsQueryBackends(definition, validated.keyColumns, config, clients, meter, options.decorateSink, validated.repartition);
  const observability = options.observability ?? createObservability(definition.name);
  const now = options.now ?? Date.now;
  const context: Context = { definition, config, backends, observability, options };
  const sourceStage: TriggerStage = validated.needsRepartition ? 'source' : 'single';

  return async (event = {}) => {
    const drain = (event as ScheduledTriggerEvent).mode === 'drain';
    const shards = await listStreamShards(clients.kinesis, config.streamName);
    // First every shard's idle state, so that each no-data batch below sees all of them.
    const caughtUp = new Map<string, boolean>();
    for (const shard of shards) {
      const idle = await confirmIdle(backends, shard.ShardId!, now());
      caughtUp.set(shard.ShardId!, idle);
      if (idle && backends.repartitionSink) {
        // Every state partition learns that this source shard no longer holds the watermark back.
        const committed = await backends.forPartition(shard.ShardId!, 'source').checkpoint.commitLog.getLatest();
        await backends.repartitionSink.broadcastIdle(shard.ShardId!, committed?.[0] ?? 0);
      }
    }
    const summary: ScheduledTriggerSummary['shards'][number][] = [];
    for (const shard of shards) {
      const shardId = shard.ShardId!;
      const entry = drain ? await drainShard(context, shardId, sourceStage) : await tickShard(context, shardId, sourceStage);
      summary.push({ ...entry, stage: sourceStage, caughtUp: caughtUp.get(shardId) ?? false });
    }
    if (validated.needsRepartition) {
      // Stage 2: the internal stream's shards, with whatever stage 1 just sent.
      for (const shard of await listStreamShards(clients.kinesis, config.repartitionStreamName!)) {
        const shardId = shard.ShardId!;
        const entry = await drainShard(context, shardId, 'state');
        summary.push({ ...entry, stage: 'state', caughtUp: entry.error === undefined });
      }
    }
    observability.metrics.publishStoredMetrics();
    return { shards: summary };
  };
}

async function confirmIdle(backends: AwsQueryBackends, shardId: string, nowMs: number): Promise<boolean> {
  const committed = await committedShardOffset(backends.forPartition(shardId).checkpoint);
  const position = await backends.shardReader.readAfter(shardId, committed?.sequenceNumber ?? null, 1);
  const caughtUp = position.records.length === 0 && position.millisBehindLatest === 0;
  if (!caughtUp) return false;
  // A shard that never had data has no watermark row yet: start its idle clock now.
  if (committed === null) await backends.watermarks.publish(shardId, 0, -1, false);
  return backends.watermarks.confirmCaughtUp(shardId, nowMs);
}

async function runAndReport(context: Context, shardId: string, stage: TriggerStage, records: readonly ShardRecord[]): Promise<ShardTriggerResult> {
  const { definition, config, backends, observability, options } = context;
  const result = await runShardTrigger({
    definition, shardId, records, scheduled: true, expectedShardCount: config.expectedShardCount, stage,
  }, backends.forPartition(shardId, stage));
  for (const progress of result.progress) recordBatchProgress(observability, shardId, progress, result.stage);
  if (result.error) observability.logger.error('scheduled trigger failed', { shardId, stage, error: result.error });
  await options.onTrigger?.(shardId, result, stage);
  return result;
}

async function tickShard(context: Context, shardId: string, stage: TriggerStage): Promise<{ shardId: string; batches: number; error?: string }> {
  try {
    const result = await runAndReport(context, shardId, stage, []);
    return { shardId, batches: result.progress.length, ...(result.error ? { error: result.error.message } : {}) };
  } catch (error) {
    context.observability.logger.error('scheduled trigger could not start', { shardId, error: error as Error });
    return { shardId, batches: 0, error: (error as Error).message };
  }
}

/** Reads the shard from its committed position and runs batches until caught up. */
async function drainShard(context: Context, shardId: string, stage: TriggerStage): Promise<{ shardId: string; batches: number; error?: string }> {
  const { backends, options } = context;
  const reader = stage === 'state' ? backends.repartitionShardReader! : backends.shardReader;
  let batches = 0;
  try {
    for (;;) {
      const committed = await committedShardOffset(backends.forPartition(shardId, stage).checkpoint, stage === 'state' ? REPARTITION_SOURCE_NAME : undefined);
      const position = await reader.readAfter(shardId, committed?.sequenceNumber ?? null, options.drainBatchSize ?? 1000);
      const result = await runAndReport(context, shardId, stage, position.records);
      batches += result.progress.length;
      if (result.error) return { shardId, batches, error: result.error.message };
      if (position.records.length === 0) return { shardId, batches };
    }
  } catch (error) {
    return { shardId, batches, error: (error as Error).message };
  }
}
