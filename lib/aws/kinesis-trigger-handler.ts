/**
 * The Kinesis handler: one Lambda invocation runs the micro-batches due on one shard (the event
 * source mapping never runs two invocations of a shard at once with parallelization factor 1).
 * The query is compiled once per container, at cold start; an invocation only binds the shard.
 * It answers with `batchItemFailures` (ReportBatchItemFailures): on any failure, the first record
 * not committed, so Lambda retries from exactly there and nothing is lost or reordered; records
 * already committed in a redelivered batch are skipped by the shard invocation. With the Lambda
 * context, no batch starts that might not finish before the deadline (the answer then names the
 * first record not committed), and a state that outgrows the function's memory fails loudly.
 */
import type { Context, KinesisStreamBatchResponse, KinesisStreamEvent, KinesisStreamRecord } from 'aws-lambda';
import { compileForDeployment, type DeployableQuery } from '../query/compiled-query.js';
import type { PartitionBackends } from '../query/partition-backends.js';
import type { QueryStage } from '../query/query-stage.js';
import { runShardInvocation, type ShardInvocationResult } from '../query/shard-invocation.js';
import { invocationLimitsOf, type InvocationLimits } from '../query/invocation-limits.js';
import { CostMeter } from '../core/cost-meter.js';
import { readRuntimeConfig, streamNameOf, type RuntimeConfig } from '../runtime/runtime-config.js';
import { isMultiSource } from '../query/query-definition.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import type { ShardRecord } from '../sources/kinesis-shard-source.js';
import type { Sink } from '../sinks/sink.js';
import { createAwsClients, type AwsClientOptions } from './clients.js';
import { createAwsQueryBackends } from './aws-backends.js';
import { ReshardGuard } from './reshard-guard.js';
import { createObservability, recordBatchProgress, type Observability } from './observability.js';
import { METRIC } from '../runtime/metric-names.js';
import { MetricUnit } from '@aws-lambda-powertools/metrics';

export interface KinesisTriggerOptions {
  readonly config?: RuntimeConfig;
  readonly clientOptions?: AwsClientOptions;
  /** Replace the AWS backends (tests); default: DynamoDB/S3 adapters from the config. */
  readonly backendsFor?: (shardId: string, stage?: QueryStage) => PartitionBackends;
  readonly observability?: Observability;
  /** Called after each shard's invocation (`sluice dev` prints progress and output from it). */
  readonly onInvocation?: (shardId: string, result: ShardInvocationResult) => void | Promise<void>;
  /** Wraps the sink (`sluice dev` prints each batch; the chaos test injects faults). */
  readonly decorateSink?: (sink: Sink) => Sink;
  /** Wraps each partition's backends (the chaos test injects faults into checkpoint and state). */
  readonly decorateBackends?: (backends: PartitionBackends) => PartitionBackends;
}

export type KinesisTriggerHandler = (event: KinesisStreamEvent, context?: Partial<Context>) => Promise<KinesisStreamBatchResponse>;

export function shardIdOf(record: KinesisStreamRecord): string {
  const colon = record.eventID.lastIndexOf(':');
  return colon > 0 ? record.eventID.slice(0, colon) : 'shardId-unknown';
}

export function toShardRecordFromEvent(record: KinesisStreamRecord): ShardRecord {
  return {
    sequenceNumber: record.kinesis.sequenceNumber,
    partitionKey: record.kinesis.partitionKey,
    dataBase64: record.kinesis.data,
    approximateArrivalTimestampMs: Math.round(record.kinesis.approximateArrivalTimestamp * 1000),
  };
}

/** The stream name in a Kinesis event source ARN (`arn:aws:kinesis:<region>:<account>:stream/<name>`). */
export function streamNameOfArn(arn: string | undefined): string | null {
  const at = arn?.lastIndexOf(':stream/') ?? -1;
  return arn && at >= 0 ? arn.slice(at + ':stream/'.length) : null;
}

/** The handler for the source stream: the whole query, or stage 1 when it has a repartition stage. */
export function createKinesisTriggerHandler(query: DeployableQuery, options: KinesisTriggerOptions = {}): KinesisTriggerHandler {
  return createShardHandler(query, options, 'source-stream');
}

/** The handler for the internal repartition stream: stage 2, the stateful part and the sink. */
export function createRepartitionTriggerHandler(query: DeployableQuery, options: KinesisTriggerOptions = {}): KinesisTriggerHandler {
  return createShardHandler(query, options, 'repartition-stream');
}

