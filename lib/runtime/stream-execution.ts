/**
 * Micro-batch execution, Spark's MicroBatchExecution. The recovery protocol:
 *
 *   start:
 *     analyse the plan (refuse before touching the checkpoint), check it against the checkpoint
 *     N, offsets = offsetLog.latest
 *     if none:                      fresh start at batch 0
 *     elif commitLog.latest == N:   batch N is done: next is N+1, watermark = commit N's watermark
 *     else:                         re-run batch N exactly as planned (offsets, watermark, timestamp)
 *   each trigger:
 *     construct: if no re-run is pending, read the sources' latest offsets; a batch runs when there
 *       is new data, or (no-data batch) when a stateful operator would emit or evict with the new
 *       watermark. offsetLog.add(N, offsets + watermark + timestamp) refuses an existing N.
 *     run: read (committed, available] from each source, open state at version N, execute, write
 *       the sink (idempotent by batch id), commit state to version N+1, update the watermark,
 *       commitLog.add(N, next watermark).
 *
 * A crash anywhere before the commit-log write re-runs batch N with the same inputs, watermark
 * and timestamp; the sink and the state versions make the re-run invisible.
 */
import { randomUUID } from 'node:crypto';
import { newEvalContext, type EvalContext } from '../execution/eval-context.js';
import type { Row } from '../execution/evaluate.js';
import { planQuery, type PhysicalQuery } from '../execution/incremental-planner.js';
import { screenRows } from '../execution/row-screening.js';
import type { BatchContext, Exec, StatefulExec } from '../execution/physical.js';
import type { OutputMode } from '../core/output-mode.js';
import { formatProgressTimestamp } from '../core/timestamps.js';
import { outputWatermark, propagateWatermark } from '../execution/watermark-propagator.js';
import { collectNodes, type LogicalPlan, type StreamingRelationNode } from '../plan/logical-plan.js';
import type { Offset, MicroBatchStream } from '../sources/source.js';
import { requiredSourceColumns } from '../analysis/required-columns.js';
import type { StateStore, StateStoreId } from '../state/state-store.js';
import type { Sink } from '../sinks/sink.js';
import { CHECKPOINT_FORMAT_VERSION, type Checkpoint, type CommitEntry, type CommitSideWrite, type OffsetSeq, type QueryFingerprint } from '../checkpoint/checkpoint.js';
import { CheckpointError, IllegalArgumentError, StreamingQueryError } from '../errors/sluice-error.js';
import { checkRuntimeRestrictions } from '../analysis/unsupported-operation-checker.js';
import type { Clock } from './clock.js';
import type { StreamingQueryProgress } from './progress.js';
import { progressRates } from './progress-rates.js';
import type { Trigger } from './trigger.js';
import { parseWatermarkPolicy, WATERMARK_POLICY_CONF, WatermarkTracker } from './watermark-tracker.js';
import { checkFingerprint, fingerprintOf } from './query-fingerprint.js';
import type { CostMeter } from '../core/cost-meter.js';
import { singlePartitionWatermarks, type WatermarkCoordinator } from './watermark-coordinator.js';
import type { StructField } from '../plan/data-types.js';

export const NO_DATA_BATCHES_CONF = 'spark.sql.streaming.noDataMicroBatches.enabled';

export interface StreamExecutionOptions {
  readonly plan: LogicalPlan;
  /** The live source of each source id the plan names: bound for this run only. */
  readonly sources: ReadonlyMap<string, MicroBatchStream>;
  /**
   * The columns each source must decode (Spark's column pruning), when the caller analysed the
   * plan already (a compiled query); default: derived from the plan here.
   */
  readonly requiredColumns?: ReadonlyMap<string, ReadonlySet<string>>;
  /**
   * Checks the plan against the runtime restrictions before its first batch; a compiled query
   * passes the result of checking once. Default: checks `plan` now.
   */
  readonly checkRuntimeRestrictions?: () => void;
  readonly columns: readonly string[];
  readonly outputMode: OutputMode;
  readonly sink: Sink;
  readonly trigger: Trigger;
  readonly checkpoint: Checkpoint;
  readonly conf: ReadonlyMap<string, string>;
  readonly clock: Clock;
  readonly queryName: string | null;
  /** Recent progress entries kept in memory (Spark keeps 100). */
  readonly progressRetention?: number;
  /** Output column types, handed to the sink. */
  readonly schema?: readonly StructField[];
  /** The state partition this execution owns (a Kinesis shard); batch ids count per partition. */
  readonly partitionId?: string;
  /** Combines this partition's watermark with the other partitions' (default: this one alone). */
  readonly watermarkCoordinator?: WatermarkCoordinator;
  /** Where the adapters count requests and capacity; progress reports the cost per batch. */
  readonly costMeter?: CostMeter;
  /**
   * Writes that belong to batch `batchId`'s commit, given what it read (start and end offsets per
   * source): made in the commit's own transaction (a re-drive batch marks its run done there).
   */
  readonly batchCommitWrites?: (batchId: number, start: ReadonlyMap<string, Offset | null>, end: ReadonlyMap<string, Offset | null>) => readonly CommitSideWrite[];
  /**
   * Allow a no-data batch right after recovering from the checkpoint (a scheduled invocation's whole
   * job), instead of only after a batch ran in this process as Spark does.
   */
  readonly noDataBatchAfterRecovery?: boolean;
  /**
   * Run a no-data batch only when an operator would really emit or evict a group it holds, not on
   * every watermark movement as Spark does (its output is the same: a batch that emits and evicts
   * nothing writes only a new state version). The deployed runtime sets it: each batch costs writes.
   */
  readonly noDataBatchOnlyWhenDue?: boolean;
  /** The grouping keys this partition owns, when it is one of several (BatchContext.ownsStateKey). */
  readonly ownsStateKey?: (operatorId: number, keyValues: readonly unknown[]) => boolean;
}

