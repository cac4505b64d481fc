import { bind } from '../analysis/binder.js';
import type { BoundExpr } from '../analysis/bound-expr.js';
import { StreamingQueryError } from '../errors/sluice-error.js';
import type { Attribute } from '../plan/attribute.js';
import { isStruct, typeToString } from '../plan/data-types.js';
import type { Expr } from '../plan/expressions.js';
import type { StateStoreId } from '../state/state-store.js';
import type { EvalContext } from './eval-context.js';
import { compile, type Evaluator, type Row } from './evaluate.js';
import { joinStateBounds } from '../analysis/streaming-join-helper.js';
import { JoinStateManager, joinStateStoreIds, type JoinSide, type KeyEntry, type StoredRow } from './join/join-state-manager.js';
import { planStateCleanup, stateWatermarkMs, type JoinStateCleanup, type StateCleanup } from './join/state-watermark.js';
import { emptyOperatorProgress, type BatchContext, type Exec, type StateOperatorProgress, type StatefulExec, type WatermarkContext } from './physical.js';
import { encodeKey } from './values.js';

export type StreamingJoinType = 'inner' | 'left_outer' | 'right_outer' | 'full_outer' | 'left_semi';

export interface StreamingJoinParams {
  readonly operatorId: number;
  readonly left: Exec;
  readonly right: Exec;
  readonly joinType: StreamingJoinType;
  /** Unbound; resolved against `left.output ++ right.output`. */
  readonly condition: Expr | null;
  /** `left.output ++ right.output` (`left.output` only for left semi). */
  readonly output: readonly Attribute[];
  readonly evalContext: EvalContext;
}

/** What the operator needs to know about one input. */
interface SideSpec {
  readonly side: JoinSide;
  readonly width: number;
  readonly keys: readonly Evaluator[];
  readonly nullSafe: readonly boolean[];
  /** Conjuncts reading only this side: a row failing them can never match (Spark's pre-join filter). */
  readonly preFilter: Evaluator | null;
  /** The side's first watermarked column in microseconds (a window's end), for late rows. */
  readonly eventTimeMicros: ((row: Row) => number | null) | null;
  /** Outer join on this side: its unmatched rows are emitted padded with NULLs. */
  readonly preserved: boolean;
  readonly storeIds: readonly [StateStoreId, StateStoreId];
}

interface Eviction {
  /** Whether a state row (its key values and row) is behind this side's state watermark. */
  readonly test: (keyValues: readonly unknown[], row: Row) => boolean;
  readonly removeFrom: (state: JoinStateManager) => StoredRow[];
}

/**
 * Spark's StreamingSymmetricHashJoinExec (state format 2, Spark 4.x): a stream-stream equi-join.
 * Each side buffers its rows in state so later rows of the other side can join them.
 *
 * Per batch: late rows (the side's event time `<=` the late-events watermark) are dropped and
 * counted; the new left rows join the right state and are buffered; then the new right rows join
 * the left state (which now holds this batch's left rows too) and are buffered, unless they are
 * already behind the right state watermark (outer joins keep unmatched ones so eviction emits them).
 * A row failing a condition on its own side only is never buffered (and, on an outer side, gets its
 * NULL row right away). Finally the state behind each side's state watermark is evicted; on an outer
 * side, evicted rows that never matched produce their NULL-padded row. Left semi emits a left row on
 * its first match only and does not buffer a left row that matched on arrival.
 *
 * Metrics follow Spark: `numRowsUpdated` = rows buffered this batch, `numRowsTotal` = rows buffered
 * on both sides, `numRowsRemoved` = rows evicted from the sides that emit nothing on eviction (Spark
 * does not count the outer sides' evictions).
 */
export class StreamingSymmetricHashJoinExec implements StatefulExec {
  readonly nodeName = 'StreamingSymmetricHashJoin';
  readonly operatorId: number;
  readonly children: readonly Exec[];
  readonly output: readonly Attribute[];
  readonly stateStoreIds: readonly StateStoreId[];
  readonly stateSchema: string;
  private readonly joinType: StreamingJoinType;
  private readonly left: Exec;
  private readonly right: Exec;
  private readonly leftSpec: SideSpec;
  private readonly rightSpec: SideSpec;
  /** Conjuncts reading both sides, checked on the joined row `left ++ right`. */
  private readonly bothSides: Evaluator | null;
  private readonly cleanup: JoinStateCleanup;
  private progress: StateOperatorProgress = StreamingSymmetricHashJoinExec.emptyProgress();
  private lastEvictionWatermarkMs: number | null = null;
  private readonly planningError: StreamingQueryError | null;

