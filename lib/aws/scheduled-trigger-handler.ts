/**
 * The scheduled handler (an EventBridge rule, e.g. every minute): what the engine needs when no
 * records arrive. The query is compiled once per container. For each shard it
 *   1. checks with GetRecords whether the shard is caught up (nothing after its committed
 *      position); a caught-up shard quiet for the idle timeout leaves the watermark minimum;
 *   2. runs the shard's invocation without new records: a pending batch re-runs, and a no-data batch
 *      runs when the watermark moved (closing windows in append mode, evicting state) or a
 *      processing-time timer is due (the last commit records the earliest one: no state is read
 *      to decide), so a timer fires even when its key gets no more data.
 * With `{ "mode": "drain" }` it instead reads every shard from its checkpointed position with
 * GetRecords and runs batches until caught up (Spark's availableNow), for backfills and for
 * queries that run only on a schedule.
 *
 * It never races the Kinesis handler's invocation of the same shard into a wrong result: both
 * plan batch N with a conditional put, and the loser stops. After a reshard, shards run parents
 * first, a child only once its ancestors are finished (seeded from their state), and a finished
 * parent not at all (lib/aws/reshard-guard.ts).
 *
 * Limits (lib/query/invocation-limits.ts), as in the Kinesis handler: with the Lambda context, no
 * batch starts that may not finish before the deadline (the longest batch of this tick twice, plus
 * a reserve); shards not reached are reported `deferred: 'deadline'` and the next tick resumes
 * them from their checkpoints. A state that outgrows the function's memory fails its shard with
 * STATE_EXCEEDS_MEMORY after the batch commits.
 *
 * After the batches, an s3-files sink's staged copies revealed long ago are deleted and its quiet
 * small files are compacted, bounded by the time the invocation has left
 * (lib/aws/scheduled-compaction.ts); a failure there is logged and reported, never fails the tick
 * (the next tick finishes it). A DynamoDB sink that spills has its unreferenced spilled objects
 * collected, at most once a day (lib/aws/spill-gc-run.ts), likewise.
 */
import { compileForDeployment, compileQuery, type CompiledQuery, type DeployableQuery } from '../query/compiled-query.js';
import type { QueryStage, StageKind } from '../query/query-stage.js';
import { committedShardOffset, runShardInvocation, type ShardInvocationRequest, type ShardInvocationResult } from '../query/shard-invocation.js';
import { CostMeter } from '../core/cost-meter.js';
import { readRuntimeConfig, type RuntimeConfig } from '../runtime/runtime-config.js';
import type { ShardRecord } from '../sources/kinesis-shard-source.js';
import type { Sink } from '../sinks/sink.js';
import type { AwsClientOptions, AwsClients } from './clients.js';
import { createFunctionClients } from './function-clients.js';
import { createAwsQueryBackends, namespacedConfig, type AwsQueryBackends, type BackendsNamespace } from './aws-backends.js';
import { namespaceFence, readNamespacePointer } from './query-namespace.js';
import type { Shard } from '@aws-sdk/client-kinesis';
import { listStreamShards } from './kinesis-shard-reader.js';
import { parentsFirst, ReshardGuard, type ShardReadiness } from './reshard-guard.js';
import { RefusedShardStore } from './refused-shards.js';
import { skippedRangesOf } from './skipped-batches.js';
import { readAfterPosition } from '../sources/repartition-shard-source.js';
import { createObservability, recordBatchProgress, recordExpiredLoss, type Observability } from './observability.js';
import type { Tracer } from '@aws-lambda-powertools/tracer';
import { inSubsegment, tracerForClients } from './tracing.js';
import { compactSinkIfDue, sweepStagingIfFilesSink } from './scheduled-compaction.js';
import type { StagedSweepReport } from './s3-staged-sweep.js';
import { hasTimeForBatch, invocationLimitsOf, type InvocationLimits } from '../query/invocation-limits.js';
import type { CompactionReport } from './s3-compaction.js';
import { NO_BATCH_COMMITTED } from '../sources/repartition-records.js';
import { DEFAULT_SPILL_GC_INTERVAL_MS, runSpillGc, spillsToS3, type SpillGcRun } from './spill-gc-run.js';

