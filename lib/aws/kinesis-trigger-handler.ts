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
import { compileForDeployment, internalStreamNames, type CompiledQuery, type DeployableQuery } from '../query/compiled-query.js';
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
import type { AwsClientOptions, AwsClients } from './clients.js';
import { createFunctionClients } from './function-clients.js';
import { createAwsQueryBackends, type BackendsNamespace } from './aws-backends.js';
import { namespaceFence, readNamespacePointer } from './query-namespace.js';
import { RefusedShardStore } from './refused-shards.js';
import { ReshardGuard, type StageLayoutAccess } from './reshard-guard.js';
import { skippedRangesOf } from './skipped-batches.js';
import { isPartitionFinished } from './redrive-batch.js';
import { createObservability, recordBatchProgress, recordExpiredLoss, type Observability } from './observability.js';
import { inSubsegment, tracerForClients } from './tracing.js';
import { METRIC } from '../runtime/metric-names.js';
import { MetricUnit } from '@aws-lambda-powertools/metrics';

export interface KinesisTriggerOptions {
  readonly config?: RuntimeConfig;
  readonly clientOptions?: AwsClientOptions;
  /** The SDK clients to use (the chaos harness's instrumented ones); default: from clientOptions. */
  readonly clients?: AwsClients;
  /**
   * Replace the AWS backends (tests); default: DynamoDB/S3 adapters from the config. The handler
   * then knows no stream to guard reshards on: a stateful stage needs `reshardGuard` as well.
   */
  readonly backendsFor?: (shardId: string, stage?: QueryStage) => PartitionBackends;
  /**
   * With `backendsFor` on a stateful stage: what runs before each shard's invocation (a child
   * shard waits for its parents and is seeded from their state), or null for backends whose
   * stream is never resharded. Required there, so that the guard cannot go missing unnoticed.
   */
  readonly reshardGuard?: { check(shardId: string): Promise<void> } | null;
  readonly observability?: Observability;
  /** Called after each shard's invocation (`sluice dev` prints progress and output from it). */
  readonly onInvocation?: (shardId: string, result: ShardInvocationResult) => void | Promise<void>;
  /** Wraps the sink (`sluice dev` prints each batch; the chaos test injects faults). */
  readonly decorateSink?: (sink: Sink) => Sink;
  /** Wraps each partition's backends (the chaos test injects faults into checkpoint and state). */
  readonly decorateBackends?: (backends: PartitionBackends) => PartitionBackends;
  /**
   * How often a container looks, per shard, for re-drive runs stored and never planned (a `sluice
   * redrive` that died in between; lib/aws/redrive-batch.ts): one Query of the ledger at the
   * shard's first invocation in the container, then at most once per interval. Default 60 s.
   */
  readonly storedRedriveCheckMs?: number;
}

/** One ledger Query per shard and container per minute at most: the scheduled function also finishes such runs at its ticks. */
const STORED_REDRIVE_CHECK_MS = 60_000;

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

/** The handler for the source stream: the whole query, or stage 1 when it has a repartition stage. */
export function createKinesisTriggerHandler(query: DeployableQuery, options: KinesisTriggerOptions = {}): KinesisTriggerHandler {
  return createShardHandler(query, options, 'source-stream');
}