  constructor(p: StreamingJoinParams) {
    if (!['inner', 'left_outer', 'right_outer', 'full_outer', 'left_semi'].includes(p.joinType)) {
      throw new StreamingQueryError(`StreamingSymmetricHashJoinExec should not take ${p.joinType} as the JoinType`, { code: 'UNSUPPORTED_JOIN_TYPE' });
    }
    this.operatorId = p.operatorId;
    this.left = p.left;
    this.right = p.right;
    this.joinType = p.joinType;
    this.children = [p.left, p.right];
    this.output = p.output;
    const leftAttrs = p.left.output;
    const rightAttrs = p.right.output;
    const bound = p.condition ? bind(p.condition, [...leftAttrs, ...rightAttrs]) : null;
    const bounds = joinStateBounds(leftAttrs, rightAttrs, bound);
    const split = bounds.split;
    // Spark raises this while planning the first batch, so the query starts and then fails: the
    // shape is legal for the analysis checks (an inner stream-stream join without condition passes
    // them), only the physical join cannot be built.
    this.planningError = split.keys.length === 0
      ? new StreamingQueryError('Stream-stream join without equality predicate is not supported', {
        code: 'STREAM_STREAM_JOIN_WITHOUT_EQUALITY',
        hint: 'add an equality between a column of each input to the join condition (e.g. L.key = R.key); a time-range condition or a watermarked window in the keys then bounds the state.',
      })
      : null;
    const ctx = p.evalContext;
    const spec = (side: JoinSide, attrs: readonly Attribute[], keys: readonly BoundExpr[], preFilter: BoundExpr | null): SideSpec => ({
      side,
      width: attrs.length,
      keys: keys.map((k) => compile(k, ctx)),
      nullSafe: split.keys.map((k) => k.nullSafe),
      preFilter: preFilter ? compile(preFilter, ctx) : null,
      eventTimeMicros: eventTimeReader(attrs),
      preserved: side === 'left' ? p.joinType === 'left_outer' || p.joinType === 'full_outer' : p.joinType === 'right_outer' || p.joinType === 'full_outer',
      storeIds: joinStateStoreIds(p.operatorId, side),
    });
    this.leftSpec = spec('left', leftAttrs, split.keys.map((k) => k.left), split.leftOnly);
    this.rightSpec = spec('right', rightAttrs, split.keys.map((k) => k.right), split.rightOnly);
    this.bothSides = split.bothSides ? compile(split.bothSides, ctx) : null;
    this.cleanup = planStateCleanup(leftAttrs, rightAttrs, bounds);
    this.stateStoreIds = [...this.leftSpec.storeIds, ...this.rightSpec.storeIds];
    const types = (xs: readonly { type: BoundExpr['type'] }[]): string => xs.map((x) => typeToString(x.type)).join(',');
    this.stateSchema = `symmetricHashJoin(format=2, keys=[${types(split.keys.map((k) => k.left))}], left=[${types(leftAttrs)}], right=[${types(rightAttrs)}])`;
  }

  private static emptyProgress(): StateOperatorProgress {
    // Spark counts 4 state store instances per partition (2 stores per side).
    return { ...emptyOperatorProgress('symmetricHashJoin'), numStateStoreInstances: 4 };
  }