/** The live sources of the plan's source ids, in plan order; every id must be bound. */
function bindSources(plan: LogicalPlan, live: ReadonlyMap<string, MicroBatchStream>): MicroBatchStream[] {
  const bound = new Map<string, MicroBatchStream>();
  for (const { sourceId } of collectNodes(plan, (n): n is StreamingRelationNode => n.kind === 'StreamingRelation')) {
    const source = live.get(sourceId);
    if (!source) {
      throw new IllegalArgumentError(`The query reads source '${sourceId}', but no live source is bound to that id.`, {
        code: 'UNBOUND_SOURCE', hint: 'pass a source for every source id of the plan (StreamExecutionOptions.sources).',
      });
    }
    if (source.name !== sourceId) {
      throw new IllegalArgumentError(`The source bound to id '${sourceId}' is named '${source.name}'.`, {
        code: 'UNBOUND_SOURCE', hint: 'a source is bound to the id it is named by: offsets and progress are keyed by that name.',
      });
    }
    bound.set(sourceId, source);
  }
  return [...bound.values()];
}

/** What a batch's progress record is built from. */
interface BatchFigures {
  batchId: number; triggerStartMs: number; addBatchMs: number; numInputRows: number; numOutputRows: number;
  /** This trigger's start minus the previous trigger's, on the trigger clock (null: no previous). */
  triggerIntervalMs: number | null;
  sources: StreamingQueryProgress['sources']; watermarkMs: number; numDeadLetteredRows: number; cost: Record<string, number>;
  /** Each stateful operator's watermarks (by operator id): for late rows and for eviction. */
  operatorWatermarks: { late: ReadonlyMap<number, number>; eviction: ReadonlyMap<number, number> };
}

interface StartPosition {
  readonly latest: [number, OffsetSeq] | undefined;
  readonly commit: [number, CommitEntry] | undefined;
}

interface BatchMetadata {
  batchWatermarkMs: number;
  batchTimestampMs: number;
}

export class StreamExecution {
  readonly runId = randomUUID();
  id = '';
  readonly recentProgress: StreamingQueryProgress[] = [];
  private readonly sources: MicroBatchStream[];
  private readonly evalContext: EvalContext = newEvalContext();
  private physical: PhysicalQuery | null = null;
  /** The operators with a stateful operator below them (their input rows depend on state). */
  private aboveState: ReadonlySet<Exec> = new Set();
  /**
   * Rows raising a data error above state to leave out of one batch (RaisingRowPolicy); set by
   * the trigger loop for a batch whose error no record of it can be blamed for.
   */
  raisingRowPolicy: RaisingRowPolicy | null = null;
  /** The stateful operators with processing-time timers (fixed once planned). */
  private timedOperators: readonly StatefulExec[] = [];
  private tracker!: WatermarkTracker;
  private currentBatchId = 0;
  private committedOffsets = new Map<string, Offset | null>();
  private availableOffsets = new Map<string, Offset | null>();
  private metadata: BatchMetadata = { batchWatermarkMs: 0, batchTimestampMs: 0 };
  private batchConf: Record<string, string> = {};
  private isCurrentBatchConstructed = false;
  /** Whether a batch ran since start: Spark's `lastExecution`, needed to decide no-data batches. */
  private hasLastExecution = false;
  private started = false;
  private previousWatermarkCache: { batchId: number; watermarkMs: number } | null = null;
  /**
   * When the previous trigger started, on the trigger clock (Spark's lastTriggerStartTimestamp),
   * for the input rate. Spark forgets it on restart; Sluice restores it from the latest offset
   * entry's batchTimestampMs, read at recovery anyway, since a Lambda invocation is a restart.
   */
  private lastTriggerStartMs: number | null = null;
  /** The earliest processing-time timer after the last committed batch (null: none; undefined: unknown). */
  private nextTimerMs: number | null | undefined = undefined;

