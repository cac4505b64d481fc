import { describe, expect, it } from 'vitest';
import { newAttribute, type Attribute } from '../../lib/plan/attribute.js';
import { WINDOW_STRUCT } from '../../lib/plan/data-types.js';
import type { Expr } from '../../lib/plan/expressions.js';
import { col, count, first, lit, session_window, sum, when } from '../../lib/plan/functions.js';
import type { Column } from '../../lib/plan/column.js';
import { newEvalContext } from '../../lib/execution/eval-context.js';
import type { Row } from '../../lib/execution/evaluate.js';
import type { BatchContext, Exec } from '../../lib/execution/physical.js';
import type { OutputMode } from '../../lib/core/output-mode.js';
import { SessionWindowAggregateExec } from '../../lib/execution/session-window-aggregate-exec.js';
import { gapMicros, mergeSessions, type Session } from '../../lib/execution/session/sessions.js';
import { MemoryStateStoreProvider } from '../../lib/state/memory-state-store.js';
import type { StateStore } from '../../lib/state/state-store.js';

const SEC = 1_000_000;

/** Feeds the rows set for the current batch. */
class RowsExec implements Exec {
  readonly nodeName = 'Rows';
  readonly children: readonly Exec[] = [];
  rows: Row[] = [];
  constructor(readonly output: readonly Attribute[]) {}
  execute(): Row[] {
    return this.rows;
  }
}

interface Harness {
  exec: SessionWindowAggregateExec;
  /** Runs one batch: rows are [sessionId, eventTime seconds]; watermarks in seconds. */
  run(rows: [string | null, number | null][], watermark?: { late: number; evict: number }): Promise<unknown[][]>;
}

function harness(opts: {
  mode: OutputMode;
  delayMs?: number | null;
  gap?: string | Column;
  keys?: 'sessionId' | 'none';
  aggs?: Column[];
}): Harness {
  const delayMs = opts.delayMs === undefined ? 30_000 : opts.delayMs;
  const input = [
    newAttribute('sessionId', 'string'),
    newAttribute('eventTime', 'timestamp', { eventTimeDelayMs: delayMs }),
  ];
  const sessionKey = session_window(col('eventTime'), opts.gap ?? '10 seconds').alias('session');
  const grouping: Expr[] = opts.keys === 'none' ? [sessionKey.expr] : [sessionKey.expr, col('sessionId').expr];
  const aggs = opts.aggs ?? [count('*').alias('numEvents')];
  const output = [
    newAttribute('session', WINDOW_STRUCT, { eventTimeDelayMs: delayMs }),
    ...(opts.keys === 'none' ? [] : [input[0]!]),
    ...aggs.map((a, i) => newAttribute(`agg${i}`, 'long')),
  ];
  const child = new RowsExec(input);
  const exec = new SessionWindowAggregateExec(0, child, grouping, [...grouping, ...aggs.map((a) => a.expr)], output, newEvalContext());
  const provider = new MemoryStateStoreProvider();
  let batchId = 0;
  return {
    exec,
    async run(rows, watermark = { late: 0, evict: 0 }) {
      child.rows = rows.map(([id, t]) => [id, t === null ? null : t * SEC]);
      const store = await provider.open(exec.stateStoreIds[0]!, batchId);
      const ctx: BatchContext = {
        batchId,
        sourceRows: new Map(),
        eval: newEvalContext(),
        outputMode: opts.mode,
        hasWatermark: delayMs !== null,
        lateEventsWatermarkMs: () => watermark.late * 1000,
        evictionWatermarkMs: () => watermark.evict * 1000,
        store: <V>() => store as StateStore<V>,
      };
      const out = exec.execute(ctx);
      await store.commit();
      batchId++;
      return out;
    },
  };
}

/** [sessionId, start s, end s, ...aggregates] for easy comparison. */
function simplify(rows: unknown[][]): unknown[][] {
  return rows
    .map((r) => {
      const w = r[0] as { start: number; end: number };
      return [r[1], w.start / SEC, w.end / SEC, ...r.slice(2)];
    })
    .sort((a, b) => String(a[0]).localeCompare(String(b[0])) || (a[1] as number) - (b[1] as number));
}