/**
 * The handler for the internal repartition streams: the stage reading the stream a record comes
 * from (its eventSourceARN), stage 2 for the first, stage 3 for the second...; one function, one
 * event source mapping per internal stream.
 */
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
  const stages: readonly QueryStage[] = stream === 'repartition-stream' ? internalStages(query) : query.sourceStages;
  // Several source streams feed one function: each record's stream (its event source ARN) picks the stage.
  const stageByStream = new Map<string, QueryStage>(stream === 'repartition-stream'
    ? []
    : query.sourceStages.map((s) => [streamNameOf(config, s.sourceName!, isMultiSource(definition)), s]));
  const meter = new CostMeter();
  const observability = options.observability ?? createObservability(definition.name);
  let clients: AwsClients | undefined;
  const internalStreams = internalStreamNames(config);
  /** The stage a record runs in: by the stream it comes from (an internal one: stage 2 when unknown). */
  const stageOf = (record: KinesisStreamRecord): QueryStage => {
    if (stream === 'repartition-stream') {
      const hop = internalStreams.indexOf(streamNameOfArn(record.eventSourceARN));
      return stages.find((s) => s.inputHop?.index === hop) ?? stages[0]!;
    }
    if (query.sourceStages.length === 1) return query.sourceStage;
    const streamName = streamNameOfArn(record.eventSourceARN);
    const found = stageByStream.get(streamName);
    if (found) return found;
    throw new IllegalArgumentError(`A record from stream '${streamName || record.eventSourceARN}' reached query '${definition.name}', which reads ${[...stageByStream.keys()].join(', ')}.`, {
      code: 'UNKNOWN_SOURCE_STREAM', hint: 'map every event source of the function to a source of the query (SLUICE_SOURCE_STREAMS, set by the SluiceQuery construct).',
    });
  };
  type ForPartition = (shardId: string, stage: QueryStage) => PartitionBackends;
  type Guards = Map<QueryStage, { check(shardId: string): Promise<void>; movedToStageTwo?(shardId: string): Promise<boolean>; runsOneStage?(shardId: string): Promise<boolean> } | null>;
  const decorate = (base: ForPartition): ForPartition => (shardId, stage) => (options.decorateBackends ?? ((b) => b))(base(shardId, stage));
  /** The partitions' backends and reshard guards of the namespace an invocation runs in. */
  let wiringOf: (namespace: BackendsNamespace) => { forPartition: ForPartition; guards: Guards };
  if (!options.backendsFor) {
    const sdk = options.clients ?? createFunctionClients(options.clientOptions);
    clients = sdk;
    // One wiring per namespace this container has run (the live one; a new one after a cutover).
    const wirings = new Map<string, { forPartition: ForPartition; guards: Guards }>();
    wiringOf = (namespace) => {
      const key = JSON.stringify(namespace);
      let wiring = wirings.get(key);
      if (!wiring) {
        const backends = createAwsQueryBackends(query, config, sdk, meter, options.decorateSink, namespace);
        const forPartition = decorate((shardId, stage) => backends.forPartition(shardId, stage));
        // The guard seeds children through the same (decorated) checkpoint the invocations use.
        const refusals = new RefusedShardStore({ client: sdk.dynamodb, checkpointTable: config.checkpointTable, namespace: namespace.location.namespace });
        let sourceGuard: ReshardGuard | undefined;
        const layout: StageLayoutAccess = {
          streamOf: (stage) => backends.streamOf(stage),
          checkpointOf: (stage, shardId) => forPartition(shardId, stage).checkpoint,
          sourceFinished: (shardId, shards) => (sourceGuard ??= guardOf(query.sourceStage)).finishedShard(shardId, shards),
        };
        const guardOf = (stage: QueryStage): ReshardGuard => {
          const internal = stage.reads === 'internal-stream';
          return new ReshardGuard({
            kinesis: sdk.kinesis, streamName: backends.streamOf(stage), query, stage,
            checkpointOf: (shardId) => forPartition(shardId, stage).checkpoint,
            reader: backends.readerOf(stage),
            skippedRanges: skippedRangesOf(sdk.dynamodb, config.checkpointTable, query.name, stage),
            refusals,
            layout,
            ...(internal ? {} : { markClosed: (shardId: string) => backends.watermarks.markClosed(stage.partitionId(shardId)) }),
          });
        };
        // A stateless stage of a stateful query is guarded too: its split children are refused when
        // their parent ran the state in one stage (RESHARD_STAGE_CHANGED), as the scheduled function does.
        const guarded = query.stages.some((s) => s.isStateful) ? stages : [];
        wiring = { forPartition, guards: new Map(guarded.map((s) => [s, guardOf(s)])) };
        wirings.set(key, wiring);
      }
      return wiring;
    };
    // Cold start: a missing stream or sink setting fails here, not at the first record.
    wiringOf({ location: { namespace: query.name } });
  } else {
    if (stages.some((s) => s.isStateful) && options.reshardGuard === undefined) {
      throw new Error(
        `${definition.name}: backendsFor replaces the AWS backends of a stateful stage, so the handler cannot guard reshards itself; `
        + 'pass reshardGuard (null only for backends whose stream is never resharded), or inject clients and decorateBackends instead.',
      );
    }
    const given = options.backendsFor;
    const wiring = {
      forPartition: decorate((shardId, stage) => given(shardId, stage)),
      guards: new Map(stages.filter((s) => s.isStateful).map((s) => [s, options.reshardGuard ?? null])) as Guards,
    };
    wiringOf = () => wiring;
  }
  /** Read at the start of every invocation: a cutover takes effect at the next one (lib/aws/query-namespace.ts). */
  const currentNamespace = async (): Promise<BackendsNamespace> => {
    if (!clients) return { location: { namespace: query.name } };
    const pointer = await readNamespacePointer(clients.dynamodb, config.checkpointTable, query.name, meter);
    return {
      location: pointer.active,
      ...(pointer.exists ? { fence: namespaceFence(config.checkpointTable, query.name, pointer.active.namespace) } : {}),
    };
  };

  const tracing = tracerForClients(clients);

  /** Per stage and shard, when this container last looked for stored, unplanned re-drive runs. */
  const redriveLookedAt = new Map<string, number>();
  const checkEveryMs = options.storedRedriveCheckMs ?? STORED_REDRIVE_CHECK_MS;
  /**
   * A re-drive that died after storing its run's records and before planning their batch: the run
   * is planned and run here, once (the plan requires the run still open), before the delivered
   * records, so that it does not wait for the scheduled function or the next re-drive. Only a
   * stateful source stage has re-drive batches. Rate-limited: the ledger is not read at every
   * invocation. A failure is logged and left to the next look (or the scheduled function): the
   * delivered records still run (a batch the run planned and did not commit is re-run first by
   * their invocation, as any pending batch).
   */
  const finishStoredRedrives = async (stage: QueryStage, shardId: string, backends: PartitionBackends, limits: InvocationLimits): Promise<void> => {
    const ledger = stage.isStateful && stage.reads !== 'internal-stream' ? backends.redriveLedger : undefined;
    if (!ledger?.storedRuns) return;
    const key = `${stage.index}/${shardId}`;
    const nowMs = Date.now();
    const last = redriveLookedAt.get(key);
    if (last !== undefined && nowMs - last < checkEveryMs) return;
    redriveLookedAt.set(key, nowMs);
    try {
      for (const run of await ledger.storedRuns(shardId)) {
        const result = await runShardInvocation(query, { shardId, records: [], stage, limits, redrive: { run, records: await ledger.records(run) } }, backends);
        for (const progress of result.progress) recordBatchProgress(observability, shardId, progress, result.stage.kind);
        if (result.error) throw result.error;
        if (result.stoppedBy) return;
        observability.logger.info('finished a stored re-drive run left unplanned', { shardId, run });
      }
    } catch (error) {
      // The shard finished (its children were seeded) before the run was planned: the plan's fence refused it.
      if (isPartitionFinished(error)) {
        observability.logger.warn('a stored re-drive run of a finished shard is not run here; the next `sluice redrive` runs it on the shard\'s open descendants', { shardId, error: error as Error });
        return;
      }
      observability.logger.error('a stored re-drive run could not be finished here; a later invocation or the scheduled function retries it', { shardId, error: error as Error });
    }
  };

  return async (event, context) => {
    const tracer = await tracing;
    const limits: InvocationLimits = invocationLimitsOf(config.functionMemoryMb, context?.getRemainingTimeInMillis?.bind(context));
    const byShard = new Map<string, { stage: QueryStage; shardId: string; records: KinesisStreamRecord[] }>();
    for (const record of event.Records) {
      const shardId = shardIdOf(record);
      const stage = stageOf(record);
      const key = `${stage.index}/${stage.partitionId(shardId)}`;
      const entry = byShard.get(key) ?? { stage, shardId, records: [] };
      entry.records.push(record);
      byShard.set(key, entry);
    }
    const batchItemFailures: { itemIdentifier: string }[] = [];
    let wiring: { forPartition: ForPartition; guards: Guards } | undefined;
    for (const { stage, shardId, records } of byShard.values()) {
      const shardRecords = records.map(toShardRecordFromEvent);
      let result: ShardInvocationResult;
      try {
        wiring ??= wiringOf(await currentNamespace());
        const { forPartition } = wiring;
        const guard = wiring.guards.get(stage);
        await guard?.check(shardId);
        // A one-stage shard whose state moved to stage 2 is finished: what is delivered again was committed.
        if (await guard?.movedToStageTwo?.(shardId)) continue;
        if (await guard?.runsOneStage?.(shardId)) {
          // Its records run through the one-stage plan in the scheduled function (this role writes neither state nor sink):
          // Lambda retries them here until that has committed them and the state has moved, then they are skipped above.
          observability.logger.warn('shard still runs the query in one stage: the scheduled function finishes it, then its state moves to the repartition stage', { shardId });
          batchItemFailures.push({ itemIdentifier: shardRecords[0]!.sequenceNumber });
          continue;
        }
        await finishStoredRedrives(stage, shardId, forPartition(shardId, stage), limits);
        result = await inSubsegment(tracer, 'sluice batch', { query: definition.name, shard: shardId, stage: stage.kind },
          () => runShardInvocation(query, { shardId, records: shardRecords, stage, limits }, forPartition(shardId, stage)));
      } catch (error) {
        // Recovery itself failed (checkpoint unreachable, incompatible query): retry everything.
        observability.logger.error('invocation failed before running a batch', { shardId, error: error as Error });
        observability.metrics.addMetric(METRIC.failedTriggers, MetricUnit.Count, 1);
        batchItemFailures.push({ itemIdentifier: shardRecords[0]!.sequenceNumber });
        continue;
      }
      for (const progress of result.progress) recordBatchProgress(observability, shardId, progress, result.stage.kind);
      if (result.expired) recordExpiredLoss(observability, shardId, result.stage.kind, result.expired);
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

/** The stages on internal streams, stage 2 first; a query without one is refused at cold start. */
function internalStages(query: CompiledQuery): readonly QueryStage[] {
  query.requireStateStage();
  return query.stages.filter((s) => s.reads === 'internal-stream');
}

/** `arn:aws:kinesis:<region>:<account>:stream/<name>` → `<name>`. */
export function streamNameOfArn(arn: string | undefined): string {
  const at = arn?.lastIndexOf(':stream/') ?? -1;
  return arn && at >= 0 ? arn.slice(at + ':stream/'.length) : '';
}