  /**
   * The cost meter's reading when the last batch's cost was taken. Everything spent since (the
   * recovery reads, planning, watermark queries, dead letters, the batch itself) is the next
   * batch's cost, so the batches' costs add up to what the query spent.
   */
  private costMark: Record<string, number> = {};

  private takeCost(): Record<string, number> {
    const meter = this.options.costMeter;
    if (!meter) return {};
    const cost = meter.since(this.costMark);
    this.costMark = meter.snapshot();
    return cost;
  }

  /** The cost since the last batch's, without moving the mark. */
  private peekCost(): Record<string, number> {
    return this.options.costMeter?.since(this.costMark) ?? {};
  }

  constructor(private readonly options: StreamExecutionOptions) {
    this.costMark = options.costMeter?.snapshot() ?? {};
    this.sources = bindSources(options.plan, options.sources);
    const required = options.requiredColumns ?? requiredSourceColumns(options.plan);
    for (const [sourceId, columns] of required) options.sources.get(sourceId)?.pruneColumns?.([...columns]);
  }

  get lastProgress(): StreamingQueryProgress | undefined {
    return this.recentProgress[this.recentProgress.length - 1];
  }

  /** End offsets of the last committed batch, per source (after `start()`). */
  get committedSourceOffsets(): ReadonlyMap<string, Offset | null> {
    return this.committedOffsets;
  }

  /** The planned, not yet committed batch (a re-run is pending), or null. */
  get pendingBatch(): { batchId: number; offsets: ReadonlyMap<string, Offset | null> } | null {
    return this.isCurrentBatchConstructed ? { batchId: this.currentBatchId, offsets: this.availableOffsets } : null;
  }

  get nextBatchId(): number {
    return this.currentBatchId;
  }

  get currentWatermarkMs(): number {
    return this.tracker?.currentWatermarkMs ?? 0;
  }

  /**
   * Plans the query and recovers its position from the checkpoint. The recovery reads (metadata,
   * latest offset entry, latest commit, the other partitions' watermarks) go out together: one
   * round trip; the previous offset entry is read only when a planned batch must re-run.
   */
  async start(): Promise<void> {
    const { checkpoint } = this.options;
    this.physical = planQuery(this.options.plan, this.evalContext);
    this.aboveState = operatorsAboveState(this.physical.root, new Set(this.physical.statefulOperators));
    this.timedOperators = this.physical.statefulOperators.filter((op) => op.nextTimerMs !== undefined);
    const fingerprint: QueryFingerprint = fingerprintOf(this.options, this.physical, this.sources);
    this.options.watermarkCoordinator?.prefetch?.(this.partitionId);
    const [existing, position] = await Promise.all([checkpoint.readQueryMetadata(), this.readStartPosition()]);
    if (existing) {
      checkFingerprint(existing.fingerprint, fingerprint);
      this.id = existing.queryId;
    } else {
      this.id = randomUUID();
      await checkpoint.writeQueryMetadata({ formatVersion: CHECKPOINT_FORMAT_VERSION, queryId: this.id, fingerprint });
    }
    await this.populateStartOffsets(position);
    this.started = true;
  }

  /** The latest offset entry and the latest commit, read together. */
  private async readStartPosition(): Promise<StartPosition> {
    const { checkpoint } = this.options;
    let [latest, commit] = await Promise.all([checkpoint.offsetLog.getLatest(), checkpoint.commitLog.getLatest()]);
    // Read side by side, the commit may be newer than the offset entry read a moment before it (a
    // writer planned and committed in between): the offset log, read again, has it.
    while (commit && (!latest || commit[0] > latest[0])) {
      latest = await checkpoint.offsetLog.getLatest();
      if (!latest || commit[0] > latest[0]) {
        throw new CheckpointError(`Commit ${commit[0]} has no offset log entry; the checkpoint is damaged.`, {
          code: 'OFFSET_LOG_GAP', hint: 'the checkpoint is damaged; start the query with a new checkpoint.',
        });
      }
    }
    return { latest, commit };
  }