const words = (text: string, t: number): [string, number][] => text.split(' ').map((w) => [w, t]);

describe('SessionWindowAggregateExec', () => {
  it('complete mode: merges sessions across batches (Spark "complete mode - session window")', async () => {
    const h = harness({ mode: 'complete' });
    expect(simplify(await h.run([...words('hello world spark streaming', 40), ...words('world hello structured streaming', 41)]))).toEqual([
      ['hello', 40, 51, 2], ['spark', 40, 50, 1], ['streaming', 40, 51, 2], ['structured', 41, 51, 1], ['world', 40, 51, 2],
    ]);
    expect(h.exec.lastProgress()).toMatchObject({ numRowsTotal: 5, numRowsUpdated: 5, numRowsRemoved: 0, operatorName: 'sessionWindowStateStoreSaveExec' });

    // A new session before the existing ones.
    expect(simplify(await h.run(words('spark streaming', 25), { late: 11, evict: 11 }))).toEqual([
      ['hello', 40, 51, 2], ['spark', 25, 35, 1], ['spark', 40, 50, 1], ['streaming', 25, 35, 1], ['streaming', 40, 51, 2],
      ['structured', 41, 51, 1], ['world', 40, 51, 2],
    ]);
    // Spark re-saves every session of a touched key: spark x2, streaming x2.
    expect(h.exec.lastProgress()).toMatchObject({ numRowsTotal: 7, numRowsUpdated: 4, numRowsRemoved: 0 });

    // An event at 30 bridges [25,35) and [40,50/51).
    expect(simplify(await h.run(words('spark streaming', 30), { late: 11, evict: 11 }))).toEqual([
      ['hello', 40, 51, 2], ['spark', 25, 50, 3], ['streaming', 25, 51, 4], ['structured', 41, 51, 1], ['world', 40, 51, 2],
    ]);
    // The sessions starting at 40 are merged away; the ones at 25 are replaced in place.
    expect(h.exec.lastProgress()).toMatchObject({ numRowsTotal: 5, numRowsUpdated: 2, numRowsRemoved: 2 });

    // Complete mode never evicts, whatever the watermark.
    const all = await h.run(words('hello apache spark', 60), { late: 30, evict: 30 });
    expect(all).toHaveLength(8);
    expect(h.exec.lastProgress()).toMatchObject({ numRowsTotal: 8, numRowsRemoved: 0, numOutputRows: 8 });
    expect(h.exec.shouldRunAnotherBatch(100_000)).toBe(false);
  });

  it('append mode: drops late sessions, emits and evicts once the watermark passes the end', async () => {
    const h = harness({ mode: 'append' });
    expect(await h.run([...words('hello world spark streaming', 40), ...words('world hello structured streaming', 41)])).toEqual([]);
    expect(await h.run(words('spark streaming', 25), { late: 11, evict: 11 })).toEqual([]);
    // Sessions [0, 10) end before watermark 11: both exploded rows are late.
    expect(await h.run(words('spark streaming', 0), { late: 11, evict: 11 })).toEqual([]);
    expect(h.exec.lastProgress()).toMatchObject({ numRowsDroppedByWatermark: 2, numRowsUpdated: 0, numRowsTotal: 7 });
    expect(await h.run(words('spark streaming', 30), { late: 11, evict: 11 })).toEqual([]);
    expect(await h.run(words('hello apache spark', 60), { late: 11, evict: 11 })).toEqual([]);
    expect(h.exec.shouldRunAnotherBatch(30_000)).toBe(true);
    expect(h.exec.shouldRunAnotherBatch(11_000)).toBe(false);
    // No-data batch at watermark 30: nothing ends by then.
    expect(await h.run([], { late: 11, evict: 30 })).toEqual([]);
    expect(await h.run(words('structured streaming', 90), { late: 30, evict: 30 })).toEqual([]);
    // No-data batch at watermark 60 closes every session ending at or before 60.
    expect(simplify(await h.run([], { late: 30, evict: 60 }))).toEqual([
      ['hello', 40, 51, 2], ['spark', 25, 50, 3], ['streaming', 25, 51, 4], ['structured', 41, 51, 1], ['world', 40, 51, 2],
    ]);
    expect(h.exec.lastProgress()).toMatchObject({ numRowsRemoved: 5, numRowsTotal: 5, numOutputRows: 5, numRowsUpdated: 0 });
    // A session ending exactly at the watermark is closed (end <= watermark).
    expect(simplify(await h.run([], { late: 60, evict: 70 }))).toEqual([['apache', 60, 70, 1], ['hello', 60, 70, 1], ['spark', 60, 70, 1]]);
    expect(h.exec.lastProgress().numRowsTotal).toBe(2);
  });

  it('a row whose session ends exactly at the late watermark is late', async () => {
    const h = harness({ mode: 'append' });
    await h.run([['a', 5], ['a', 5], ['b', 6]], { late: 15, evict: 15 });
    // Spark counts per partial-aggregated (key, session) row: (a,[5,15)) once, (b,[6,16)) is kept.
    expect(h.exec.lastProgress()).toMatchObject({ numRowsDroppedByWatermark: 1, numRowsTotal: 1 });
  });

  it('drops NULL times and non-positive or NULL dynamic gaps before aggregation', async () => {
    const gap = when(col('sessionId').eq('hello'), lit(1 * SEC))
      .when(col('sessionId').eq('structured'), lit(0))
      .when(col('sessionId').eq('world'), lit(-10 * SEC))
      .when(col('sessionId').eq('nothing'), lit(null))
      .otherwise(lit(10 * SEC));
    const h = harness({ mode: 'append', gap });
    await h.run([
      ...words('hello world spark streaming nothing', 40), ...words('world hello structured streaming', 41), ['spark', null],
    ]);
    expect(h.exec.lastProgress()).toMatchObject({ numRowsDroppedByWatermark: 0, numRowsTotal: 3 });
    // hello [40,41) and [41,42) touch: merged into [40,42) (Spark's start <= end rule).
    expect(simplify(await h.run([], { late: 0, evict: 60 }))).toEqual([
      ['hello', 40, 42, 2], ['spark', 40, 50, 1], ['streaming', 40, 51, 2],
    ]);
  });

  it('accepts interval strings as dynamic gaps', () => {
    expect(gapMicros('10 seconds')).toBe(10 * SEC);
    expect(gapMicros('not an interval')).toBeNull();
    expect(gapMicros(null)).toBeNull();
  });

  it('merges other aggregates in session order (sum, first)', async () => {
    const h = harness({ mode: 'complete', aggs: [sum(col('eventTime').cast('long')).alias('s'), first(col('eventTime').cast('long')).alias('f')] });
    await h.run([['a', 20], ['a', 50]]);
    const rows = simplify(await h.run([['a', 35], ['a', 12]]));
    // [12,22) joins the stored [20,30) (first keeps the earlier session's value); [35,45) and [50,60) stay apart.
    expect(rows).toEqual([['a', 12, 30, 32, 12], ['a', 35, 45, 35, 35], ['a', 50, 60, 50, 50]]);
  });

  it('fails at runtime for a session window without another key', async () => {
    for (const mode of ['append', 'complete'] as const) {
      const h = harness({ mode, keys: 'none', aggs: [count('*').alias('count'), sum(col('eventTime').cast('long')).alias('sum')] });
      await expect(h.run([[null, 40]])).rejects.toThrow('Global aggregation with session window in streaming query is not supported.');
    }
  });

  it('without a watermark: nothing is late or evicted in append mode, and no extra batch runs', async () => {
    const h = harness({ mode: 'append', delayMs: null });
    expect(await h.run([['a', 1]], { late: 100, evict: 100 })).toEqual([]);
    expect(h.exec.lastProgress()).toMatchObject({ numRowsDroppedByWatermark: 0, numRowsTotal: 1 });
    expect(h.exec.shouldRunAnotherBatch(1_000_000)).toBe(false);
  });

  it('mergeSessions does not mutate stored sessions', async () => {
    const stored: Session[] = [[0, 10, [1]]];
    const merged = mergeSessions(stored, [[5, 20, [2]]], (a, b) => [(a[0] as number) + (b[0] as number)]);
    expect(merged).toEqual([[0, 20, [3]]]);
    expect(stored).toEqual([[0, 10, [1]]]);
  });
});
