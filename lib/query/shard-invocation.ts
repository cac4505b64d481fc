/**
 * One invocation of one state partition (a Kinesis shard): what a Lambda invocation, the
 * scheduled handler, `sluice dev` and the tests all run, over a query compiled once per
 * container. The backends (checkpoint, state, sink, dead letters, watermarks) are interfaces; the
 * AWS adapters implement them, and so can memory.
 *
 *   1. Bind the stage's source id to a live source over this shard (nothing is analysed here:
 *      the query was validated, cut into stages and checked when it was compiled).
 *   2. Recover the partition from its checkpoint (StreamExecution.start: fingerprint check, the
 *      pending batch if one was planned and not committed).
 *   3. Drop the delivered records that are already committed (Lambda redelivers after a crash).
 *   4. A pending batch re-runs with exactly its planned records: when the delivery does not hold
 *      them all (a bisected retry), they are read from the shard.
 *   5. Write the undecodable records to the dead-letter location (idempotent), then run batches
 *      until none is due: the re-run, the new records, a no-data batch if the watermark moved far
 *      enough to emit or evict a group (not on every movement, as Spark: each batch costs writes).
 *
 *   6. Stop between batches when the deadline is too close for another (the answer says where
 *      to resume), and fail loudly when the state outgrows the function's memory. A batch whose
 *      failing records are still being searched for stops the same way before the deadline; its
 *      retry resumes the search (lib/query/data-error-search.ts).
 *
 * Whatever fails, the answer says where the uncommitted records start, so the caller retries from
 * there (Lambda's batchItemFailures): nothing is lost, reordered or applied twice.
 */
import type { Checkpoint } from '../checkpoint/checkpoint.js';
import { asKinesisOffset, KinesisShardSource, redriveRunOf, type ExpiredRecords, type KinesisOffset, type ShardRecord } from '../sources/kinesis-shard-source.js';
import { systemClock } from '../runtime/clock.js';
import type { StreamingQueryProgress } from '../runtime/progress.js';
import { StreamExecution } from '../runtime/stream-execution.js';
import { Trigger } from '../runtime/trigger.js';
import type { CompiledQuery } from './compiled-query.js';
import type { ExpiredPlannedRecords, PartitionBackends, RedriveLedger } from './partition-backends.js';
import type { ExpiredInternalRecords } from '../sources/repartition-shard-source.js';
import type { QueryStage, ShardSource } from './query-stage.js';
import type { MicroBatchStream, Offset } from '../sources/source.js';
import { KINESIS_SOURCE_NAME } from './validate-query.js';
import { heldOutRowsOfViews, inShardOrder, RepartitionShardSource } from '../sources/repartition-shard-source.js';
import { internalStreamLetters } from '../sources/held-out-rows.js';
import { ANY_ROW, GuardedSink, raisingRowDeadLetters, resultDeadLetters, runTriggerWithholdingUnwritable } from './unwritable-rows.js';
import { RunTimer, SearchPausedError } from './batch-probe.js';
import { initialStateOwner } from './initial-state-owner.js';
import { checkBatchTimeHeadroom, checkMemoryForNextBatch, checkMemoryHeadroom, hasTimeForBatch, type InvocationLimits } from './invocation-limits.js';
import { BatchKeeper, DEFAULT_KEEP_TIMEOUT_MS } from './kept-records.js';

export interface ShardInvocationRequest {
  readonly shardId: string;
  /** The delivered records, in shard order (may include already committed ones). */
  readonly records: readonly ShardRecord[];
  /** Invoked by the schedule: a no-data batch may run right after recovery. */
  readonly scheduled?: boolean;
  /** Upper bound on batches in one invocation (a re-run, a data batch, a no-data batch). */
  readonly maxBatches?: number;
  /** Default: the query's source stage (the whole query, or stage 1 of a repartition stage). */
  readonly stage?: QueryStage;
  /** The invocation's deadline and memory: no batch starts that may not finish in time. */
  readonly limits?: InvocationLimits;
  /**
   * A re-drive run to plan as a batch of its own on this shard's partition, at its committed
   * position, after any pending batch (lib/aws/redrive-batch.ts); its records are in the ledger too.
   */
  readonly redrive?: { readonly run: string; readonly records: readonly ShardRecord[] };
}

