import type { OutputMode } from '../core/output-mode.js';
import type { Attribute } from '../plan/attribute.js';
import type { StateStore, StateStoreId } from '../state/state-store.js';
import type { EvalContext } from './eval-context.js';
import type { Row } from './evaluate.js';

/** What one micro-batch hands to the operators. Built by the runtime; operators never do IO. */
export interface BatchContext {
  readonly batchId: number;
  /** This batch's new rows per streaming source name (empty for a no-data batch). */
  readonly sourceRows: ReadonlyMap<string, Row[]>;
  readonly eval: EvalContext;
  readonly outputMode: OutputMode;
  /** Watermarks per stateful operator id, in ms (Spark >= 3.4: one for late rows, one for eviction). */
  lateEventsWatermarkMs(operatorId: number): number;
  evictionWatermarkMs(operatorId: number): number;
  /** Stores opened by the runtime at the version this batch reads. */
  store<V>(id: StateStoreId): StateStore<V>;
  /** False when the query has no withWatermark at all (operators then never filter or evict). */
  readonly hasWatermark: boolean;
  /**
   * Whether this state partition owns a grouping key (one of several shards); absent: it owns
   * every key. An initial state is applied only to the keys the partition owns.
   */
  readonly ownsStateKey?: (operatorId: number, keyValues: readonly unknown[]) => boolean;
  /**
   * Set only for a batch whose data error no record of it can be blamed for (it comes from state
   * alone: an expression above a stateful operator over a group the watermark emits). A row-local
   * operator hands it each input row whose evaluation raises: true leaves the row out (it is
   * dead-lettered as a result row), false (an operator below state, another error) rethrows.
   */
  readonly dropRaisingRow?: (operator: Exec, row: Row, error: unknown) => boolean;
}

/**
 * Applies `apply` to each row alone and leaves out the rows `ctx.dropRaisingRow` takes: the slow
 * path, for the one batch that needs it.
 */
export function eachRowDroppingRaising(operator: Exec, ctx: BatchContext, input: readonly Row[], apply: (rows: Row[]) => Row[]): Row[] {
  const out: Row[] = [];
  for (const row of input) {
    try {
      for (const o of apply([row])) out.push(o);
    } catch (error) {
      if (!ctx.dropRaisingRow!(operator, row, error)) throw error;
    }
  }
  return out;
}

/** A physical operator: computes its output rows for one batch. */
export interface Exec {
  readonly nodeName: string;
  readonly children: readonly Exec[];
  readonly output: readonly Attribute[];
  execute(ctx: BatchContext): Row[];
}

/** Spark's StateOperatorProgress, per batch. */
export interface StateOperatorProgress {
  operatorName: string;
  numRowsTotal: number;
  numRowsUpdated: number;
  numRowsRemoved: number;
  numRowsDroppedByWatermark: number;
  /** Rows the operator emitted this batch. */
  numOutputRows: number;
  numShufflePartitions: number;
  numStateStoreInstances: number;
  customMetrics: Record<string, number>;
  /**
   * Sluice: the watermarks this operator ran with, as progress timestamps (Spark's per-operator
   * eventTimeWatermarkForLateEvents: the previous batch's, propagated to it; and ForEviction: this
   * batch's). They differ from the query's watermark after an operator that delays it (a
   * time-interval join). Absent without a watermark.
   */
  eventTimeWatermarkForLateEvents?: string;
  eventTimeWatermarkForEviction?: string;
}

export function emptyOperatorProgress(operatorName: string): StateOperatorProgress {
  return {
    operatorName,
    numRowsTotal: 0,
    numRowsUpdated: 0,
    numRowsRemoved: 0,
    numRowsDroppedByWatermark: 0,
    numOutputRows: 0,
    numShufflePartitions: 1,
    numStateStoreInstances: 1,
    customMetrics: {},
  };
}

/**
 * A stateful operator (Spark's StateStoreWriter). Built without runtime details; each batch gives
 * it its watermarks and stores through the BatchContext.
 */
export interface StatefulExec extends Exec {
  readonly operatorId: number;
  /** The stores this operator reads and writes, opened by the runtime before each batch. */
  readonly stateStoreIds: readonly StateStoreId[];
  /** Describes the state layout; a change makes an existing checkpoint incompatible. */
  readonly stateSchema: string;
  /** Metrics of the last execute() call. */
  lastProgress(): StateOperatorProgress;
  /** Whether a no-data batch with this new input watermark would emit or evict something. */
  shouldRunAnotherBatch(newInputWatermarkMs: number): boolean;
  /**
   * Sharper than `shouldRunAnotherBatch` (which is Spark's: any watermark movement): whether this
   * watermark would really emit or evict a group the operator holds now. Undefined when the
   * operator does not know (it has not run in this process): the runtime then asks Spark's question.
   */
  hasStateDueAt?(newInputWatermarkMs: number): boolean | undefined;
  /**
   * Operators with processing-time timers: the earliest one after the last execute() (it fires in
   * a batch whose timestamp is past it), null when there is none, undefined when not known (the
   * operator has not run in this process). Lets a no-data batch run only when a timer is due.
   */
  nextTimerMs?(): number | null | undefined;
  /**
   * Operators whose state expires by processing time (TTL): the same as `nextTimerMs` for the
   * earliest expiry. The deployed runtime runs a no-data batch for it, so idle shards evict.
   */
  nextStateExpiryMs?(): number | null | undefined;
  /**
   * Records the eviction watermark a batch ran with. `execute` calls it; after a recovery that may
   * run a no-data batch at once (a scheduled trigger), the runtime calls it for the last committed
   * batch, as if that batch had run in this process (Spark's `lastExecution`).
   */
  recordEvictionWatermark(ctx: WatermarkContext): void;
  /** The watermark this operator passes downstream, given its input watermark (null = none). */
  produceOutputWatermark(inputWatermarkMs: number): number | null;
}

/** What `recordEvictionWatermark` needs of a batch. */
export type WatermarkContext = Pick<BatchContext, 'hasWatermark' | 'outputMode' | 'evictionWatermarkMs'>;

export function isStatefulExec(e: Exec): e is StatefulExec {
  return typeof (e as StatefulExec).operatorId === 'number';
}

/** Pre-order walk: the top-most operator first, as Spark lists state operators in progress. */
export function collectExecs<T extends Exec>(root: Exec, pick: (e: Exec) => e is T): T[] {
  const out: T[] = [];
  const visit = (e: Exec): void => {
    if (pick(e)) out.push(e);
    e.children.forEach(visit);
  };
  visit(root);
  return out;
}