export interface ScheduledTriggerOptions {
  readonly config?: RuntimeConfig;
  readonly clientOptions?: AwsClientOptions;
  readonly clients?: AwsClients;
  readonly observability?: Observability;
  readonly now?: () => number;
  readonly onInvocation?: (shardId: string, result: ShardInvocationResult, stage: QueryStage) => void | Promise<void>;
  readonly decorateSink?: (sink: Sink) => Sink;
  /** Records per batch when draining (default 1000). */
  readonly drainBatchSize?: number;
}

export interface ScheduledTriggerEvent {
  /**
   * tick (default) or drain: the live namespace, then the replay shadow if the scheduled function
   * drives it; replay: only the shadow (`sluice replay run` drives it so, in-process).
   */
  readonly mode?: 'tick' | 'drain' | 'replay';
}

export interface ScheduledTriggerSummary {
  readonly shards: readonly ShardSummary[];
  /** Set when the deadline came before every due batch ran (those shards say `deferred`). */
  readonly stoppedBy?: 'deadline';
  /** The s3-files sink's compaction after the batches (absent for other sinks or when turned off). */
  readonly compaction?: CompactionReport | { readonly error: string };
  /** The s3-files sink's sweep of staged copies revealed long ago (absent for other sinks). */
  readonly staging?: StagedSweepReport | { readonly error: string };
  /** The spill collector's run (a DynamoDB sink that spills; `skipped` when not due). */
  readonly spillGc?: SpillGcRun | { readonly error: string };
  /** The replay shadow's shards, when this invocation drove it (lib/aws/query-namespace.ts). */
  readonly replay?: { readonly runId: string; readonly shards: readonly ShardSummary[]; readonly error?: string };
}

export interface ShardRun {
  shardId: string;
  batches: number;
  error?: string;
  /** Batches were due but the deadline was too close: the next tick resumes from the checkpoint. */
  deferred?: 'deadline';
}

/** `label`: the shard as reports name it (`stage 3 shardId-…`: the stage kind alone does not tell stages 2 and 3 apart). */
export type ShardSummary = ShardRun & { stage: StageKind; label: string; caughtUp: boolean };

/** The part of Lambda's context the handler uses: the time left before the function's timeout. */
export interface ScheduledInvocationContext {
  getRemainingTimeInMillis(): number;
}

export type ScheduledTriggerHandler = (
  event?: ScheduledTriggerEvent | Record<string, unknown>, context?: ScheduledInvocationContext,
) => Promise<ScheduledTriggerSummary>;


interface Context {
  readonly query: CompiledQuery;
  readonly config: RuntimeConfig;
  readonly clients: AwsClients;
  readonly backends: AwsQueryBackends;
  readonly observability: Observability;
  readonly options: ScheduledTriggerOptions;
  /** The tracer when tracing is on (lib/aws/tracing.ts). */
  readonly tracing: Promise<Tracer | undefined>;
  /** The namespace's reshard guards, one per stage. */
  readonly guards: Map<QueryStage, ReshardGuard>;
  /** Where the guards record the shards they refuse, for `sluice status`. */
  readonly refusals: RefusedShardStore;
  /** A replay shadow: a shard with no commit yet starts at its first record at or after this time. */
  readonly startAtMs?: number;
  /**
   * The query compiled for one stage and its backends in this namespace, for a source shard that
   * still holds a one-stage checkpoint when the functions gained a repartition stage (built at first use).
   */
  readonly oneStage: () => Context;
}

/** One tick's limits and what it learnt of batch durations (shared by every shard it runs). */
interface Tick {
  readonly limits: InvocationLimits;
  longestBatchMs: number;
  stoppedBy?: 'deadline';
}