  private async populateStartOffsets({ latest, commit }: StartPosition): Promise<void> {
    const { checkpoint, conf } = this.options;
    let policyConf = conf.get(WATERMARK_POLICY_CONF);
    if (!latest) {
      this.currentBatchId = 0;
      this.batchConf = { [WATERMARK_POLICY_CONF]: parseWatermarkPolicy(policyConf) };
      this.tracker = new WatermarkTracker(parseWatermarkPolicy(policyConf), 0);
      return;
    }
    const [latestBatchId, offsets] = latest;
    // The policy is part of the checkpoint: a restarted query keeps the one it started with.
    policyConf = offsets.conf[WATERMARK_POLICY_CONF] ?? 'min';
    this.batchConf = { ...offsets.conf };
    this.currentBatchId = latestBatchId;
    this.isCurrentBatchConstructed = true;
    this.availableOffsets = new Map(Object.entries(offsets.offsets));
    this.metadata = { batchWatermarkMs: offsets.batchWatermarkMs, batchTimestampMs: offsets.batchTimestampMs };
    this.tracker = new WatermarkTracker(parseWatermarkPolicy(policyConf), offsets.batchWatermarkMs);
    if (commit && commit[0] === latestBatchId) {
      this.lastTriggerStartMs = knownTimestamp(offsets.batchTimestampMs);
      this.currentBatchId = latestBatchId + 1;
      this.isCurrentBatchConstructed = false;
      this.committedOffsets = new Map(this.availableOffsets);
      // The next batch's lower bound on the watermark is this entry's: no need to read it again.
      this.previousWatermarkCache = { batchId: latestBatchId + 1, watermarkMs: offsets.batchWatermarkMs };
      this.tracker.setWatermark(commit[1].nextBatchWatermarkMs);
      this.nextTimerMs = commit[1].nextTimerMs;
      this.metadata = { ...this.metadata, batchWatermarkMs: this.tracker.currentWatermarkMs };
      await this.options.sink.onCommitted?.(this.partitionId, latestBatchId);
      if (this.options.noDataBatchAfterRecovery) {
        this.hasLastExecution = true;
        this.resumeOperatorsAfter(offsets.batchWatermarkMs);
      }
      return;
    }
    // Batch N is planned, not committed: it re-runs from where batch N-1 ended.
    if (latestBatchId > 0) {
      const previous = await checkpoint.offsetLog.get(latestBatchId - 1);
      if (!previous) {
        throw new CheckpointError(`Offset log entry ${latestBatchId - 1} is missing; cannot recover batch ${latestBatchId}.`, {
          code: 'OFFSET_LOG_GAP', hint: 'the checkpoint is damaged; start the query with a new checkpoint.',
        });
      }
      this.committedOffsets = new Map(Object.entries(previous.offsets));
      this.previousWatermarkCache = { batchId: latestBatchId, watermarkMs: previous.batchWatermarkMs };
      // The re-run's previous batch is N-1 (the failed attempt of N ran no batch).
      this.lastTriggerStartMs = knownTimestamp(previous.batchTimestampMs);
    }
  }

  /** The stateful operators as they were after the last committed batch ran with `watermarkMs`. */
  private resumeOperatorsAfter(watermarkMs: number): void {
    const physical = this.physical!;
    const eviction = propagateWatermark(physical.root, watermarkMs);
    const ctx = {
      hasWatermark: physical.watermarkOperators.length > 0,
      outputMode: this.options.outputMode,
      evictionWatermarkMs: (id: number) => eviction.get(id) ?? 0,
    };
    for (const op of physical.statefulOperators) op.recordEvictionWatermark(ctx);
  }

  private get noDataBatchesEnabled(): boolean {
    if (this.options.trigger.kind === 'once') return false;
    return (this.options.conf.get(NO_DATA_BATCHES_CONF) ?? 'true') !== 'false';
  }

  /** Whether the sources have data beyond what was planned. */
  private latestOffsets(): Map<string, Offset | null> {
    const latest = new Map<string, Offset | null>();
    for (const s of this.sources) latest.set(s.name, s.latestOffset());
    return latest;
  }

  private hasNewData(latest: Map<string, Offset | null>): boolean {
    for (const [name, off] of latest) if (off !== null && !sameOffset(off, this.availableOffsets.get(name) ?? null)) return true;
    return false;
  }

  /** Decides whether a batch runs now and, if so, records it in the offset log. */
  private async constructNextBatch(): Promise<boolean> {
    if (this.isCurrentBatchConstructed) return true;
    const latest = this.latestOffsets();
    const newData = this.hasNewData(latest);
    const watermarkMs = await this.nextBatchWatermarkMs(newData);
    const nowMs = this.options.clock.nowMs();
    const noDataBatch = !newData && this.noDataBatchesEnabled && this.hasLastExecution
      && (this.wouldEmitOrEvict(watermarkMs) || this.timerDue(nowMs));
    if (!newData && !noDataBatch) return false;
    for (const [name, off] of latest) if (off !== null) this.availableOffsets.set(name, off);
    this.metadata = { batchWatermarkMs: watermarkMs, batchTimestampMs: nowMs };
    const entry: OffsetSeq = {
      formatVersion: CHECKPOINT_FORMAT_VERSION,
      batchId: this.currentBatchId,
      offsets: Object.fromEntries(this.availableOffsets),
      batchWatermarkMs: this.metadata.batchWatermarkMs,
      batchTimestampMs: this.metadata.batchTimestampMs,
      conf: this.batchConf,
    };
    if (!(await this.options.checkpoint.offsetLog.add(this.currentBatchId, entry))) {
      throw new CheckpointError(`Batch ${this.currentBatchId} was already planned by another writer of this checkpoint.`, {
        code: 'CONCURRENT_QUERY', retryable: false,
        hint: 'only one run of a query may use a checkpoint at a time; stop the other run.',
        context: { batchId: this.currentBatchId },
      });
    }
    this.isCurrentBatchConstructed = true;
    return true;
  }

