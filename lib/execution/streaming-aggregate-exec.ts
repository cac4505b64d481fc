import type { Attribute } from '../plan/attribute.js';
import { describe, unalias, type Expr } from '../plan/expressions.js';
import { typeToString, type DataType } from '../plan/data-types.js';
import type { StateStore, StateStoreId } from '../state/state-store.js';
import { compileAggregation, eventTimeOfKey, type CompiledAggregation } from './aggregation.js';
import { createGroupIndex, type GroupIndex } from './group-index.js';
import type { EvalContext } from './eval-context.js';
import type { Row } from './evaluate.js';
import { emptyOperatorProgress, type BatchContext, type Exec, type StateOperatorProgress, type StatefulExec, type WatermarkContext } from './physical.js';

/** Stored per group: the key values and the aggregate buffers. */
type GroupState = readonly [keyValues: readonly unknown[], buffers: readonly unknown[]];

/** A group in the operator's working table: its stored value, plus this batch's partial buffers. */
interface GroupEntry {
  readonly keyValues: unknown[];
  /** The value in the store (null: new this batch). */
  state: GroupState | null;
  /** This batch's buffers, from the group's first row of the batch until the batch ends. */
  partial: unknown[] | null;
  /** The store key, built once per group. */
  encoded: string | null;
  /** The batch that last touched the group. */
  touched: number;
}

/**
 * The store's groups indexed by key values and by event time. Valid for the store version it
 * was built for; rebuilt after a restart or a failed batch.
 */
interface GroupTable {
  forVersion: number;
  readonly index: GroupIndex<GroupEntry>;
  /** Groups by the event time of their key (ms), so eviction visits only the groups it closes. */
  readonly byTime: Map<number, GroupEntry[]> | null;
}

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
  private table: GroupTable | null = null;
  private batchStamp = 0;
  private readonly keyTypes: readonly DataType[];
  private readonly scratchKey: unknown[];

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
    this.keyTypes = output.slice(0, groupingExprs.length).map((a) => a.type);
    this.scratchKey = new Array<unknown>(groupingExprs.length);
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
    const table = this.tableFor(store);
    const batch: BatchGroups = {
      stamp: ++this.batchStamp,
      changed: [],
      lateKeys: null,
      lateMs: ctx.hasWatermark && this.keyEventTimeMs && ctx.outputMode !== 'complete' ? ctx.lateEventsWatermarkMs(this.operatorId) : null,
    };

    if (agg.hasExpandingKey) {
      for (let r = 0; r < input.length; r++) {
        const row = input[r]!;
        agg.forEachKey(row, (keyValues) => {
          const entry = this.touch(table, keyValues, batch);
          if (entry !== null) agg.updateBuffers(entry.partial!, row);
        });
      }
    } else {
      const scratch = this.scratchKey;
      for (let r = 0; r < input.length; r++) {
        const row = input[r]!;
        if (!agg.keyInto(row, scratch)) continue;
        const entry = this.touch(table, scratch, batch);
        if (entry !== null) agg.updateBuffers(entry.partial!, row);
      }
    }
    progress.numRowsDroppedByWatermark = batch.lateKeys?.size ?? 0;

    // Each changed group: the batch's partial buffers merged with the stored ones become the new,
    // immutable stored value (the old one stays intact for the store's older versions).
    const output: Row[] = [];
    const { changed } = batch;
    for (let i = 0; i < changed.length; i++) {
      const entry = changed[i]!;
      const buffers = entry.partial!;
      entry.partial = null;
      const stored = entry.state;
      if (stored !== null) agg.mergeInto(stored[1], buffers);
      else if (table.byTime !== null) addToIndex(table.byTime, this.keyEventTimeMs!(entry.keyValues), entry);
      const state: GroupState = [entry.keyValues, buffers];
      entry.state = state;
      if (entry.encoded === null) entry.encoded = agg.encodeKey(entry.keyValues);
      store.put(entry.encoded, state);
      if (ctx.outputMode === 'update') output.push(agg.resultRow(entry.keyValues, buffers));
    }
    progress.numRowsUpdated = changed.length;

    const evictMs = ctx.hasWatermark && this.keyEventTimeMs ? ctx.evictionWatermarkMs(this.operatorId) : null;
    if (ctx.outputMode === 'complete') {
      for (const [, [keyValues, buffers]] of store.entries()) output.push(agg.resultRow(keyValues, buffers));
    } else if (evictMs !== null && table.byTime !== null) {
      for (const [timeMs, entries] of table.byTime) {
        if (timeMs > evictMs) continue;
        for (const entry of entries) {
          const [keyValues, buffers] = entry.state!;
          if (ctx.outputMode === 'append') output.push(agg.resultRow(keyValues, buffers));
          store.remove(entry.encoded!);
          table.index.delete(keyValues);
          progress.numRowsRemoved++;
        }
        table.byTime.delete(timeMs);
      }
    }
    table.forVersion = store.version + 1;
    this.recordEvictionWatermark(ctx);
    progress.numRowsTotal = store.size;
    progress.numOutputRows = output.length;
    this.progress = progress;
    return output;
  }

  /**
   * The group `keyValues` names, ready to take this batch's rows: created if new, given fresh
   * partial buffers on its first row of the batch. Null when the group is behind the watermark (the
   * row is dropped; each late group counts once per batch).
   */
  private touch(table: GroupTable, keyValues: readonly unknown[], batch: BatchGroups): GroupEntry | null {
    let entry = table.index.get(keyValues);
    if (entry !== undefined && entry.touched === batch.stamp) return entry;
    if (batch.lateMs !== null && this.keyEventTimeMs!(keyValues) <= batch.lateMs) {
      (batch.lateKeys ??= new Set()).add(this.agg.encodeKey(keyValues));
      return null;
    }
    if (entry === undefined) {
      entry = { keyValues: this.agg.copyKey(keyValues), state: null, partial: null, encoded: null, touched: 0 };
      table.index.set(keyValues, entry);
    }
    entry.touched = batch.stamp;
    entry.partial = this.agg.initialBuffers();
    batch.changed.push(entry);
    return entry;
  }

  /** The working table for the store's version: kept from the last batch, or rebuilt from the store. */
  private tableFor(store: StateStore<GroupState>): GroupTable {
    if (this.table !== null && this.table.forVersion === store.version) return this.table;
    const index = createGroupIndex<GroupEntry>(this.keyTypes, this.agg.windowKeys);
    const byTime = this.keyEventTimeMs ? new Map<number, GroupEntry[]>() : null;
    for (const [encoded, state] of store.entries()) {
      const entry: GroupEntry = { keyValues: state[0] as unknown[], state, partial: null, encoded, touched: 0 };
      index.set(state[0], entry);
      if (byTime !== null) addToIndex(byTime, this.keyEventTimeMs!(state[0]), entry);
    }
    this.table = { forVersion: store.version, index, byTime };
    return this.table;
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

function addToIndex(byTime: Map<number, GroupEntry[]>, timeMs: number, entry: GroupEntry): void {
  const entries = byTime.get(timeMs);
  if (entries === undefined) byTime.set(timeMs, [entry]);
  else entries.push(entry);
}