export function createScheduledTriggerHandler(deployable: DeployableQuery, options: ScheduledTriggerOptions = {}): ScheduledTriggerHandler {
  const config = options.config ?? readRuntimeConfig();
  // Compiled once per container; every scheduled invocation reuses it.
  const query = compileForDeployment(deployable, config);
  const meter = new CostMeter();
  const clients = options.clients ?? createFunctionClients(options.clientOptions);
  const observability = options.observability ?? createObservability(query.name);
  // A replay's batches are metered under its own namespace as the Query dimension, so the live
  // query's dashboard and alarms do not count the history it recomputes.
  const shadowMetrics = new Map<string, Observability['metrics']>();
  const shadowObservability = (namespace: string): Observability => {
    if (options.observability) return observability;
    let metrics = shadowMetrics.get(namespace);
    if (!metrics) shadowMetrics.set(namespace, metrics = createObservability(namespace).metrics);
    return { logger: observability.logger, metrics };
  };
  const tracing = tracerForClients(clients);
  // One context per namespace this container has run: the live one, a replay shadow.
  const contexts = new Map<string, Context>();
  const contextOf = (namespace: BackendsNamespace, startAtMs?: number): Context => {
    const key = JSON.stringify([namespace, startAtMs]);
    let context = contexts.get(key);
    if (!context) {
      const backends = createAwsQueryBackends(query, config, clients, meter, options.decorateSink, namespace);
      context = {
        query, config: namespacedConfig(query.definition, config, namespace.location), clients, backends, options, tracing,
        // Only the shadow (driven from a start time): after a cutover the live namespace is a replay's.
        observability: startAtMs === undefined ? observability : shadowObservability(namespace.location.namespace),
        guards: new Map(), refusals: new RefusedShardStore({ client: clients.dynamodb, checkpointTable: config.checkpointTable, namespace: namespace.location.namespace }),
        ...(startAtMs !== undefined ? { startAtMs } : {}),
        oneStage: () => {
          // Both layouts name a source shard's checkpoint partition alike: this one resumes the shard's one-stage run.
          oneStageContext ??= { ...context!, ...oneStageOf(query, config, clients, meter, options.decorateSink, namespace) };
          return oneStageContext;
        },
      };
      let oneStageContext: Context | undefined;
      contexts.set(key, context);
    }
    return context;
  };
  // Cold start: a missing stream or sink setting fails here, not at the first tick.
  contextOf({ location: { namespace: query.name } });
  const guardOf = (context: Context, stage: QueryStage): ReshardGuard => {
    const { backends } = context;
    let guard = context.guards.get(stage);
    if (!guard) {
      const internal = stage.reads === 'internal-stream';
      guard = new ReshardGuard({
        kinesis: clients.kinesis, streamName: backends.streamOf(stage), query, stage,
        checkpointOf: (shardId) => backends.forPartition(shardId, stage).checkpoint,
        reader: backends.readerOf(stage),
        skippedRanges: skippedRangesOf(clients.dynamodb, config.checkpointTable, query.name, stage),
        refusals: context.refusals,
        layout: {
          streamOf: (s) => backends.streamOf(s),
          checkpointOf: (s, shardId) => backends.forPartition(shardId, s).checkpoint,
          sourceFinished: (shardId, shards) => guardOf(context, query.sourceStage).finishedShard(shardId, shards),
        },
        ...(internal ? {} : { markClosed: (shardId: string) => backends.watermarks.markClosed(stage.partitionId(shardId)) }),
      });
      context.guards.set(stage, guard);
    }
    return guard;
  };

  return async (event = {}, lambdaContext) => {
    const mode = (event as ScheduledTriggerEvent).mode ?? 'tick';
    const drain = mode === 'drain';
    const tick: Tick = { limits: invocationLimitsOf(config.functionMemoryMb, lambdaContext?.getRemainingTimeInMillis?.bind(lambdaContext)), longestBatchMs: 0 };
    // The namespaces, read at every invocation: a cutover takes effect at the next tick.
    const pointer = await readNamespacePointer(clients.dynamodb, config.checkpointTable, query.name, meter);
    const fenceOf = (namespace: string) => (pointer.exists ? { fence: namespaceFence(config.checkpointTable, query.name, namespace) } : {});
    const driveShadow = pointer.shadow !== null && (mode === 'replay' || pointer.shadow.drivenBy === 'scheduled-function');
    let summary: ShardSummary[] = [];
    let compaction: ScheduledTriggerSummary['compaction'] | null = null;
    let staging: ScheduledTriggerSummary['staging'] | null = null;
    let spillGc: ScheduledTriggerSummary['spillGc'] | null = null;
    if (mode !== 'replay') {
      const context = contextOf({ location: pointer.active, ...fenceOf(pointer.active.namespace) });
      summary = await runNamespace(context, tick, (stage) => guardOf(context, stage), drain);
      staging = await sweepAfterTick(context, clients, meter, lambdaContext);
      compaction = await compactAfterTick(context, clients, meter, lambdaContext);
      spillGc = await collectSpillAfterTick(context, config, clients, meter, lambdaContext);
    }
    let replay: ScheduledTriggerSummary['replay'];
    if (driveShadow) {
      const shadow = pointer.shadow!;
      // A repartitioned query's shadow shares the internal streams: its records carry its namespace
      // (lib/aws/aws-backends.ts), and its later stages drain them from their own positions.
      const context = contextOf({ location: shadow, ...fenceOf(shadow.namespace) }, shadow.fromMs);
      replay = { runId: shadow.runId, shards: await runNamespace(context, tick, (stage) => guardOf(context, stage), true, false) };
    }
    observability.metrics.publishStoredMetrics();
    for (const metrics of shadowMetrics.values()) metrics.publishStoredMetrics();
    if (tick.stoppedBy) observability.logger.warn('tick stopped before the deadline; the next tick resumes the deferred shards', { deferred: summary.filter((s) => s.deferred).map((s) => s.shardId) });
    return { shards: summary, ...(tick.stoppedBy ? { stoppedBy: tick.stoppedBy } : {}), ...(compaction ? { compaction } : {}), ...(staging ? { staging } : {}), ...(spillGc ? { spillGc } : {}), ...(replay ? { replay } : {}) };
  };
}