  private get partitionId(): string {
    return this.options.partitionId ?? '0';
  }

  /** This partition's watermark combined with the others', never below the last batch's. */
  private async nextBatchWatermarkMs(hasNewData: boolean): Promise<number> {
    const coordinator = this.options.watermarkCoordinator ?? singlePartitionWatermarks;
    const combined = await coordinator.combine(this.partitionId, this.tracker.currentWatermarkMs, hasNewData);
    const previous = this.currentBatchId > 0 ? await this.previousBatchWatermarkMs(this.currentBatchId) : 0;
    return Math.max(combined, previous);
  }

  private wouldEmitOrEvict(newWatermarkMs: number): boolean {
    const physical = this.physical!;
    const inputs = propagateWatermark(physical.root, newWatermarkMs);
    // A loop, not closures: this runs on every trigger.
    for (const op of physical.statefulOperators) {
      const watermarkMs = inputs.get(op.operatorId) ?? 0;
      const due = this.options.noDataBatchOnlyWhenDue
        ? op.hasStateDueAt?.(watermarkMs) ?? op.shouldRunAnotherBatch(watermarkMs)
        : op.shouldRunAnotherBatch(watermarkMs);
      if (due) return true;
    }
    return false;
  }

  /**
   * Whether a processing-time timer fires in a batch with timestamp `nowMs` (Spark fires a timer
   * earlier than the batch timestamp). Spark runs a no-data batch on every trigger of a
   * processing-time query; Sluice only when one is due, so idle shards cost no batches. Unknown
   * (an old or seeded commit entry): run, as Spark does.
   */
  private timerDue(nowMs: number): boolean {
    const timed = this.timedOperators;
    if (timed.length === 0) return false;
    const known = timed.map((op) => this.operatorNextTimerMs(op));
    const next = known.every((t) => t !== undefined) ? minTimer(known) : this.nextTimerMs;
    if (next === undefined) return true;
    return next !== null && nowMs > next;
  }

  /** After a batch ran: the operators' earliest timer (null: none), undefined if no operator has timers. */
  private operatorsNextTimerMs(): number | null | undefined {
    const timed = this.timedOperators;
    return timed.length === 0 ? undefined : minTimer(timed.map((op) => this.operatorNextTimerMs(op)));
  }

  /**
   * An operator's next timer; deployed (noDataBatchOnlyWhenDue), also its next TTL expiry, so an
   * idle shard's scheduled trigger evicts expired state (Spark evicts only in batches it runs anyway).
   */
  private operatorNextTimerMs(op: StatefulExec): number | null | undefined {
    const timer = op.nextTimerMs!();
    if (!this.options.noDataBatchOnlyWhenDue || !op.nextStateExpiryMs) return timer;
    const expiry = op.nextStateExpiryMs();
    return timer === undefined || expiry === undefined ? undefined : minTimer([timer, expiry]);
  }

  /** One trigger: constructs and runs at most one batch. Returns whether a batch ran. */
  async runOneTrigger(): Promise<boolean> {
    if (!this.started) throw new Error('query not started');
    const startedAt = Date.now();
    const triggerStartMs = this.options.clock.nowMs();
    const triggerIntervalMs = this.lastTriggerStartMs === null ? null : triggerStartMs - this.lastTriggerStartMs;
    // As Spark, a trigger that runs no batch is still the previous trigger of the next one; a trigger
    // that fails is not (its batch re-runs, and the re-run's rate is over the same interval).
    if (!(await this.constructNextBatch())) {
      this.lastTriggerStartMs = triggerStartMs;
      return false;
    }
    await this.runBatch(startedAt, triggerIntervalMs);
    this.lastTriggerStartMs = triggerStartMs;
    return true;
  }

  private async previousBatchWatermarkMs(batchId: number): Promise<number> {
    if (batchId === 0) return 0;
    if (this.previousWatermarkCache?.batchId === batchId) return this.previousWatermarkCache.watermarkMs;
    const previous = await this.options.checkpoint.offsetLog.get(batchId - 1);
    const watermarkMs = previous?.batchWatermarkMs ?? this.metadata.batchWatermarkMs;
    this.previousWatermarkCache = { batchId, watermarkMs };
    return watermarkMs;
  }

  /** Each stateful operator's watermarks for batch `batchId`: for late rows (the previous batch's) and for eviction. */
  private async operatorWatermarks(batchId: number): Promise<{ late: ReadonlyMap<number, number>; eviction: ReadonlyMap<number, number> }> {
    const root = this.physical!.root;
    return {
      late: propagateWatermark(root, await this.previousBatchWatermarkMs(batchId)),
      eviction: propagateWatermark(root, this.metadata.batchWatermarkMs),
    };
  }