function createShardHandler(
  deployable: DeployableQuery, options: KinesisTriggerOptions, stream: 'source-stream' | 'repartition-stream',
): KinesisTriggerHandler {
  // Cold start: a bad configuration or query fails here, before any record is touched. The query
  // is analysed here once; every invocation of this container reuses it.
  const config = options.config ?? readRuntimeConfig();
  const query = compileForDeployment(deployable, config);
  const { definition } = query;
  const stage: QueryStage = stream === 'repartition-stream' ? query.requireStateStage() : query.sourceStage;
  // Several source streams feed one function: each record's stream (its event source ARN) picks the stage.
  const stageByStream = new Map<string, QueryStage>(stream === 'repartition-stream'
    ? []
    : query.sourceStages.map((s) => [streamNameOf(config, s.sourceName!, isMultiSource(definition)), s]));
  const stageOf = (record: KinesisStreamRecord): QueryStage => {
    if (stream === 'repartition-stream' || query.sourceStages.length === 1) return stage;
    const streamName = streamNameOfArn(record.eventSourceARN);
    const found = streamName === null ? undefined : stageByStream.get(streamName);
    if (found) return found;
    throw new IllegalArgumentError(`A record from stream '${streamName ?? record.eventSourceARN}' reached query '${definition.name}', which reads ${[...stageByStream.keys()].join(', ')}.`, {
      code: 'UNKNOWN_SOURCE_STREAM', hint: 'map every event source of the function to a source of the query (SLUICE_SOURCE_STREAMS, set by the SluiceQuery construct).',
    });
  };
  const meter = new CostMeter();
  const observability = options.observability ?? createObservability(definition.name);
  let backendsFor = options.backendsFor;
  let reshardGuard: ReshardGuard | null = null;
  if (!backendsFor) {
    const clients = createAwsClients(options.clientOptions);
    const backends = createAwsQueryBackends(query, config, clients, meter, options.decorateSink);
    backendsFor = (shardId, forStage = stage) => backends.forPartition(shardId, forStage);
    if (stage.isStateful) {
      const streamName = stage.reads === 'internal-stream' ? config.repartitionStreamName! : config.streamName;
      const internal = stage.reads === 'internal-stream';
      reshardGuard = new ReshardGuard({
        kinesis: clients.kinesis, streamName, query, stage,
        checkpointOf: (shardId) => backends.forPartition(shardId, stage).checkpoint,
        reader: internal ? backends.repartitionShardReader! : backends.shardReader,
        ...(internal ? {} : { markClosed: (shardId: string) => backends.watermarks.markClosed(shardId) }),
      });
    }
  }
  const base = backendsFor;
  const forPartition = (shardId: string, forStage: QueryStage): PartitionBackends => (options.decorateBackends ?? ((b) => b))(base(shardId, forStage));

  return async (event, context) => {
    const limits: InvocationLimits = invocationLimitsOf(config.functionMemoryMb, context?.getRemainingTimeInMillis?.bind(context));
    const byShard = new Map<string, { stage: QueryStage; shardId: string; records: KinesisStreamRecord[] }>();
    for (const record of event.Records) {
      const shardId = shardIdOf(record);
      const recordStage = stageOf(record);
      const key = `${recordStage.partitionId(shardId)}`;
      const entry = byShard.get(key) ?? { stage: recordStage, shardId, records: [] };
      entry.records.push(record);
      byShard.set(key, entry);
    }
    const batchItemFailures: { itemIdentifier: string }[] = [];
    for (const { stage: shardStage, shardId, records } of byShard.values()) {
      const shardRecords = records.map(toShardRecordFromEvent);
      let result: ShardInvocationResult;
      try {
        await reshardGuard?.check(shardId);
        result = await runShardInvocation(query, { shardId, records: shardRecords, stage: shardStage, limits }, forPartition(shardId, shardStage));
      } catch (error) {
        // Recovery itself failed (checkpoint unreachable, incompatible query): retry everything.
        observability.logger.error('invocation failed before running a batch', { shardId, error: error as Error });
        observability.metrics.addMetric(METRIC.failedTriggers, MetricUnit.Count, 1);
        batchItemFailures.push({ itemIdentifier: shardRecords[0]!.sequenceNumber });
        continue;
      }
      for (const progress of result.progress) recordBatchProgress(observability, shardId, progress, result.stage.kind);
      if (result.error) {
        observability.logger.error('batch failed; Lambda retries from the first uncommitted record', {
          shardId, retryFrom: result.firstUncommittedSequenceNumber, error: result.error,
        });
        observability.metrics.addMetric(METRIC.failedTriggers, MetricUnit.Count, 1);
      }
      if (result.stoppedBy === 'deadline' && result.firstUncommittedSequenceNumber !== null) {
        observability.logger.warn('stopped before the deadline; Lambda resumes from the first uncommitted record', {
          shardId, retryFrom: result.firstUncommittedSequenceNumber, batches: result.progress.length,
        });
      }
      if (result.firstUncommittedSequenceNumber !== null) {
        batchItemFailures.push({ itemIdentifier: result.firstUncommittedSequenceNumber });
      }
      await options.onInvocation?.(shardId, result);
    }
    observability.metrics.publishStoredMetrics();
    return { batchItemFailures };
  };
}
