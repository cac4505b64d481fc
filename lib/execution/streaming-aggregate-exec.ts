import type { Attribute } from '../plan/attribute.js';
import { describe, unalias, type Expr } from '../plan/expressions.js';
import { typeToString } from '../plan/data-types.js';
import type { StateStore, StateStoreId } from '../state/state-store.js';
import { compileAggregation, eventTimeOfKey, type CompiledAggregation, type PartialGroup } from './aggregation.js';
import type { EvalContext } from './eval-context.js';
import type { Row } from './evaluate.js';
import { emptyOperatorProgress, type BatchContext, type Exec, type StateOperatorProgress, type StatefulExec, type WatermarkContext } from './physical.js';

/** Stored per group: the key values and the aggregate buffers. */
type GroupState = readonly [keyValues: readonly unknown[], buffers: readonly unknown[]];

/**
 * Spark's StateStoreRestoreExec + StateStoreSaveExec around a partial/final hash aggregate.
 * The batch is first aggregated on its own (one partial buffer per group), then each group is
 * merged with its stored buffer, so a late row is counted once per late group, as in Spark.
 *
 * - complete: every group is stored forever; the whole table is emitted each batch.
 * - update: changed groups are emitted; groups behind the eviction watermark are removed.
 * - append: groups are emitted once, when the watermark passes their event time (window end).
 */
export class StreamingAggregateExec implements StatefulExec {
  readonly nodeName = 'StateStoreSave';
  readonly children: readonly Exec[];
  readonly stateStoreIds: readonly StateStoreId[];
  readonly stateSchema: string;
  private readonly agg: CompiledAggregation;
  private readonly keyEventTimeMs: ((k: readonly unknown[]) => number) | null;
  private progress: StateOperatorProgress = emptyOperatorProgress('stateStoreSave');
  private lastEvictionWatermarkMs: number | null = null;
  /**
   * Keys by event time (ms), so eviction visits only the groups it closes instead of scanning all
   * state. Valid for the store version it was built for; rebuilt after a restart or a failed batch.
   */
  private evictionIndex: { forVersion: number; byTime: Map<number, Set<string>> } | null = null;

  constructor(
    readonly operatorId: number,
    private readonly child: Exec,
    groupingExprs: readonly Expr[],
    aggregateExprs: readonly Expr[],
    readonly output: readonly Attribute[],
    evalContext: EvalContext,
  ) {
    this.children = [child];
    this.agg = compileAggregation(groupingExprs, aggregateExprs, child.output, evalContext);
    this.keyEventTimeMs = eventTimeOfKey(output.slice(0, groupingExprs.length));
    this.stateStoreIds = [{ operatorId, storeName: 'default' }];
    // Aliases are left out: renaming a result column keeps the state's meaning, as in Spark.
    this.stateSchema = `aggregate(keys=[${output.slice(0, groupingExprs.length).map((a) => `${a.name}:${typeToString(a.type)}`).join(', ')}], `
      + `aggs=[${aggregateExprs.slice(groupingExprs.length).map((e) => describe(unalias(e))).join(', ')}])`;
  }

  execute(ctx: BatchContext): Row[] {
    const input = this.child.execute(ctx);
    const store = ctx.store<GroupState>(this.stateStoreIds[0]!);
    const progress = emptyOperatorProgress('stateStoreSave');
    const { agg } = this;

    // Partial aggregation of this batch's rows.
    const partials = new Map<string, PartialGroup>();
    for (let r = 0; r < input.length; r++) agg.groupInto(input[r]!, partials);

    const lateMs = ctx.hasWatermark && this.keyEventTimeMs ? ctx.lateEventsWatermarkMs(this.operatorId) : null;
    const evictMs = ctx.hasWatermark && this.keyEventTimeMs ? ctx.evictionWatermarkMs(this.operatorId) : null;
    const isLate = (k: readonly unknown[]): boolean => ctx.outputMode !== 'complete' && lateMs !== null && this.keyEventTimeMs!(k) <= lateMs;
    const isEvictable = (k: readonly unknown[]): boolean => evictMs !== null && this.keyEventTimeMs!(k) <= evictMs;

    const index = this.keyEventTimeMs && ctx.outputMode !== 'complete' ? this.indexFor(store) : null;
    const output: Row[] = [];
    // forEach, not for-of with destructuring: no [key, value] array per group.
    partials.forEach((group, encoded) => {
      const keyValues = group[0];
      if (isLate(keyValues)) {
        progress.numRowsDroppedByWatermark++;
        return;
      }
      const stored = store.get(encoded);
      // The batch's group tuple becomes the stored value (it is not touched after this batch). Its
      // partial buffers are this batch's own, so the stored ones are merged into them in place, and
      // an existing group keeps its stored key values (fewer objects kept alive per group).
      const buffers = group[1];
      if (stored !== undefined) {
        agg.mergeInto(stored[1], buffers);
        group[0] = stored[0] as unknown[];
      }
      store.put(encoded, group);
      if (stored === undefined && index) addToIndex(index, this.keyEventTimeMs!(keyValues), encoded);
      progress.numRowsUpdated++;
      if (ctx.outputMode === 'update') output.push(agg.resultRow(keyValues, buffers));
    });

    if (ctx.outputMode === 'complete') {
      for (const [, [keyValues, buffers]] of store.entries()) output.push(agg.resultRow(keyValues, buffers));
    } else if (evictMs !== null && index) {
      for (const [timeMs, keys] of index) {
        if (timeMs > evictMs) continue;
        for (const encoded of keys) {
          const stored = store.get(encoded);
          if (stored === undefined) continue;
          if (ctx.outputMode === 'append') output.push(agg.resultRow(stored[0], stored[1]));
          store.remove(encoded);
          progress.numRowsRemoved++;
        }
        index.delete(timeMs);
      }
    }
    if (index) this.evictionIndex = { forVersion: store.version + 1, byTime: index };
    this.recordEvictionWatermark(ctx);
    progress.numRowsTotal = store.size;
    progress.numOutputRows = output.length;
    this.progress = progress;
    return output;
  }

  private indexFor(store: StateStore<GroupState>): Map<number, Set<string>> {
    if (this.evictionIndex && this.evictionIndex.forVersion === store.version) return this.evictionIndex.byTime;
    const byTime = new Map<number, Set<string>>();
    for (const [encoded, [keyValues]] of store.entries()) addToIndex(byTime, this.keyEventTimeMs!(keyValues), encoded);
    this.evictionIndex = null;
    return byTime;
  }

  lastProgress(): StateOperatorProgress {
    return this.progress;
  }

  recordEvictionWatermark(ctx: WatermarkContext): void {
    this.lastEvictionWatermarkMs = ctx.hasWatermark && ctx.outputMode !== 'complete' ? ctx.evictionWatermarkMs(this.operatorId) : null;
  }

  shouldRunAnotherBatch(newInputWatermarkMs: number): boolean {
    // As Spark: any watermark movement re-runs append/update aggregations, keyed by time or not.
    return this.lastEvictionWatermarkMs !== null
      && newInputWatermarkMs > this.lastEvictionWatermarkMs;
  }

  produceOutputWatermark(inputWatermarkMs: number): number | null {
    return inputWatermarkMs;
  }
}

function addToIndex(index: Map<number, Set<string>>, timeMs: number, key: string): void {
  let keys = index.get(timeMs);
  if (!keys) index.set(timeMs, (keys = new Set()));
  keys.add(key);
}