export interface ShardInvocationResult {
  /** Which part of the query ran (with a repartition stage, stage 1 or 2). */
  readonly stage: QueryStage;
  readonly progress: readonly StreamingQueryProgress[];
  /** The committed position of the shard after this invocation. */
  readonly committed: KinesisOffset | null;
  /** The first delivered record not committed (retry from it), or null when all are committed. */
  readonly firstUncommittedSequenceNumber: string | null;
  /** Set when batches were due but the deadline was too close to start one. */
  readonly stoppedBy?: 'deadline';
  /** The planned batch ran without its oldest records, which expired from the stream (recorded as lost). */
  readonly expired?: ExpiredPlannedRecords;
  readonly error?: Error;
}

export async function runShardInvocation(
  query: CompiledQuery, request: ShardInvocationRequest, backends: PartitionBackends,
): Promise<ShardInvocationResult> {
  const { shardId } = request;
  const invocationStartMs = Date.now();
  const stage = request.stage ?? query.sourceStage;
  const binding = stage.bind(shardId, backends);
  const { source } = binding;
  // A stage reading an internal stream marks all its letters: their shard ids repeat the source stream's.
  const deadLetterWriter = stage.reads === 'internal-stream' ? internalStreamLetters(backends.deadLetters) : backends.deadLetters;
  // Rows the sink cannot store are found before it writes (the query's onUnwritableRow policy); the
  // guard also runs the probes that find a record whose values fail the batch (an overflow).
  const limits = backends.sinkRowLimits ?? backends.sink.rowLimits ?? ANY_ROW;
  const guard = new GuardedSink(
    backends.sink, limits, resultDeadLetters(query.name, shardId, deadLetterWriter, source instanceof KinesisShardSource),
    raisingRowDeadLetters(query.name, shardId, deadLetterWriter),
  );
  const owner = await initialStateOwner(query, stage, backends);
  let expiredLoss: ExpiredPlannedRecords | null = null;
  let keeper: BatchKeeper | null = null;
  const execution = new StreamExecution({
    plan: stage.plan,
    sources: new Map([[stage.sourceId, source], ...(binding.otherSources ?? []).map((s) => [s.name, s] as const)]),
    requiredColumns: stage.requiredColumns,
    checkRuntimeRestrictions: stage.checkRuntimeRestrictions,
    columns: stage.columns,
    schema: stage.schema,
    outputMode: stage.outputMode,
    sink: guard,
    trigger: Trigger.ProcessingTime(0),
    checkpoint: backends.checkpoint,
    conf: stage.conf,
    clock: backends.clock ?? systemClock,
    queryName: query.name,
    partitionId: stage.partitionId(shardId),
    watermarkCoordinator: binding.watermarks,
    costMeter: backends.costMeter,
    noDataBatchAfterRecovery: request.scheduled === true,
    noDataBatchOnlyWhenDue: true,
    ...(owner ? { ownsStateKey: owner } : {}),
    batchCommitWrites: (batchId, start, end) => [
      ...(backends.redriveLedger ? redriveDoneWrites(stage.sourceId, backends.redriveLedger)(batchId, start, end) : []),
      // The batch commits only if its loss is still exactly what is recorded (another attempt may have grown it).
      ...(expiredLoss?.batchId === batchId && backends.expiredRecordsCommitWrite ? [backends.expiredRecordsCommitWrite(expiredLoss)] : []),
    ],
  });
  await execution.start();

  const committedOffset = (): KinesisOffset | null => asKinesisOffset(execution.committedSourceOffsets.get(source.name) ?? null);
  const firstUncommitted = (): string | null => {
    const committed = committedOffset();
    const after = committed ? BigInt(committed.sequenceNumber) : -1n;
    return request.records.find((r) => BigInt(r.sequenceNumber) > after)?.sequenceNumber ?? null;
  };

  try {
    // Every view of the shard (a stage 2 with several hop inputs has one per input) sees its records.
    const shardSources = [source, ...(binding.otherSources ?? []).filter(isShardSource)];
    for (const s of shardSources) {
      s.setCommitted(execution.committedSourceOffsets.get(s.name) ?? null);
      s.offer(request.records);
    }
    // The deadline on the records' clock (Kinesis's arrival times: the machine's wall clock, never the
    // query's processing-time clock, which a test or a skewed container may move): an attempt whose
    // records may expire before it ends keeps them first.
    // The budget was read from the Lambda context at the invocation's start (without it: the policy's timeout, else Lambda's 15 minutes).
    const remainingMs = request.limits?.budgetMs ?? backends.keepPolicy?.timeoutMs ?? DEFAULT_KEEP_TIMEOUT_MS;
    keeper = backends.keptRecords
      ? new BatchKeeper(backends.keptRecords, execution, shardSources, shardId, backends.keepPolicy, systemClock.nowMs() + remainingMs)
      : null;
    keeper?.add(request.records);
    if (keeper) guard.beforeWrite = (batchId) => keeper!.beforeSinkWrite(batchId);
    expiredLoss = await ensurePendingBatchRecords(execution, shardSources, shardId, backends, keeper);
    // A later run of a batch may hold fewer records: the sink keeps the run that lost the most (the committed one's loss is the largest recorded).
    if (expiredLoss) guard.revise(expiredLoss.batchId, expiredLoss.count);
    if (request.redrive) {
      if (!source.offerRedrive) throw new Error(`stage ${stage.kind} of ${shardId} cannot run a re-drive batch`);
      // A child seeded after a reshard has committed batch 0 with no position on its own shard yet.
      const committedBefore = (execution.pendingBatch?.batchId ?? execution.nextBatchId) > 0;
      source.offerRedrive(request.redrive.run, request.redrive.records, committedBefore);
    }
    const deadLetters = binding.deadLetters();
    if (deadLetters.length > 0) await deadLetterWriter.write(deadLetters);
    const withholding = source instanceof KinesisShardSource ? source : null;
    // Stage 2 holds out rows of its internal records instead (lib/sources/held-out-rows.ts), on every hop input's view.
    const views = [source, ...(binding.otherSources ?? [])].filter((s): s is RepartitionShardSource => s instanceof RepartitionShardSource);
    const rowSource = views.length > 0 ? heldOutRowsOfViews(views) : null;
    const limits = request.limits ?? {};
    // The searches for a batch's failing records run until the deadline, then resume in the retry.
    const timer = new RunTimer((longestRunMs) => hasTimeForBatch(limits, longestRunMs));
    const runOneTrigger = () => runTriggerWithholdingUnwritable({
      execution, sink: guard, source: withholding, deadLetters: deadLetterWriter, timer,
      ...(rowSource ? { rowSource } : {}),
      batchSequenceNumbers: () => (withholding ? pendingBatchSequenceNumbers(execution, withholding) : inShardOrder(views.flatMap((v) => pendingBatchSequenceNumbers(execution, v)))),
      ...(backends.checkpoint.blameLog ? { blameLog: backends.checkpoint.blameLog } : {}),
    });
    const maxBatches = request.maxBatches ?? 8;
    let longestBatchMs = 0;
    let stoppedBy: 'deadline' | undefined;
    for (let i = 0; i < maxBatches; i++) {
      if (!hasTimeForBatch(limits, longestBatchMs)) {
        stoppedBy = 'deadline';
        break;
      }
      // Judged before the batch too: one that may not fit must not run (Lambda would kill it mid-batch).
      if (execution.pendingBatch || firstUncommitted() !== null) checkMemoryForNextBatch(limits, shardId, execution.pendingBatch?.batchId ?? execution.nextBatchId);
      const startedMs = Date.now();
      try {
        if (!(await runOneTrigger())) break;
      } catch (error) {
        if (!(error instanceof SearchPausedError)) throw error;
        stoppedBy = 'deadline';
        break;
      }
      longestBatchMs = Math.max(longestBatchMs, Date.now() - startedMs);
      // A committed batch's kept records are raw input no longer needed.
      await keeper?.removeCommitted();
      checkMemoryHeadroom(limits, shardId, execution.lastProgress);
      // The first batch counts from the invocation's start: recovery and loading the state are its cost.
      checkBatchTimeHeadroom(limits, Date.now() - (i === 0 ? invocationStartMs : startedMs), shardId, execution.lastProgress);
    }
    return {
      stage, progress: execution.recentProgress, committed: committedOffset(), firstUncommittedSequenceNumber: firstUncommitted(),
      ...(stoppedBy ? { stoppedBy } : {}), ...(expiredLoss ? { expired: expiredLoss } : {}),
    };
  } catch (error) {
    return {
      stage,
      progress: execution.recentProgress,
      committed: committedOffset(),
      firstUncommittedSequenceNumber: firstUncommitted(),
      ...(expiredLoss ? { expired: expiredLoss } : {}),
      error: error as Error,
    };
  }
}