/** One namespace's shards: every source stream's, then each later stage's internal stream. */
async function runNamespace(
  context: Context, tick: Tick, guardOf: (stage: QueryStage) => ReshardGuard, drain: boolean, confirmIdleShards = true,
): Promise<ShardSummary[]> {
  const { query, backends, options } = context;
  const now = options.now ?? Date.now;
  const { kinesis } = context.clients;
  // Each source stream's shards (one stream, or several for a query over several streams).
  const streams = await Promise.all(query.sourceStages.map(async (stage) => ({
    stage, shards: parentsFirst(await listStreamShards(kinesis, backends.streamOf(stage))),
  })));
  // First every shard's idle state, so that each no-data batch below sees all of them.
  const caughtUp = new Map<string, boolean>();
  for (const { stage, shards } of confirmIdleShards ? streams : []) {
    for (const shard of shards) {
      const partition = stage.partitionId(shard.ShardId!);
      const idle = await confirmIdle(backends, stage, shard.ShardId!, now());
      caughtUp.set(partition, idle);
      const hop = backends.repartitionSinkOf(stage);
      if (idle && hop) {
        // Every state partition learns that this source shard no longer holds the watermark back.
        // An idle record says which batches are done: -1 for a shard that committed none yet (a new
        // child of a split, a shard no key hashed to), so that its batch 0 is not taken as applied.
        const committed = await backends.forPartition(shard.ShardId!, stage).checkpoint.commitLog.getLatest();
        await hop.broadcastIdle(partition, committed?.[0] ?? NO_BATCH_COMMITTED);
      }
    }
  }
  const summary: ShardSummary[] = [];
  for (const { stage, shards } of streams) {
    for (const shard of shards) {
      const shardId = shard.ShardId!;
      const entry = await runGuarded(context, tick, guardOf(stage), shards, shardId, stage, drain);
      const drained = drain && entry.error === undefined && entry.deferred === undefined;
      summary.push({ ...entry, stage: stage.kind, label: stage.label(shardId), caughtUp: caughtUp.get(stage.partitionId(shardId)) ?? (confirmIdleShards ? false : drained) });
    }
  }
  // Each later stage in order: the internal stream's shards, with whatever the stage before just sent.
  for (const stage of query.stages.filter((s) => s.reads === 'internal-stream')) {
    const internalShards = parentsFirst(await listStreamShards(kinesis, backends.streamOf(stage)));
    for (const shard of internalShards) {
      const entry = await runGuarded(context, tick, guardOf(stage), internalShards, shard.ShardId!, stage, true);
      summary.push({ ...entry, stage: stage.kind, label: stage.label(shard.ShardId!), caughtUp: entry.error === undefined });
    }
  }
  return summary;
}

