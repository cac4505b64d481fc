import type { Attribute } from '../plan/attribute.js';
import { describe, unalias, type Expr } from '../plan/expressions.js';
import { typeToString, type DataType } from '../plan/data-types.js';
import type { StateStore, StateStoreId, StateView } from '../state/state-store.js';
import { compileAggregation, eventTimeKeyIndex, eventTimeOfKey, type CompiledAggregation } from './aggregation.js';
import { AggregationTable, type GroupEntry } from './aggregation-table.js';
import type { EvalContext } from './eval-context.js';
import type { Row } from './evaluate.js';
import { emptyOperatorProgress, type BatchContext, type Exec, type StateOperatorProgress, type StatefulExec, type WatermarkContext } from './physical.js';

/** A group as a key-value state store holds it: its key values and its aggregate buffers. */
type StoredGroup = readonly [keyValues: readonly unknown[], buffers: readonly unknown[]];

/**
 * A key-value store's groups as the operator's table, kept across batches: by the store beside its
 * cached committed state (`StateStore.view`: a warm container's invocations share it), or by the
 * operator for stores without views. The operator writes each batch's changes into the table as it
 * runs, so a commit only confirms them; a put it did not make leaves the table stale.
 */
class KeptGroups implements StateView {
  table: AggregationTable | null = null;

  apply(_key: string, value: unknown): void {
    const table = this.table;
    if (table === null || value === undefined) return;
    const [keyValues, buffers] = value as StoredGroup;
    if (table.index.get(keyValues as unknown[])?.state !== buffers) this.table = null;
  }
}

/** The name of the operator's table among a store's views. */
const KEPT_GROUPS = 'aggregate-groups';

interface BatchGroups {
  readonly stamp: number;
  readonly changed: GroupEntry[];
  /** Late groups seen this batch (Spark counts a late group once, not each of its rows). */
  lateKeys: Set<string> | null;
  readonly lateMs: number | null;
}