/** A planned, uncommitted batch re-runs with exactly its records: fetch them if not delivered. */
function isShardSource(s: MicroBatchStream): s is ShardSource {
  return typeof (s as Partial<ShardSource>).offer === 'function' && typeof (s as Partial<ShardSource>).covers === 'function';
}

/**
 * Returns the loss a planned batch runs with when its oldest records expired (null: it runs as
 * planned). A re-run holding all its records keeps them first; one that finds them trimmed runs
 * from the kept copy when there is one.
 */
async function ensurePendingBatchRecords(
  execution: StreamExecution, sources: readonly ShardSource[], shardId: string, backends: PartitionBackends, keeper: BatchKeeper | null,
): Promise<ExpiredPlannedRecords | null> {
  const reader = backends.shardReader;
  const ledger = backends.redriveLedger;
  const source = sources[0]!;
  const pending = execution.pendingBatch;
  if (!pending) return null;
  const end = pending.offsets.get(source.name) ?? null;
  const start = execution.committedSourceOffsets.get(source.name) ?? null;
  if (end === null || JSON.stringify(start) === JSON.stringify(end)) return null;
  const run = redriveRunOf(start, end);
  if (run) {
    if (source.covers(start, end)) return null;
    // A re-drive batch: its records are the run's, kept in the ledger, not the shard's.
    if (!ledger || !source.offerRedrive) throw new Error(`batch ${pending.batchId} of ${shardId} re-drives run ${run.run}, and no re-drive ledger is configured`);
    source.offerRedrive(run.run, await ledger.records(run.run));
    if (!source.covers(start, end)) throw new Error(`batch ${pending.batchId} of ${shardId}: the ledger does not hold the ${run.count} record(s) of re-drive run ${run.run}`);
    return null;
  }
  // A loss recorded for the batch: this run leaves those records out too, even when it holds them.
  let lossRecorded = false;
  if (source.covers(start, end)) {
    if (!keeper || (await keeper.keepPending()) !== 'refused') return null;
    lossRecorded = true;
  }
  const planned = asKinesisOffset(end)!;
  if (!reader || planned.firstSequenceNumber === undefined) {
    throw new Error(`batch ${pending.batchId} of ${shardId} must re-run with records ${planned.firstSequenceNumber ?? '?'}..${planned.sequenceNumber}, `
      + 'which this delivery does not hold and no shard reader is configured');
  }
  const records = await reader.read(shardId, planned.firstSequenceNumber, planned.sequenceNumber);
  for (const s of sources) s.offer(records);
  keeper?.add(records);
  if (!lossRecorded && source.covers(start, end)) {
    if (!keeper || (await keeper.keepPending()) !== 'refused') return null;
    lossRecorded = true;
  }
  // Trimmed: a copy kept by an earlier attempt holds them all, and the batch runs as planned.
  if (!lossRecorded && keeper && await keeper.recover() && source.covers(start, end)) return null;
  // Retention trimmed the batch's oldest records: like Spark's Kafka source with failOnDataLoss=false,
  // the batch runs over the rest and keeps its planned end (the records after it stay exactly-once);
  // the loss is recorded first, so it is never silent. Not for a retry of a source without the hook.
  const views = expiredViews(execution, sources, start, end);
  const expired = backends.recordExpiredRecords ? prefixExpiredInEveryView(views, records) : null;
  if (!expired) {
    throw new Error(`batch ${pending.batchId} of ${shardId}: the shard no longer holds all its planned records (retention expired?)`);
  }
  // A stale attempt: another one committed the batch with every record (from the kept copy, removed
  // since, or before the trim), and its sink rows must stay; this one's, of fewer records at a higher
  // revision, would replace them. Looked for before the loss record (no false loss is recorded) and
  // after it: a commit from the copy precedes the copy's removal, which precedes the record.
  const refuseIfCommitted = async (): Promise<void> => {
    const committed = await backends.checkpoint.commitLog.getLatest();
    if (committed && committed[0] >= pending.batchId) {
      throw new Error(`batch ${pending.batchId} of ${shardId} was committed by another attempt while this one found `
        + `${expired.count} of its planned record(s) expired: this stale attempt writes nothing`);
    }
  };
  await refuseIfCommitted();
  // The record only grows: another attempt may have seen a later trim, and this one then leaves out as many.
  // It is refused while a copy is kept (another attempt kept it since): the retry runs from that copy.
  const recorded = await backends.recordExpiredRecords!({ ...expired, shardId, batchId: pending.batchId });
  await refuseIfCommitted();
  keeper?.settleWithLoss(pending.batchId);
  if (!views.every(({ view, from, to }) => view.runWithoutExpired?.(from, to, recorded) === true)) {
    throw new Error(`batch ${pending.batchId} of ${shardId}: ${recorded.count} planned record(s) are recorded as expired `
      + `(${recorded.firstSequenceNumber}..${recorded.lastSequenceNumber}), and the shard does not hold exactly the others`);
  }
  const lostSources = views.flatMap(({ view, from, to }) => view.expiredLostSources?.(from, to) ?? []);
  return { ...recorded, shardId, batchId: pending.batchId, ...(lostSources.length > 0 ? { lostSources } : {}) };
}