/** The sink kind the function was bundled for (lib/aws/aws-backends.ts); only s3-files compacts. */
declare const SLUICE_BUNDLED_SINK: string | undefined;

async function compactAfterTick(
  context: Context, clients: AwsClients, meter: CostMeter, lambdaContext: ScheduledInvocationContext | undefined,
): Promise<ScheduledTriggerSummary['compaction'] | null> {
  // Folds to a constant in a bundle for another sink, which leaves compaction (and Parquet reading) out.
  if (typeof SLUICE_BUNDLED_SINK === 'string' && SLUICE_BUNDLED_SINK !== 's3-files') return null;
  try {
    return await compactSinkIfDue({
      query: context.query, config: context.config, clients, meter,
      ...(lambdaContext ? { remainingMs: () => lambdaContext.getRemainingTimeInMillis() } : {}),
    });
  } catch (error) {
    context.observability.logger.error('compaction failed; the next tick retries it', { error: error as Error });
    return { error: (error as Error).message };
  }
}

async function sweepAfterTick(
  context: Context, clients: AwsClients, meter: CostMeter, lambdaContext: ScheduledInvocationContext | undefined,
): Promise<ScheduledTriggerSummary['staging'] | null> {
  try {
    return await sweepStagingIfFilesSink({
      query: context.query, config: context.config, clients, meter,
      ...(lambdaContext ? { remainingMs: () => lambdaContext.getRemainingTimeInMillis() } : {}),
    });
  } catch (error) {
    context.observability.logger.error('sweeping staged files failed; the next tick retries it', { error: error as Error });
    return { error: (error as Error).message };
  }
}

/** How long the collector's lease outlasts the function's timeout (it stops before the timeout by the context's remaining time). */
const SPILL_GC_TIMEOUT_MARGIN_MS = 5_000;
/** Less time left than this after the tick: the collector waits for a tick with time to scan (its daily slot is not used up). */
const SPILL_GC_MIN_TIME_MS = 40_000;

async function collectSpillAfterTick(
  context: Context, config: RuntimeConfig, clients: AwsClients, meter: CostMeter, lambdaContext: ScheduledInvocationContext | undefined,
): Promise<ScheduledTriggerSummary['spillGc'] | null> {
  if (typeof SLUICE_BUNDLED_SINK === 'string' && SLUICE_BUNDLED_SINK !== 'dynamodb') return null;
  if (!spillsToS3(context.query.definition, config)) return null;
  if (lambdaContext && lambdaContext.getRemainingTimeInMillis() < SPILL_GC_MIN_TIME_MS) return null;
  const now = context.options.now ?? Date.now;
  try {
    return await runSpillGc({
      queryName: context.query.definition.name, config, clients, meter, now, minIntervalMs: DEFAULT_SPILL_GC_INTERVAL_MS,
      ...(lambdaContext ? {
        // The run cannot outlive the invocation; the lease outlives it by the margin, so no other run starts while it may still send.
        leaseMs: lambdaContext.getRemainingTimeInMillis() + SPILL_GC_TIMEOUT_MARGIN_MS,
        // The lease runs by the clock the handler was given; the deadline is the context's.
        remainingMs: () => lambdaContext.getRemainingTimeInMillis(),
      } : {}),
    });
  } catch (error) {
    context.observability.logger.error('collecting spilled objects failed; a later tick retries it', { error: error as Error });
    return { error: (error as Error).message };
  }
}

/**
 * Runs a shard once its ancestors are finished (a child seeded from them first); a finished shard
 * (closed, fully committed) runs nothing more: its keys belong to its children.
 */