  execute(ctx: BatchContext): Row[] {
    if (this.planningError) throw this.planningError;
    const leftInput = this.left.execute(ctx);
    const rightInput = this.right.execute(ctx);
    const progress = StreamingSymmetricHashJoinExec.emptyProgress();
    const lateMs = ctx.hasWatermark ? ctx.lateEventsWatermarkMs(this.operatorId) : null;
    const evictionMs = ctx.hasWatermark ? ctx.evictionWatermarkMs(this.operatorId) : null;
    this.recordEvictionWatermark(ctx);

    const open = (s: SideSpec): JoinStateManager =>
      new JoinStateManager(ctx.store<KeyEntry>(s.storeIds[0]), ctx.store<StoredRow>(s.storeIds[1]));
    const leftState = open(this.leftSpec);
    const rightState = open(this.rightSpec);
    const leftEviction = evictionFor(this.cleanup.left, evictionMs);
    const rightEviction = evictionFor(this.cleanup.right, evictionMs);

    const out: Row[] = [];
    this.storeAndJoin(this.leftSpec, leftInput, leftState, rightState, lateMs, leftEviction, out, progress);
    this.storeAndJoin(this.rightSpec, rightInput, rightState, leftState, lateMs, rightEviction, out, progress);

    // Eviction: outer sides emit their never-matched rows; other sides are just cleaned up.
    const evict = (e: Eviction | null, state: JoinStateManager): StoredRow[] => (e ? e.removeFrom(state) : []);
    const nullLeft = (): Row => new Array<unknown>(this.leftSpec.width).fill(null);
    const nullRight = (): Row => new Array<unknown>(this.rightSpec.width).fill(null);
    if (this.leftSpec.preserved) {
      for (const r of evict(leftEviction, leftState)) if (!r.matched) out.push([...r.row, ...nullRight()]);
    }
    if (this.rightSpec.preserved) {
      for (const r of evict(rightEviction, rightState)) if (!r.matched) out.push([...nullLeft(), ...r.row]);
    }
    // Spark counts in numRowsRemoved only the evictions of the sides that emit nothing.
    if (!this.leftSpec.preserved) progress.numRowsRemoved += evict(leftEviction, leftState).length;
    if (!this.rightSpec.preserved) progress.numRowsRemoved += evict(rightEviction, rightState).length;

    progress.numRowsTotal = leftState.numRows + rightState.numRows;
    progress.numOutputRows = out.length;
    this.progress = progress;
    return out;
  }

  /**
   * What `storeAndJoin` evaluates for one new row of input `child` (0: left) before it reads
   * state (row screening): its keys, then, unless a NULL key or its watermark drops it, the
   * conditions on its side alone. The conditions on both sides are evaluated against state: not here.
   */
  screenInputRow(row: Row, ctx: BatchContext, child: number): void {
    if (this.planningError) return;
    const spec = child === 0 ? this.leftSpec : this.rightSpec;
    const keyValues = spec.keys.map((k) => k(row));
    if (!spec.preserved && keyValues.some((v, i) => v === null && !spec.nullSafe[i])) return;
    const lateMs = ctx.hasWatermark ? ctx.lateEventsWatermarkMs(this.operatorId) : null;
    if (lateMs !== null && spec.eventTimeMicros) {
      const t = spec.eventTimeMicros(row);
      if (t !== null && t <= lateMs * 1000) return;
    }
    spec.preFilter?.(row);
  }

  /** Spark's OneSideHashJoiner.storeAndJoinWithOtherSide for one side's new rows. */
  private storeAndJoin(
    spec: SideSpec,
    input: readonly Row[],
    state: JoinStateManager,
    otherState: JoinStateManager,
    lateMs: number | null,
    eviction: Eviction | null,
    out: Row[],
    progress: StateOperatorProgress,
  ): void {
    const isLeft = spec.side === 'left';
    const semi = this.joinType === 'left_semi';
    const lateMicros = lateMs !== null && spec.eventTimeMicros ? lateMs * 1000 : null;
    const otherWidth = isLeft ? this.rightSpec.width : this.leftSpec.width;
    for (const row of input) {
      const keyValues = spec.keys.map((k) => k(row));
      const nullKey = keyValues.some((v, i) => v === null && !spec.nullSafe[i]);
      // Spark infers `key IS NOT NULL` filters below the join for the sides that are not preserved.
      if (nullKey && !spec.preserved) continue;
      if (lateMicros !== null) {
        const t = spec.eventTimeMicros!(row);
        if (t !== null && t <= lateMicros) {
          progress.numRowsDroppedByWatermark++;
          continue;
        }
      }
      if (spec.preFilter && spec.preFilter(row) !== true) {
        if (spec.preserved) {
          const nulls = new Array<unknown>(otherWidth).fill(null);
          out.push(isLeft ? [...row, ...nulls] : [...nulls, ...row]);
        }
        continue;
      }
      const key = encodeKey(keyValues);
      let matched = false;
      if (!nullKey) {
        for (const [index, stored] of otherState.get(key)) {
          // Right side of left semi: a left row already emitted is not emitted again.
          if (semi && !isLeft && stored.matched) continue;
          const joined = isLeft ? [...row, ...stored.row] : [...stored.row, ...row];
          if (this.bothSides && this.bothSides(joined) !== true) continue;
          otherState.markMatched(key, index, stored);
          matched = true;
          if (!semi) {
            out.push(joined);
          } else if (isLeft) {
            out.push([...row]);
            break; // one output row per left row
          } else {
            out.push([...stored.row]);
          }
        }
      }
      if (this.shouldBuffer(spec, matched, () => eviction !== null && eviction.test(keyValues, row))) {
        state.append(key, keyValues, row, matched);
        progress.numRowsUpdated++;
      }
    }
  }