/** Every view of the shard with a batch planned (a stage 2 with several hop inputs has one per input), the first one's first. */
function expiredViews(
  execution: StreamExecution, sources: readonly ShardSource[], start: Offset | null, end: Offset,
): { view: ShardSource; from: Offset | null; to: Offset }[] {
  const [source, ...others] = sources;
  return [{ view: source!, from: start, to: end }, ...others.flatMap((view) => {
    const to = execution.pendingBatch!.offsets.get(view.name) ?? null;
    const from = execution.committedSourceOffsets.get(view.name) ?? null;
    return to === null || JSON.stringify(from) === JSON.stringify(to) ? [] : [{ view, from, to }];
  })];
}

/** The prefix the read lacks, when every view sees it as trimmed; with what the lost records carried (stage 2). */
function prefixExpiredInEveryView(
  views: readonly { view: ShardSource; from: Offset | null; to: Offset }[], read: readonly ShardRecord[],
): ExpiredRecords | ExpiredInternalRecords | null {
  const found = views.map(({ view, from, to }) => view.expiredPrefixOf?.(from, to, read) ?? null);
  const first = found[0];
  if (!first || found.some((f) => f === null || f.lastSequenceNumber !== first.lastSequenceNumber)) return null;
  const lostSources = found.flatMap((f) => (f && 'lostSources' in f ? (f as ExpiredInternalRecords).lostSources : []));
  return 'lostSources' in first ? { ...first, lostSources } : first;
}