async function runGuarded(
  context: Context, tick: Tick, guard: ReshardGuard, shards: readonly Shard[], shardId: string, stage: QueryStage, drain: boolean,
): Promise<ShardRun> {
  if (tick.stoppedBy || !hasTimeForBatch(tick.limits, tick.longestBatchMs)) {
    tick.stoppedBy = 'deadline';
    return { shardId, batches: 0, deferred: 'deadline' };
  }
  let readiness: ShardReadiness;
  try {
    readiness = await guard.prepare(shardId, { detectFinished: true, shards });
  } catch (error) {
    context.observability.logger.error('scheduled invocation could not start', { shardId, stage: stage.kind, error: error as Error });
    return { shardId, batches: 0, error: (error as Error).message };
  }
  if (readiness.state === 'finished') return { shardId, batches: 0 };
  if (readiness.state === 'waiting') return { shardId, batches: 0, error: `waiting for its parents: ${readiness.reason}` };
  let oneStage: boolean;
  try {
    oneStage = await guard.runsOneStage(shardId);
  } catch (error) {
    context.observability.logger.error('scheduled invocation could not start', { shardId, stage: stage.kind, error: error as Error });
    return { shardId, batches: 0, error: (error as Error).message };
  }
  if (oneStage) return finishOneStageShard(context.oneStage(), tick, shardId);
  const stored = await finishStoredRedrives(context, tick, shardId, stage);
  if (stored.error !== undefined || stored.deferred !== undefined) return stored;
  const run = await (drain ? drainShard(context, tick, shardId, stage) : tickShard(context, tick, shardId, stage));
  return { ...run, batches: run.batches + stored.batches };
}

/** `query` compiled for one stage (the layout a one-shard stream ran), with its own backends. */
function oneStageOf(
  query: CompiledQuery, config: RuntimeConfig, clients: AwsClients, meter: CostMeter, decorateSink: ScheduledTriggerOptions['decorateSink'], namespace: BackendsNamespace,
): Pick<Context, 'query' | 'backends'> {
  const oneStage = compileQuery(query.definition, { expectedShardCount: 1 });
  if (oneStage.needsRepartition) throw new Error(`query '${query.name}' compiled for one shard still has a repartition stage`);
  return { query: oneStage, backends: createAwsQueryBackends(oneStage, config, clients, meter, decorateSink, namespace) };
}

/**
 * A source shard whose partition ran the query in one stage and still has records after its
 * committed position (the mapping was behind when the functions gained a repartition stage): they
 * run through the one-stage plan on that partition, in tick and drain alike, so that the shard
 * finishes and its state moves to stage 2 (stage 2's guard, later in this tick). The stage-1
 * function waits for this (its role writes neither state nor sink). No no-data batch runs on it:
 * stage 2's first batch evicts and closes up to the shard's next watermark, once.
 */
async function finishOneStageShard(context: Context, tick: Tick, shardId: string): Promise<ShardRun> {
  const stage = context.query.sourceStage;
  const stored = await finishStoredRedrives(context, tick, shardId, stage);
  if (stored.error !== undefined || stored.deferred !== undefined) return stored;
  const run = await drainShard(context, tick, shardId, stage, false);
  return { ...run, batches: run.batches + stored.batches };
}

/**
 * A re-drive (`sluice redrive`) that died after storing its run's records in the ledger and before
 * planning their batch: the batch is planned and run here, once (the plan requires the run still
 * open; lib/aws/redrive-batch.ts), so it does not wait for the next re-drive. Re-drive batches
 * exist only on the partitions of a stateful source stage.
 */
async function finishStoredRedrives(context: Context, tick: Tick, shardId: string, stage: QueryStage): Promise<ShardRun> {
  const ledger = stage.isStateful && stage.reads !== 'internal-stream' ? context.backends.forPartition(shardId, stage).redriveLedger : undefined;
  let batches = 0;
  try {
    for (const run of await ledger?.storedRuns?.(shardId) ?? []) {
      const result = await runAndReport(context, tick, shardId, stage, [], { run, records: await ledger!.records(run) });
      batches += result.progress.length;
      if (result.error) return { shardId, batches, error: result.error.message };
      if (result.stoppedBy) return { shardId, batches, deferred: result.stoppedBy };
    }
  } catch (error) {
    context.observability.logger.error('scheduled re-drive run could not start', { shardId, stage: stage.kind, error: error as Error });
    return { shardId, batches, error: (error as Error).message };
  }
  return { shardId, batches };
}