  /** What the operators see of batch `batchId`; resets the per-batch evaluation values (a re-run sees the same). */
  private batchContext(
    batchId: number, sourceRows: ReadonlyMap<string, Row[]>, watermarks: { late: ReadonlyMap<number, number>; eviction: ReadonlyMap<number, number> },
    stores: ReadonlyMap<string, StateStore<unknown>> | null,
  ): BatchContext {
    this.evalContext.batchTimestampMs = this.metadata.batchTimestampMs;
    this.evalContext.nextRowId = 0;
    const policy = stores !== null && this.raisingRowPolicy?.batchId === batchId ? this.raisingRowPolicy : null;
    policy?.startRun();
    const dropRaisingRow = policy
      ? (operator: Exec, row: Row, error: unknown): boolean => this.aboveState.has(operator)
        && policy.drop(row, operator.children[0]!.output.map((a) => ({ name: a.name, type: a.type })), error)
      : undefined;
    return new RunningBatch(
      batchId, sourceRows, this.evalContext, this.options.outputMode, this.physical!.watermarkOperators.length > 0, watermarks, stores, this.options.ownsStateKey,
      dropRaisingRow,
    );
  }

  /**
   * The rows of source `sourceName` in the planned, uncommitted batch that raise a data error on
   * their own (row screening, lib/execution/row-screening.ts), by their index in the source's
   * batch, each with its error. Opens no state and writes nothing.
   */
  async screenPendingBatch(sourceName: string, isDataError: (error: unknown) => boolean): Promise<Map<number, unknown>> {
    const source = this.sources.find((s) => s.name === sourceName);
    if (!this.isCurrentBatchConstructed || !source) return new Map();
    const start = this.committedOffsets.get(source.name) ?? null;
    const end = this.availableOffsets.get(source.name) ?? null;
    if (end === null || sameOffset(start, end)) return new Map();
    const rows = source.getBatch(start, end);
    const ctx = this.batchContext(this.currentBatchId, new Map(), await this.operatorWatermarks(this.currentBatchId), null);
    const { sink } = this.options;
    return screenRows(this.physical!.root, {
      ctx, sourceName, rows, isDataError, ...(sink.screenRow ? { screenOutputRow: (row: Row) => sink.screenRow!(row) } : {}),
    });
  }