/**
 * Spark's StateStoreRestoreExec + StateStoreSaveExec around a partial/final hash aggregate.
 * The batch is first aggregated on its own (one partial buffer per group), then each group is
 * merged with its stored buffer, so a late row is counted once per late group, as in Spark.
 *
 * The groups live in an AggregationTable: kept by the state store itself when it lives in this
 * process (the memory store), or rebuilt from a key-value store (DynamoDB) and written through it.
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
  private readonly timeKeyIndex: number | null;
  private progress: StateOperatorProgress = emptyOperatorProgress('stateStoreSave');
  private lastEvictionWatermarkMs: number | null = null;
  /** After a batch ran here: the earliest event time of a group still held (Infinity: none). */
  private earliestHeldMs: number | null = null;
  /** The cache of a key-value store's groups when the store keeps no views (unused when it keeps the table). */
  private readonly kept = new KeptGroups();
  private readonly keyTypes: readonly DataType[];
  private readonly scratchKey: unknown[];

  constructor(
    readonly operatorId: number,
    private readonly child: Exec,
    groupingExprs: readonly Expr[],
    aggregateExprs: readonly Expr[],
    readonly output: readonly Attribute[],
    evalContext: EvalContext,
    /** Input rows are partial aggregates from before a repartition hop: merged, not folded in. */
    private readonly partialInput = false,
  ) {
    this.children = [child];
    this.agg = compileAggregation(groupingExprs, aggregateExprs, child.output, evalContext);
    this.keyEventTimeMs = eventTimeOfKey(output.slice(0, groupingExprs.length));
    this.timeKeyIndex = eventTimeKeyIndex(output.slice(0, groupingExprs.length));
    this.keyTypes = output.slice(0, groupingExprs.length).map((a) => a.type);
    this.scratchKey = new Array<unknown>(groupingExprs.length);
    this.stateStoreIds = [{ operatorId, storeName: 'default' }];
    // Aliases are left out: renaming a result column keeps the state's meaning, as in Spark.
    this.stateSchema = `aggregate(keys=[${output.slice(0, groupingExprs.length).map((a) => `${a.name}:${typeToString(a.type)}`).join(', ')}], `
      + `aggs=[${aggregateExprs.slice(groupingExprs.length).map((e) => describe(unalias(e))).join(', ')}])`;
  }

  execute(ctx: BatchContext): Row[] {
    const input = this.child.execute(ctx);
    const store = ctx.store<StoredGroup>(this.stateStoreIds[0]!);
    const progress = emptyOperatorProgress('stateStoreSave');
    const { agg } = this;
    const table = this.tableFor(store);
    // A key-value store gets every change written through; a store that keeps the table, none.
    const writeThrough = table.versioned ? null : store;
    const batch: BatchGroups = { stamp: table.nextBatchStamp(), changed: [], lateKeys: null, lateMs: this.lateMs(ctx) };

    if (this.scratchKey.length === 0) {
      // A global aggregation has its one group in every batch, input or not (Spark's hash
      // aggregate gives a row of initial values for empty input without grouping keys): an empty
      // first batch emits [0, NULL, ...], and update mode re-emits the stored row.
      this.touch(table, this.scratchKey, batch);
    }
    if (this.partialInput) {
      // [max event time, ...key values, ...buffers]: one row per group and stage-1 batch.
      const keyCount = this.scratchKey.length;
      for (let r = 0; r < input.length; r++) {
        const row = input[r]!;
        const entry = this.touch(table, row.slice(1, 1 + keyCount), batch);
        if (entry !== null) entry.partial = agg.mergeBuffers(entry.partial!, row.slice(1 + keyCount));
      }
    } else if (agg.hasExpandingKey) {
      for (let r = 0; r < input.length; r++) {
        const row = input[r]!;
        agg.forEachKeyValues(row, (keyValues) => {
          const entry = this.touch(table, keyValues, batch);
          if (entry !== null) agg.updateBuffers(entry.partial!, row);
        });
      }
    } else {
      const scratch = this.scratchKey;
      const { index } = table;
      const { keyInto, updateBuffers } = agg;
      const { stamp } = batch;
      for (let r = 0; r < input.length; r++) {
        const row = input[r]!;
        if (!keyInto(row, scratch)) continue;
        // A group's later rows in the batch go straight to its buffers.
        let entry: GroupEntry | null | undefined = index.get(scratch);
        if (entry === undefined || entry.touched !== stamp) entry = this.admit(table, scratch, entry, batch);
        if (entry !== null) updateBuffers(entry.partial!, row);
      }
    }
    progress.numRowsDroppedByWatermark = batch.lateKeys?.size ?? 0;

    // Each changed group: the batch's partial buffers, merged with the stored ones, become the
    // group's new state (the old state stays intact for older versions).
    const output: Row[] = [];
    const { changed } = batch;
    for (let i = 0; i < changed.length; i++) {
      const entry = changed[i]!;
      const buffers = entry.partial!;
      entry.partial = null;
      if (entry.state !== null) agg.mergeInto(entry.state, buffers);
      table.setState(entry, buffers);
      if (writeThrough !== null) writeThrough.put((entry.encoded ??= agg.encodeKey(entry.keyValues)), [entry.keyValues, buffers]);
      if (ctx.outputMode === 'update') output.push(agg.resultRow(entry.keyValues, buffers));
    }
    progress.numRowsUpdated = changed.length;

    const evictMs = ctx.hasWatermark && this.keyEventTimeMs ? ctx.evictionWatermarkMs(this.operatorId) : null;
    if (ctx.outputMode === 'complete') {
      table.forEach((entry) => output.push(agg.resultRow(entry.keyValues, entry.state!)));
    } else if (evictMs !== null) {
      table.evictUpTo(evictMs, (entry) => {
        if (ctx.outputMode === 'append') output.push(agg.resultRow(entry.keyValues, entry.state!));
        if (writeThrough !== null) writeThrough.remove((entry.encoded ??= agg.encodeKey(entry.keyValues)));
        progress.numRowsRemoved++;
      });
    }
    if (!table.versioned) table.forVersion = store.version + 1;
    this.earliestHeldMs = ctx.outputMode === 'complete' ? null : table.earliestEventTimeMs();
    this.recordEvictionWatermark(ctx);
    progress.numRowsTotal = table.size;
    progress.numOutputRows = output.length;
    this.progress = progress;
    return output;
  }

  /** Groups at or behind this event time take no rows this batch (null: none are late). */
  private lateMs(ctx: BatchContext): number | null {
    return ctx.hasWatermark && this.keyEventTimeMs && ctx.outputMode !== 'complete' ? ctx.lateEventsWatermarkMs(this.operatorId) : null;
  }

  /**
   * What `execute` evaluates for one input row before it merges into state (row screening): the
   * row's keys, then its aggregate inputs for each group the watermark does not drop. Partial
   * aggregates (after a hop) are merged, not evaluated: nothing per row.
   */
  screenInputRow(row: Row, ctx: BatchContext): void {
    if (this.partialInput) return;
    const { agg } = this;
    const lateMs = this.lateMs(ctx);
    const fold = (keyValues: readonly unknown[]): void => {
      if (lateMs !== null && this.keyEventTimeMs!(keyValues) <= lateMs) return;
      agg.updateBuffers(agg.initialBuffers(), row);
    };
    if (agg.hasExpandingKey) {
      agg.forEachKeyValues(row, fold);
      return;
    }
    const key = new Array<unknown>(this.scratchKey.length);
    if (agg.keyInto(row, key)) fold(key);
  }

  /**
   * The group `keyValues` names, ready to take this batch's rows: created if new, given fresh
   * partial buffers on its first row of the batch. Null when the group is behind the watermark (the
   * row is dropped; each late group counts once per batch).
   */
  private touch(table: AggregationTable, keyValues: unknown[], batch: BatchGroups): GroupEntry | null {
    const entry = table.index.get(keyValues);
    if (entry !== undefined && entry.touched === batch.stamp) return entry;
    return this.admit(table, keyValues, entry, batch);
  }

  /** `touch` for a group not yet touched in this batch (`entry`: its table entry, if any). */
  private admit(table: AggregationTable, keyValues: unknown[], entry: GroupEntry | undefined, batch: BatchGroups): GroupEntry | null {
    if (batch.lateMs !== null && this.keyEventTimeMs!(keyValues) <= batch.lateMs) {
      (batch.lateKeys ??= new Set()).add(this.agg.encodeKey(keyValues));
      return null;
    }
    if (entry === undefined) {
      entry = { keyValues: this.agg.copyKey(keyValues), state: null, partial: null, encoded: null, touched: 0 };
      table.insert(entry);
    }
    entry.touched = batch.stamp;
    entry.partial = this.agg.initialBuffers();
    batch.changed.push(entry);
    return entry;
  }

  /**
   * The store's own table, or a cache of its groups: kept from the last batch (in a warm container,
   * from the last invocation) when it reflects the store's version, else rebuilt. Rebuilt every
   * invocation, the table was a second copy of every group's entry and index per invocation, which
   * the old-space GC let pile up: at 1M keys a warm container peaked at 1,701 MB for a 738 MB live set.
   */
  private tableFor(store: StateStore<StoredGroup>): AggregationTable {
    const create = (versioned: boolean): AggregationTable => new AggregationTable(this.keyTypes, this.agg.windowKeys, this.keyEventTimeMs, versioned, this.agg.encodeKey, this.timeKeyIndex);
    if (store.ownTable) return store.ownTable(() => create(true));
    const kept = store.view ? store.view(KEPT_GROUPS, () => new KeptGroups()) : this.kept;
    const cached = kept.table;
    if (cached !== null && cached.forVersion === store.version) {
      cached.forVersion = -1; // invalid until this batch completes
      return cached;
    }
    kept.table = null; // a stale table is garbage before its replacement is built
    const table = create(false);
    for (const [encoded, [keyValues, buffers]] of store.entries()) {
      table.insert({ keyValues: keyValues as unknown[], state: buffers, partial: null, encoded, touched: 0 });
    }
    kept.table = table;
    return table;
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

  hasStateDueAt(newInputWatermarkMs: number): boolean | undefined {
    if (!this.shouldRunAnotherBatch(newInputWatermarkMs)) return false;
    // Groups leave (append: and are emitted) when the watermark reaches their event time.
    return this.earliestHeldMs === null ? undefined : this.earliestHeldMs <= newInputWatermarkMs;
  }

  produceOutputWatermark(inputWatermarkMs: number): number | null {
    return inputWatermarkMs;
  }
}