  /**
   * Spark 4.x (SPARK-49829): a left row is always buffered (this batch's right rows still have to
   * see it), except a left semi row that already matched; a right row is skipped when the state
   * watermark would evict it at the end of this batch anyway, unless it is an unmatched row of an
   * outer right side (its NULL row comes from eviction).
   */
  private shouldBuffer(spec: SideSpec, matched: boolean, evictedThisBatch: () => boolean): boolean {
    if (spec.side === 'left') return !(this.joinType === 'left_semi' && matched);
    return !evictedThisBatch() || (spec.preserved && !matched);
  }

  lastProgress(): StateOperatorProgress {
    return { ...this.progress, customMetrics: { ...this.progress.customMetrics } };
  }

  recordEvictionWatermark(ctx: WatermarkContext): void {
    this.lastEvictionWatermarkMs = ctx.hasWatermark ? ctx.evictionWatermarkMs(this.operatorId) : null;
  }

  shouldRunAnotherBatch(newInputWatermarkMs: number): boolean {
    const usesWatermarkForCleanup = this.cleanup.left !== null || this.cleanup.right !== null;
    return usesWatermarkForCleanup && this.lastEvictionWatermarkMs !== null && newInputWatermarkMs > this.lastEvictionWatermarkMs;
  }

  /**
   * Spark: the min of both sides' state watermarks and the input watermark, so a time-interval join
   * delays its output watermark by the interval bound (`leftTime BETWEEN rightTime AND rightTime +
   * 40s` with input 0 gives -40001).
   */
  produceOutputWatermark(inputWatermarkMs: number): number | null {
    const candidates = [inputWatermarkMs];
    for (const c of [this.cleanup.left, this.cleanup.right]) if (c) candidates.push(stateWatermarkMs(c, inputWatermarkMs));
    return Math.min(...candidates);
  }
}

/** Spark's WatermarkSupport.findEventTimeColumn: the first watermarked column; a window by its end. */
function eventTimeReader(attrs: readonly Attribute[]): ((row: Row) => number | null) | null {
  const i = attrs.findIndex((a) => a.eventTimeDelayMs !== null);
  if (i < 0) return null;
  return timeAt(i, isStruct(attrs[i]!.type));
}

function timeAt(i: number, struct: boolean): (values: readonly unknown[]) => number | null {
  if (struct) {
    return (values) => {
      const w = values[i] as { end: number } | null | undefined;
      return w === null || w === undefined ? null : w.end;
    };
  }
  return (values) => (values[i] as number | null | undefined) ?? null;
}

/** The state watermark predicate of one side for this batch's eviction watermark, if any. */
function evictionFor(cleanup: StateCleanup | null, evictionMs: number | null): Eviction | null {
  if (cleanup === null || evictionMs === null) return null;
  const thresholdMicros = stateWatermarkMs(cleanup, evictionMs) * 1000;
  const behind = (t: number | null): boolean => t !== null && t <= thresholdMicros;
  if (cleanup.kind === 'key') {
    const keyTime = timeAt(cleanup.keyIndex, cleanup.keyIsStruct);
    const test = (keyValues: readonly unknown[]): boolean => behind(keyTime(keyValues));
    return { test, removeFrom: (state) => state.removeByKey(test) };
  }
  const rowTime = timeAt(cleanup.ordinal, cleanup.isStruct);
  const test = (row: Row): boolean => behind(rowTime(row));
  return { test: (_keyValues, row) => test(row), removeFrom: (state) => state.removeByValue(test) };
}