/** The sequence numbers of the planned, uncommitted batch's records. */
function pendingBatchSequenceNumbers(execution: StreamExecution, source: KinesisShardSource | RepartitionShardSource): string[] {
  const end = execution.pendingBatch?.offsets.get(source.name) ?? null;
  if (!end) return [];
  return source.batchSequenceNumbers(execution.committedSourceOffsets.get(source.name) ?? null, end);
}

/** A re-drive batch's commit also marks its run done in the ledger (one transaction: it runs once). */
function redriveDoneWrites(sourceName: string, ledger: RedriveLedger) {
  return (batchId: number, start: ReadonlyMap<string, Offset | null>, end: ReadonlyMap<string, Offset | null>) => {
    const run = redriveRunOf(start.get(sourceName) ?? null, end.get(sourceName) ?? null);
    return run ? [ledger.doneWrite(run.run, batchId)] : [];
  };
}

/** The shard position a partition's checkpoint has committed (null before its first commit). */
export async function committedShardOffset(checkpoint: Checkpoint, sourceName = KINESIS_SOURCE_NAME): Promise<KinesisOffset | null> {
  const commit = await checkpoint.commitLog.getLatest();
  if (!commit) return null;
  const planned = await checkpoint.offsetLog.get(commit[0]);
  return asKinesisOffset(planned?.offsets[sourceName] ?? null);
}