  private async runBatch(triggerStartMs: number, triggerIntervalMs: number | null): Promise<void> {
    const physical = this.physical!;
    const batchId = this.currentBatchId;
    const { checkpoint, sink, outputMode } = this.options;
    if (batchId === 0 || !this.hasLastExecution) {
      (this.options.checkRuntimeRestrictions ?? (() => checkRuntimeRestrictions(this.options.plan, this.options.conf)))();
    }

    const watermarkMs = this.metadata.batchWatermarkMs;
    const { late, eviction } = await this.operatorWatermarks(batchId);

    const stores = new Map<string, StateStore<unknown>>();
    for (const op of physical.statefulOperators) {
      for (const id of op.stateStoreIds) stores.set(storeKey(id), await checkpoint.stateStore.open(id, batchId));
    }

    const sourceRows = new Map<string, Row[]>();
    const sourceProgress: StreamingQueryProgress['sources'][number][] = [];
    let numInputRows = 0;
    let numDeadLetteredRows = 0;
    for (const s of this.sources) {
      const start = this.committedOffsets.get(s.name) ?? null;
      const end = this.availableOffsets.get(s.name) ?? null;
      const empty = end === null || sameOffset(start, end);
      const rows = empty ? [] : s.getBatch(start, end);
      if (!empty && s.numInvalidRecords) numDeadLetteredRows += s.numInvalidRecords(start, end);
      sourceRows.set(s.name, rows);
      numInputRows += rows.length;
      sourceProgress.push({ description: s.name, startOffset: start, endOffset: end, numInputRows: rows.length });
    }

    const ctx = this.batchContext(batchId, sourceRows, { late, eviction }, stores);

    const executionStart = Date.now();
    let output: Row[];
    try {
      output = physical.root.execute(ctx);
      await sink.addBatch({
        batchId, columns: this.options.columns, rows: output, outputMode,
        schema: this.options.schema ?? this.options.plan.output.map((a) => ({ name: a.name, type: a.type })),
        partitionId: this.partitionId,
        watermarkMs: outputWatermark(physical.root, watermarkMs) ?? watermarkMs,
      });
    } catch (error) {
      for (const s of stores.values()) s.abort();
      throw error instanceof StreamingQueryError || error instanceof CheckpointError
        ? error
        : new StreamingQueryError(`Query ${this.options.queryName ?? this.id} terminated with exception: ${(error as Error).message}`, {
          code: 'BATCH_FAILED', cause: error, context: { batchId }, errorClass: (error as { errorClass?: string }).errorClass,
          // A throttled or failed write is still retryable once wrapped: the logs must say so.
          retryable: (error as { retryable?: unknown }).retryable === true,
        });
    }
    const addBatchMs = Date.now() - executionStart;
    for (const s of stores.values()) await s.commit();

    this.tracker.update(physical.watermarkOperators.map((w) => ({ stats: w.stats, delayMs: w.delayMs })));
    // The durable copy goes with the commit (no extra round trip), so it is the batch as of its
    // commit: its cost and duration leave out the commit itself, which the next record counts.
    checkpoint.stageProgress?.(batchId, this.buildProgress({
      batchId, triggerStartMs, triggerIntervalMs, addBatchMs, numInputRows, numOutputRows: output.length, sources: sourceProgress, watermarkMs,
      numDeadLetteredRows, operatorWatermarks: { late, eviction }, cost: this.peekCost(),
    }));
    const nextWatermarkMs = this.tracker.currentWatermarkMs;
    const nextTimerMs = this.operatorsNextTimerMs();
    const commitEntry = {
      formatVersion: CHECKPOINT_FORMAT_VERSION, batchId, nextBatchWatermarkMs: nextWatermarkMs, ...(nextTimerMs !== undefined ? { nextTimerMs } : {}),
    };
    const coordinator = this.options.watermarkCoordinator;
    const hadData = numInputRows > 0;
    // The watermark row goes in the commit's own write when the checkpoint and coordinator allow it.
    const folded = checkpoint.commitLog.addWithSideWrites
      ? coordinator?.publishWithCommit?.(this.partitionId, nextWatermarkMs, batchId, hadData)
      : undefined;
    const sideWrites = [...(folded ? [folded] : []), ...(this.options.batchCommitWrites?.(batchId, this.committedOffsets, this.availableOffsets) ?? [])];
    if (sideWrites.length > 0 && !checkpoint.commitLog.addWithSideWrites) {
      throw new CheckpointError(`Batch ${batchId}'s commit must also write ${sideWrites.map((w) => w.description).join(', ')}, which this checkpoint cannot.`, {
        code: 'CHECKPOINT_IO',
      });
    }
    const committed = sideWrites.length > 0
      ? await checkpoint.commitLog.addWithSideWrites!(batchId, commitEntry, sideWrites)
      : await checkpoint.commitLog.add(batchId, commitEntry);
    if (!committed) {
      throw new CheckpointError(`Batch ${batchId} was already committed by another writer of this checkpoint.`, {
        code: 'CONCURRENT_QUERY', hint: 'only one run of a query may use a checkpoint at a time.',
      });
    }
    await sink.onCommitted?.(this.partitionId, batchId);
    if (!folded) await coordinator?.publish(this.partitionId, nextWatermarkMs, batchId, hadData);
    for (const s of this.sources) {
      const end = this.availableOffsets.get(s.name);
      if (end !== undefined && end !== null) s.commit(end);
    }
    this.committedOffsets = new Map(this.availableOffsets);
    this.isCurrentBatchConstructed = false;
    this.hasLastExecution = true;
    this.nextTimerMs = nextTimerMs;
    this.recordProgress({
      batchId, triggerStartMs, triggerIntervalMs, addBatchMs, numInputRows, numOutputRows: output.length, sources: sourceProgress, watermarkMs,
      numDeadLetteredRows, operatorWatermarks: { late, eviction }, cost: this.takeCost(),
    });
    this.currentBatchId = batchId + 1;
    this.previousWatermarkCache = { batchId: batchId + 1, watermarkMs };
    await this.purgeLogsEvery(batchId);
  }

  /** Keeps the offset and commit logs bounded, as Spark's minBatchesToRetain (100) does. */
  private async purgeLogsEvery(batchId: number): Promise<void> {
    const retain = 100;
    if (batchId < retain || batchId % 50 !== 0) return;
    await this.options.checkpoint.offsetLog.purge(batchId - retain);
    await this.options.checkpoint.commitLog.purge(batchId - retain);
  }

  private recordProgress(batch: BatchFigures): void {
    this.recentProgress.push(this.buildProgress(batch));
    const keep = this.options.progressRetention ?? 100;
    if (this.recentProgress.length > keep) this.recentProgress.splice(0, this.recentProgress.length - keep);
  }

