import type { Attribute } from '../plan/attribute.js';
import { describe, unalias, type Expr } from '../plan/expressions.js';
import { typeToString, type DataType } from '../plan/data-types.js';
import type { StateStore, StateStoreId } from '../state/state-store.js';
import { compileAggregation, eventTimeOfKey, type CompiledAggregation } from './aggregation.js';
import type { GroupEntry } from './aggregation-codegen.js';
import { createGroupIndex, type GroupIndex } from './group-index.js';
import type { EvalContext } from './eval-context.js';
import type { Row } from './evaluate.js';
import { emptyOperatorProgress, type BatchContext, type Exec, type StateOperatorProgress, type StatefulExec, type WatermarkContext } from './physical.js';

/**
 * Stored per group: the key values, then the aggregate buffers, in one array (one object per
 * changed group and batch). Never mutated once stored: the store keeps older versions by sharing.
 */
type StoredGroup = readonly unknown[];

/** The layout of StoredGroup, part of the state schema so an older layout is refused clearly. */
const STATE_LAYOUT = 'keys+buffers';

/**
 * The store's groups indexed by key values and by event time. Valid for the store version it
 * was built for; rebuilt from the store after a restart or a failed batch.
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
 * The batch is first aggregated on its own (partial buffers per group, in the operator's working
 * table), then each changed group's buffers are merged with its stored ones and stored, so a late
 * row is counted once per late group, as in Spark. The per-row loop is generated per plan (see
 * GroupKernel).
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
    const keyAttributes = output.slice(0, groupingExprs.length);
    this.keyEventTimeMs = eventTimeOfKey(keyAttributes);
    this.keyTypes = keyAttributes.map((a) => a.type);
    this.scratchKey = new Array<unknown>(groupingExprs.length);
    this.stateStoreIds = [{ operatorId, storeName: 'default' }];
    // Aliases are left out: renaming a result column keeps the state's meaning, as in Spark.
    this.stateSchema = `aggregate(keys=[${keyAttributes.map((a) => `${a.name}:${typeToString(a.type)}`).join(', ')}], `
      + `aggs=[${aggregateExprs.slice(groupingExprs.length).map((e) => describe(unalias(e))).join(', ')}], layout=${STATE_LAYOUT})`;
  }

  execute(ctx: BatchContext): Row[] {
    const input = this.child.execute(ctx);
    const store = ctx.store<StoredGroup>(this.stateStoreIds[0]!);
    const progress = emptyOperatorProgress('stateStoreSave');
    const { agg } = this;
    const { kernel } = agg;
    const table = this.tableFor(store);
    const batch: BatchGroups = {
      stamp: ++this.batchStamp,
      changed: [],
      lateKeys: null,
      lateMs: ctx.hasWatermark && this.keyEventTimeMs && ctx.outputMode !== 'complete' ? ctx.lateEventsWatermarkMs(this.operatorId) : null,
    };
    const touch = (keyValues: unknown[]): GroupEntry | null => this.touch(table, keyValues, batch);

    if (kernel.consume !== null) {
      kernel.consume(input, this.scratchKey, touch);
    } else {
      for (let r = 0; r < input.length; r++) {
        const row = input[r]!;
        agg.forEachKey(row, (keyValues) => {
          const entry = touch(keyValues);
          if (entry !== null) kernel.update(entry, row);
        });
      }
    }
    progress.numRowsDroppedByWatermark = batch.lateKeys?.size ?? 0;

    const output: Row[] = [];
    const { changed } = batch;
    for (let i = 0; i < changed.length; i++) {
      const entry = changed[i]!;
      if (entry.stored === null && table.byTime !== null) addToIndex(table.byTime, this.keyEventTimeMs!(entry.keyValues), entry);
      const stored = kernel.nextStoredValue(entry);
      entry.stored = stored;
      if (entry.encoded === null) entry.encoded = agg.encodeKey(entry.keyValues);
      store.put(entry.encoded, stored);
      if (ctx.outputMode === 'update') output.push(agg.resultRowOfStored(stored));
    }
    progress.numRowsUpdated = changed.length;

    const evictMs = ctx.hasWatermark && this.keyEventTimeMs ? ctx.evictionWatermarkMs(this.operatorId) : null;
    if (ctx.outputMode === 'complete') {
      for (const [, stored] of store.entries()) output.push(agg.resultRowOfStored(stored));
    } else if (evictMs !== null && table.byTime !== null) {
      for (const [timeMs, entries] of table.byTime) {
        if (timeMs > evictMs) continue;
        for (const entry of entries) {
          if (ctx.outputMode === 'append') output.push(agg.resultRowOfStored(entry.stored!));
          store.remove(entry.encoded!);
          table.index.delete(entry.keyValues);
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
  private touch(table: GroupTable, keyValues: unknown[], batch: BatchGroups): GroupEntry | null {
    let entry = table.index.get(keyValues);
    if (entry !== undefined && entry.touched === batch.stamp) return entry;
    if (batch.lateMs !== null && this.keyEventTimeMs!(keyValues) <= batch.lateMs) {
      (batch.lateKeys ??= new Set()).add(this.agg.encodeKey(keyValues));
      return null;
    }
    const { kernel } = this.agg;
    if (entry === undefined) {
      // A new entry's partial buffers start fresh.
      entry = kernel.newEntry(this.agg.copyKey(keyValues));
      table.index.set(keyValues, entry);
    } else {
      kernel.resetPartials(entry);
    }
    entry.touched = batch.stamp;
    batch.changed.push(entry);
    return entry;
  }

  /** The working table for the store's version: kept from the last batch, or rebuilt from the store. */
  private tableFor(store: StateStore<StoredGroup>): GroupTable {
    if (this.table !== null && this.table.forVersion === store.version) return this.table;
    const index = createGroupIndex<GroupEntry>(this.keyTypes, this.agg.windowKeys);
    const byTime = this.keyEventTimeMs ? new Map<number, GroupEntry[]>() : null;
    const { agg } = this;
    for (const [encoded, stored] of store.entries()) {
      const entry = agg.kernel.newEntry(agg.copyKey(stored));
      entry.stored = stored;
      entry.encoded = encoded;
      index.set(entry.keyValues, entry);
      if (byTime !== null) addToIndex(byTime, this.keyEventTimeMs!(entry.keyValues), entry);
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
