import type { Attribute } from '../plan/attribute.js';
import { describe, unalias, type Expr, type SessionWindow } from '../plan/expressions.js';
import { typeToString } from '../plan/data-types.js';
import { StreamingQueryError } from '../errors/sluice-error.js';
import type { StateStoreId } from '../state/state-store.js';
import { compileAggregation, eventTimeOfKey, type CompiledAggregation } from './aggregation.js';
import type { EvalContext } from './eval-context.js';
import type { Row } from './evaluate.js';
import { emptyOperatorProgress, type BatchContext, type Exec, type StateOperatorProgress, type StatefulExec, type WatermarkContext } from './physical.js';
import { compileSessionOf, countReplacedAway, mergeSessions, type Session } from './session/sessions.js';

/**
 * Stored per group of the other grouping keys: their values (NULL in the session slot) and the
 * group's sessions sorted by start. Spark stores one row per (keys, session start); numRowsTotal
 * counts sessions, as Spark's does.
 */
type GroupSessions = readonly [keyValues: readonly unknown[], sessions: readonly Session[]];

/** A session of this batch being aggregated (mutable buffers until the batch is merged). */
type PartialSession = [start: number, end: number, buffers: unknown[]];

const OPERATOR_NAME = 'sessionWindowStateStoreSaveExec';

/**
 * Spark's session window aggregation: partial aggregate per (keys, row session) ->
 * SessionWindowStateStoreRestoreExec (drops late rows, brings the group's stored sessions) ->
 * MergingSessionsExec (merges overlapping sessions) -> SessionWindowStateStoreSaveExec.
 *
 * - A row opens `[t, t + gap)`; rows with a NULL time or a gap that is NULL or <= 0 are dropped
 *   before aggregation (not counted as late).
 * - A partial session whose end is `<=` the late-events watermark is dropped and counted in
 *   numRowsDroppedByWatermark (Spark filters in the restore operator, whatever the output mode).
 * - Every session of a group that got input is re-saved (numRowsUpdated); sessions merged away
 *   or evicted count in numRowsRemoved.
 * - complete: all sessions every batch, never evicted. append: a session is emitted and evicted
 *   once its end is `<=` the eviction watermark. update: refused (the analyzer refuses it first).
 * - A session window without another grouping key fails when the first batch runs, as in Spark.
 */
export class SessionWindowAggregateExec implements StatefulExec {
  readonly nodeName = 'SessionWindowStateStoreSave';
  readonly children: readonly Exec[];
  readonly stateStoreIds: readonly StateStoreId[];
  readonly stateSchema: string;
  private readonly agg: CompiledAggregation;
  private readonly sessionIndex: number;
  private readonly hasOtherKeys: boolean;
  private readonly sessionOf: (row: Row) => { start: number; end: number } | null;
  private readonly keyEventTimeMs: ((k: readonly unknown[]) => number) | null;
  private progress: StateOperatorProgress = emptyOperatorProgress(OPERATOR_NAME);
  private lastEvictionWatermarkMs: number | null = null;

  constructor(
    readonly operatorId: number,
    private readonly child: Exec,
    groupingExprs: readonly Expr[],
    aggregateExprs: readonly Expr[],
    readonly output: readonly Attribute[],
    evalContext: EvalContext,
  ) {
    this.children = [child];
    this.stateStoreIds = [{ operatorId, storeName: 'default' }];
    this.sessionIndex = groupingExprs.findIndex((g) => unalias(g).kind === 'sessionWindow');
    if (this.sessionIndex < 0) throw new Error('SessionWindowAggregateExec needs a session_window() grouping key');
    const sessionExpr = unalias(groupingExprs[this.sessionIndex]!) as SessionWindow;
    this.hasOtherKeys = groupingExprs.some((g) => unalias(g).kind !== 'sessionWindow');
    // The session slot is computed per row by sessionOf; the other keys come from the aggregation.
    const keysWithoutSession = groupingExprs.map((g, i): Expr => (i === this.sessionIndex ? { kind: 'literal', value: null, type: 'null' } : g));
    this.agg = compileAggregation(keysWithoutSession, aggregateExprs, child.output, evalContext);
    this.sessionOf = compileSessionOf(sessionExpr, child.output, evalContext);
    const keyAttributes = output.slice(0, groupingExprs.length);
    this.keyEventTimeMs = eventTimeOfKey(keyAttributes);
    this.stateSchema = `session-window(keys=[${keyAttributes.map((a) => `${a.name}:${typeToString(a.type)}`).join(', ')}], session=${this.sessionIndex}, `
      + `aggs=[${aggregateExprs.slice(groupingExprs.length).map((e) => describe(unalias(e))).join(', ')}])`;
  }