  private buildProgress(batch: BatchFigures): StreamingQueryProgress {
    const { batchId, triggerStartMs, addBatchMs, numInputRows, numOutputRows, sources, watermarkMs } = batch;
    const physical = this.physical!;
    const durationMs = Math.max(Date.now() - triggerStartMs, 0);
    let eventTime: Record<string, string> = {};
    if (physical.watermarkOperators.length > 0) {
      let count = 0;
      let sum = 0;
      let max = -Infinity;
      let min = Infinity;
      for (const { stats } of physical.watermarkOperators) {
        if (stats.count === 0) continue;
        count += stats.count;
        sum += stats.sum;
        if (stats.max > max) max = stats.max;
        if (stats.min < min) min = stats.min;
      }
      eventTime = count === 0 ? { watermark: formatProgressTimestamp(watermarkMs) } : {
        avg: formatProgressTimestamp(Math.round(sum / count)),
        max: formatProgressTimestamp(max),
        min: formatProgressTimestamp(min),
        watermark: formatProgressTimestamp(watermarkMs),
      };
    }
    const progress: StreamingQueryProgress = {
      id: this.id,
      runId: this.runId,
      name: this.options.queryName,
      timestamp: formatProgressTimestamp(triggerStartMs),
      batchId,
      batchDuration: durationMs,
      numInputRows,
      ...progressRates(numInputRows, batch.triggerIntervalMs, durationMs),
      durationMs: { addBatch: addBatchMs, triggerExecution: durationMs },
      eventTime,
      batchWatermarkMs: watermarkMs,
      stateOperators: physical.statefulOperators.map((op) => ({
        ...op.lastProgress(),
        ...(physical.watermarkOperators.length > 0 ? {
          eventTimeWatermarkForLateEvents: formatProgressTimestamp(batch.operatorWatermarks.late.get(op.operatorId) ?? 0),
          eventTimeWatermarkForEviction: formatProgressTimestamp(batch.operatorWatermarks.eviction.get(op.operatorId) ?? 0),
        } : {}),
      })),
      // Each source's rows over the batch's intervals (Spark's SourceProgress rates).
      sources: sources.map((s) => ({ ...s, ...progressRates(s.numInputRows, batch.triggerIntervalMs, durationMs) })),
      sink: { description: this.options.sink.description, numOutputRows },
      numDeadLetteredRows: batch.numDeadLetteredRows,
      numRowsNullEventTime: physical.watermarkOperators.reduce((n, w) => n + w.nullEventTimeRows, 0),
      cost: batch.cost,
    };
    return progress;
  }
}

/** An offset entry's batch timestamp, if it has one (an entry seeded by hand may not). */
function knownTimestamp(batchTimestampMs: number | undefined): number | null {
  return typeof batchTimestampMs === 'number' && Number.isFinite(batchTimestampMs) ? batchTimestampMs : null;
}

function minTimer(times: readonly (number | null | undefined)[]): number | null {
  const known = times.filter((t): t is number => typeof t === 'number');
  return known.length > 0 ? Math.min(...known) : null;
}

function storeKey(id: StateStoreId): string {
  return `${id.operatorId}/${id.storeName}`;
}

/** Two offsets are the same position: equal primitives (the usual case), or equal JSON. */
function sameOffset(a: Offset | null, b: Offset | null): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Which rows raising above state one batch leaves out: for a batch whose data error comes from
 * state alone (no record of it can be blamed), so that the error cannot block the shard.
 */
export interface RaisingRowPolicy {
  readonly batchId: number;
  /** Whether to leave out `row` (an input row, with columns `schema`, of an operator above state), which raised `error`. */
  drop(row: Row, schema: readonly StructField[], error: unknown): boolean;
  /** A run of the batch starts: what an earlier run left out is forgotten. */
  startRun(): void;
}

/** The operators with a stateful operator somewhere below them. */
function operatorsAboveState(root: Exec, stateful: ReadonlySet<Exec>): Set<Exec> {
  const above = new Set<Exec>();
  const visit = (e: Exec): boolean => {
    let below = false;
    for (const child of e.children) if (visit(child)) below = true;
    if (below) above.add(e);
    return below || stateful.has(e);
  };
  visit(root);
  return above;
}

/** A batch's context as the operators see it: one object per batch, no closures built for it. */
class RunningBatch implements BatchContext {
  readonly ownsStateKey?: (operatorId: number, keyValues: readonly unknown[]) => boolean;
  readonly dropRaisingRow?: (operator: Exec, row: Row, error: unknown) => boolean;
  readonly eval: EvalContext;

  constructor(
    readonly batchId: number,
    readonly sourceRows: ReadonlyMap<string, Row[]>,
    evalContext: EvalContext,
    readonly outputMode: OutputMode,
    readonly hasWatermark: boolean,
    private readonly watermarks: { late: ReadonlyMap<number, number>; eviction: ReadonlyMap<number, number> },
    /** The stores opened for the batch; null: none may be opened (row screening). */
    private readonly stores: ReadonlyMap<string, StateStore<unknown>> | null,
    ownsStateKey: ((operatorId: number, keyValues: readonly unknown[]) => boolean) | undefined,
    dropRaisingRow: ((operator: Exec, row: Row, error: unknown) => boolean) | undefined,
  ) {
    this.eval = evalContext;
    if (ownsStateKey) this.ownsStateKey = ownsStateKey;
    if (dropRaisingRow) this.dropRaisingRow = dropRaisingRow;
  }

  lateEventsWatermarkMs(operatorId: number): number {
    return this.watermarks.late.get(operatorId) ?? 0;
  }

  evictionWatermarkMs(operatorId: number): number {
    return this.watermarks.eviction.get(operatorId) ?? 0;
  }

  store<V>(id: StateStoreId): StateStore<V> {
    if (this.stores === null) throw new Error('row screening opens no state');
    const s = this.stores.get(storeKey(id));
    if (!s) throw new Error(`state store ${storeKey(id)} was not opened`);
    return s as StateStore<V>;
  }
}