async function confirmIdle(backends: AwsQueryBackends, stage: QueryStage, shardId: string, nowMs: number): Promise<boolean> {
  const committed = await committedShardOffset(backends.forPartition(shardId, stage).checkpoint, stage.sourceId);
  const position = await backends.readerOf(stage).readAfter(shardId, readAfterPosition(committed?.sequenceNumber), 1);
  const caughtUp = position.records.length === 0 && position.millisBehindLatest === 0;
  if (!caughtUp) return false;
  // A shard that never had data has no watermark row yet: start its idle clock now.
  const partition = stage.partitionId(shardId);
  if (committed === null) await backends.watermarks.publish(partition, 0, -1, false);
  return backends.watermarks.confirmCaughtUp(partition, nowMs);
}

async function runAndReport(
  context: Context, tick: Tick, shardId: string, stage: QueryStage, records: readonly ShardRecord[], redrive?: ShardInvocationRequest['redrive'], scheduled = true,
): Promise<ShardInvocationResult> {
  const { query, backends, observability, options } = context;
  // The invocation's time (EventBridge's, or the test's) is also its batches' processing time: a
  // processing-time timer fires in the tick whose time has passed it.
  const now = options.now ?? Date.now;
  const result = await inSubsegment(await context.tracing, 'sluice scheduled batch', { query: query.name, shard: shardId, stage: stage.kind },
    () => runShardInvocation(
      query, { shardId, records, scheduled, stage, limits: tick.limits, ...(redrive ? { redrive } : {}) },
      { ...backends.forPartition(shardId, stage), clock: { nowMs: now } },
    ));
  for (const p of result.progress) tick.longestBatchMs = Math.max(tick.longestBatchMs, p.durationMs.triggerExecution ?? 0);
  if (result.stoppedBy === 'deadline') tick.stoppedBy = 'deadline';
  for (const progress of result.progress) recordBatchProgress(observability, shardId, progress, stage.kind);
  if (result.expired) recordExpiredLoss(observability, shardId, stage.kind, result.expired);
  if (result.error) observability.logger.error('scheduled invocation failed', { shardId, stage: stage.kind, error: result.error });
  await options.onInvocation?.(shardId, result, stage);
  return result;
}

async function tickShard(context: Context, tick: Tick, shardId: string, stage: QueryStage): Promise<ShardRun> {
  try {
    const result = await runAndReport(context, tick, shardId, stage, []);
    return {
      shardId, batches: result.progress.length, ...(result.error ? { error: result.error.message } : {}),
      ...(result.stoppedBy ? { deferred: result.stoppedBy } : {}),
    };
  } catch (error) {
    context.observability.logger.error('scheduled invocation could not start', { shardId, error: error as Error });
    return { shardId, batches: 0, error: (error as Error).message };
  }
}

/** Reads the shard from its committed position and runs batches until caught up (`noDataBatch`: then one batch without records). */
async function drainShard(context: Context, tick: Tick, shardId: string, stage: QueryStage, noDataBatch = true): Promise<ShardRun> {
  const { backends, options } = context;
  const reader = backends.readerOf(stage);
  let batches = 0;
  try {
    for (;;) {
      if (tick.stoppedBy || !hasTimeForBatch(tick.limits, tick.longestBatchMs)) {
        tick.stoppedBy = 'deadline';
        return { shardId, batches, deferred: 'deadline' };
      }
      const committed = await committedShardOffset(backends.forPartition(shardId, stage).checkpoint, stage.sourceId);
      const after = readAfterPosition(committed?.sequenceNumber);
      const position = await reader.readAfter(shardId, after, options.drainBatchSize ?? 1000, after === null ? context.startAtMs : undefined);
      if (!noDataBatch && position.records.length === 0) return { shardId, batches };
      const result = await runAndReport(context, tick, shardId, stage, position.records, undefined, noDataBatch);
      batches += result.progress.length;
      if (result.error) return { shardId, batches, error: result.error.message };
      if (result.stoppedBy) return { shardId, batches, deferred: result.stoppedBy };
      if (position.records.length === 0) return { shardId, batches };
    }
  } catch (error) {
    return { shardId, batches, error: (error as Error).message };
  }
}