  execute(ctx: BatchContext): Row[] {
    if (!this.hasOtherKeys) {
      throw new StreamingQueryError('Global aggregation with session window in streaming query is not supported.', {
        code: 'SESSION_WINDOW_GLOBAL_AGGREGATION',
        hint: 'group by at least one other column next to session_window(), e.g. groupBy(session_window(...), col("userId")).',
      });
    }
    if (ctx.outputMode === 'update') {
      throw new StreamingQueryError('Invalid output mode: Update. Session windows support append and complete output modes only.', {
        code: 'SESSION_WINDOW_UPDATE_MODE',
        hint: 'use outputMode("append") with a watermark, or outputMode("complete").',
      });
    }
    const input = this.child.execute(ctx);
    const store = ctx.store<GroupSessions>(this.stateStoreIds[0]!);
    const progress = emptyOperatorProgress(OPERATOR_NAME);
    const eventTime = this.keyEventTimeMs;
    const lateMs = ctx.hasWatermark && eventTime ? ctx.lateEventsWatermarkMs(this.operatorId) : null;
    const evictMs = ctx.hasWatermark && eventTime && ctx.outputMode === 'append' ? ctx.evictionWatermarkMs(this.operatorId) : null;

    // Restore + merge + save, per group that got rows in this batch.
    for (const [encoded, [keyValues, partials]] of this.partialAggregate(input)) {
      const fresh: Session[] = [];
      for (const s of partials.values()) {
        if (lateMs !== null && eventTime!(this.fullKey(keyValues, s)) <= lateMs) {
          progress.numRowsDroppedByWatermark++;
          continue;
        }
        fresh.push(s);
      }
      if (fresh.length === 0) continue;
      const stored = store.get(encoded)?.[1] ?? [];
      const merged = mergeSessions(stored, fresh, this.agg.mergeBuffers);
      store.put(encoded, [keyValues, merged]);
      progress.numRowsUpdated += merged.length;
      progress.numRowsRemoved += countReplacedAway(stored, merged);
    }

    // Output: every session (complete) or the sessions the watermark closes (append).
    const output: Row[] = [];
    const updates: [string, GroupSessions | null][] = [];
    let total = 0;
    for (const [encoded, [keyValues, sessions]] of store.entries()) {
      if (evictMs === null) {
        total += sessions.length;
        if (ctx.outputMode === 'complete') for (const s of sessions) output.push(this.resultRow(keyValues, s));
        continue;
      }
      const kept: Session[] = [];
      for (const s of sessions) {
        if (eventTime!(this.fullKey(keyValues, s)) > evictMs) kept.push(s);
        else output.push(this.resultRow(keyValues, s));
      }
      total += kept.length;
      if (kept.length === sessions.length) continue;
      progress.numRowsRemoved += sessions.length - kept.length;
      updates.push([encoded, kept.length === 0 ? null : [keyValues, kept]]);
    }
    for (const [encoded, value] of updates) {
      if (value === null) store.remove(encoded);
      else store.put(encoded, value);
    }

    this.recordEvictionWatermark(ctx);
    progress.numRowsTotal = total;
    progress.numOutputRows = output.length;
    this.progress = progress;
    return output;
  }

  /**
   * What `execute` evaluates for one input row before it reads state (row screening): the row's
   * session (time and gap), then its keys and aggregate inputs. Late sessions are dropped after
   * this partial aggregation, so a late row's inputs are evaluated too.
   */
  screenInputRow(row: Row): void {
    if (this.sessionOf(row) === null) return;
    const { agg } = this;
    agg.forEachKey(row, () => agg.updateBuffers(agg.initialBuffers(), row));
  }

  /** Spark's partial aggregate: one buffer per (other keys, row session), rows in input order. */
  private partialAggregate(input: readonly Row[]): Map<string, [unknown[], Map<string, PartialSession>]> {
    const groups = new Map<string, [unknown[], Map<string, PartialSession>]>();
    const { agg } = this;
    for (const row of input) {
      const session = this.sessionOf(row);
      if (session === null) continue;
      agg.forEachKey(row, (keyValues, encoded) => {
        let group = groups.get(encoded);
        if (group === undefined) {
          group = [keyValues, new Map()];
          groups.set(encoded, group);
        }
        const sessionKey = `${session.start}/${session.end}`;
        let partial = group[1].get(sessionKey);
        if (partial === undefined) {
          partial = [session.start, session.end, agg.initialBuffers()];
          group[1].set(sessionKey, partial);
        }
        agg.updateBuffers(partial[2], row);
      });
    }
    return groups;
  }

  private fullKey(keyValues: readonly unknown[], s: Session): unknown[] {
    const key = [...keyValues];
    key[this.sessionIndex] = { start: s[0], end: s[1] };
    return key;
  }

  private resultRow(keyValues: readonly unknown[], s: Session): Row {
    return this.agg.resultRow(this.fullKey(keyValues, s), s[2]);
  }

  lastProgress(): StateOperatorProgress {
    return this.progress;
  }

  recordEvictionWatermark(ctx: WatermarkContext): void {
    this.lastEvictionWatermarkMs = ctx.hasWatermark && ctx.outputMode === 'append' ? ctx.evictionWatermarkMs(this.operatorId) : null;
  }

  shouldRunAnotherBatch(newInputWatermarkMs: number): boolean {
    // As Spark: in append mode, any watermark movement runs a no-data batch.
    return this.lastEvictionWatermarkMs !== null && newInputWatermarkMs > this.lastEvictionWatermarkMs;
  }

  produceOutputWatermark(inputWatermarkMs: number): number | null {
    return inputWatermarkMs;
  }
}
