import { describe, expect, it } from 'vitest';
import { newEvalContext } from '../../lib/execution/eval-context.js';
import type { Row } from '../../lib/execution/evaluate.js';
import type { BatchContext, Exec, StateOperatorProgress } from '../../lib/execution/physical.js';
import {
  StreamingSymmetricHashJoinExec, type StreamingJoinParams, type StreamingJoinType,
} from '../../lib/execution/streaming-symmetric-hash-join-exec.js';
import { newAttribute, type Attribute } from '../../lib/plan/attribute.js';
import { WINDOW_STRUCT, type DataType } from '../../lib/plan/data-types.js';
import type { Expr } from '../../lib/plan/expressions.js';
import { MemoryStateStoreProvider } from '../../lib/state/memory-state-store.js';
import type { StateStore } from '../../lib/state/state-store.js';

// ---------------------------------------------------------------------------------------------
// Expression helpers
const col = (name: string): Expr => ({ kind: 'column', name });
const lit = (value: number): Expr => ({ kind: 'literal', value, type: 'int' });
const seconds = (s: number): Expr => ({ kind: 'literal', value: s * 1_000_000, type: 'interval' });
const call = (fn: string, ...args: Expr[]): Expr => ({ kind: 'call', fn, args });
const and = (...xs: Expr[]): Expr => xs.reduce((a, b) => call('and', a, b));
const eq = (a: Expr, b: Expr): Expr => call('=', a, b);
const ref = (a: Attribute): Expr => col(`#${a.id}`);

const S = 1_000_000; // micros per second
const win10 = (sec: number): { start: number; end: number } => {
  const start = Math.floor(sec / 10) * 10;
  return { start: start * S, end: (start + 10) * S };
};

/** A child that returns the rows the test hands it for the current batch. */
class FeedExec implements Exec {
  readonly nodeName = 'Feed';
  readonly children: readonly Exec[] = [];
  rows: Row[] = [];
  constructor(readonly output: readonly Attribute[]) {}
  execute(): Row[] {
    const r = this.rows;
    this.rows = [];
    return r;
  }
}

interface Side {
  readonly attrs: Attribute[];
  /** Event time (ms) the withWatermark node above the source would see, or null without watermark. */
  readonly eventTimeMs: ((row: Row) => number) | null;
  readonly delayMs: number;
}

/**
 * Plays the micro-batch runtime for one join: per-input watermark = max event time - delay, global =
 * min once every input has data, never decreasing; batch N uses the watermark computed after batch
 * N-1 (late events: the previous batch's); a no-data batch runs when the watermark moved and the
 * join asks for one. Stores are opened at version = batch id and committed after each batch.
 */
class Driver {
  exec: StreamingSymmetricHashJoinExec;
  private readonly provider = new MemoryStateStoreProvider();
  private readonly leftFeed: FeedExec;
  private readonly rightFeed: FeedExec;
  private batchId = 0;
  private watermarkMs = 0;
  private prevBatchWatermarkMs = 0;
  private readonly maxEventMs: [number | null, number | null] = [null, null];
  private progressSinceCheck: StateOperatorProgress[] = [];

  constructor(
    private readonly left: Side,
    private readonly right: Side,
    private readonly joinType: StreamingJoinType,
    private readonly condition: Expr | null,
  ) {
    this.leftFeed = new FeedExec(left.attrs);
    this.rightFeed = new FeedExec(right.attrs);
    this.exec = this.build();
  }

  private build(): StreamingSymmetricHashJoinExec {
    const params: StreamingJoinParams = {
      operatorId: 0,
      left: this.leftFeed,
      right: this.rightFeed,
      joinType: this.joinType,
      condition: this.condition,
      output: this.joinType === 'left_semi' ? this.left.attrs : [...this.left.attrs, ...this.right.attrs],
      evalContext: newEvalContext(),
    };
    return new StreamingSymmetricHashJoinExec(params);
  }

  /** Stop and start again: a new operator instance over the same state; the metrics pointer resets. */
  restart(): void {
    this.exec = this.build();
    this.progressSinceCheck = [];
  }

  private async runBatch(leftRows: Row[], rightRows: Row[]): Promise<Row[]> {
    this.leftFeed.rows = leftRows;
    this.rightFeed.rows = rightRows;
    const stores = new Map<string, StateStore<unknown>>();
    for (const id of this.exec.stateStoreIds) stores.set(id.storeName, await this.provider.open(id, this.batchId));
    const hasWatermark = this.left.eventTimeMs !== null || this.right.eventTimeMs !== null;
    const late = this.prevBatchWatermarkMs;
    const eviction = this.watermarkMs;
    const ctx: BatchContext = {
      batchId: this.batchId,
      sourceRows: new Map(),
      eval: newEvalContext(),
      outputMode: 'append',
      lateEventsWatermarkMs: () => late,
      evictionWatermarkMs: () => eviction,
      store: <V>(id: { storeName: string }) => stores.get(id.storeName) as StateStore<V>,
      hasWatermark,
    };
    const out = this.exec.execute(ctx);
    for (const s of stores.values()) await s.commit();
    this.progressSinceCheck.push(this.exec.lastProgress());
    this.prevBatchWatermarkMs = this.watermarkMs;
    this.batchId++;
    return out;
  }

  /** One data batch, then the no-data batch it may trigger. Returns the rows of both. */
  async step(leftRows: Row[], rightRows: Row[] = []): Promise<Row[]> {
    const out = await this.runBatch(leftRows, rightRows);
    [this.left, this.right].forEach((side, i) => {
      const rows = i === 0 ? leftRows : rightRows;
      if (side.eventTimeMs === null || rows.length === 0) return;
      const max = Math.max(...rows.map(side.eventTimeMs));
      this.maxEventMs[i] = Math.max(this.maxEventMs[i] ?? max, max);
    });
    const perInput = [this.left, this.right]
      .map((side, i) => (side.eventTimeMs === null ? undefined : this.maxEventMs[i] === null ? null : this.maxEventMs[i]! - side.delayMs))
      .filter((w) => w !== undefined);
    if (perInput.length > 0 && perInput.every((w) => w !== null)) {
      const next = Math.min(...(perInput as number[]));
      if (next > this.watermarkMs) {
        const runNoData = this.exec.shouldRunAnotherBatch(next);
        this.watermarkMs = next;
        if (runNoData) out.push(...(await this.runBatch([], [])));
      }
    }
    return out;
  }

  /** Spark's assertNumStateRows: total of the last batch, sums since the previous check. */
  metrics(): { total: number; updated: number; dropped: number; removed: number } {
    const ps = this.progressSinceCheck;
    this.progressSinceCheck = [];
    const sum = (f: (p: StateOperatorProgress) => number): number => ps.reduce((a, p) => a + f(p), 0);
    return {
      total: ps[ps.length - 1]?.numRowsTotal ?? 0,
      updated: sum((p) => p.numRowsUpdated),
      dropped: sum((p) => p.numRowsDroppedByWatermark),
      removed: sum((p) => p.numRowsRemoved),
    };
  }
}

const attr = (name: string, type: DataType, extra: { qualifier?: string; delayMs?: number } = {}): Attribute =>
  newAttribute(name, type, { qualifier: extra.qualifier ?? null, eventTimeDelayMs: extra.delayMs ?? null });

/** `[key, window(time, 10s), value]` per side, as the windowed join tests build them (key = time in s). */
function windowedSides(opts: { qualifiers?: [string, string]; rightValueType?: DataType; rightWatermark?: boolean } = {}) {
  const [lq, rq] = opts.qualifiers ?? [undefined, undefined];
  const left: Side = {
    attrs: [attr('key', 'int', { qualifier: lq }), attr('window', WINDOW_STRUCT, { qualifier: lq, delayMs: 10_000 }), attr('leftValue', 'int', { qualifier: lq })],
    eventTimeMs: (r) => (r[0] as number) * 1000,
    delayMs: 10_000,
  };
  const rightWatermark = opts.rightWatermark ?? true;
  const right: Side = {
    attrs: [
      attr('key', 'int', { qualifier: rq }),
      attr('window', WINDOW_STRUCT, { qualifier: rq, delayMs: rightWatermark ? 10_000 : undefined }),
      attr('rightValue', opts.rightValueType ?? 'int', { qualifier: rq }),
    ],
    eventTimeMs: rightWatermark ? (r) => (r[0] as number) * 1000 : null,
    delayMs: 10_000,
  };
  return { left, right };
}
const leftWindowRow = (v: number): Row => [v, win10(v), v * 2];
const rightWindowRow = (v: number): Row => [v, win10(v), v * 3];
/** `[key, end (s), leftValue, rightValue]` from a joined windowed row, taking key/window from the non-null side. */
const windowedOut = (r: Row): unknown[] => {
  const l = r[0] !== null;
  return [l ? r[0] : r[3], ((l ? r[1] : r[4]) as { end: number }).end / S, r[2], r[5]];
};
const usingKeyAndWindow = (left: Side, right: Side): Expr =>
  and(eq(ref(left.attrs[0]!), ref(right.attrs[0]!)), eq(ref(left.attrs[1]!), ref(right.attrs[1]!)));

/** `[key, time, value]` per side with a 10 s/given watermark on the time column (seconds in, micros stored). */
function timeSides(leftDelayS: number, rightDelayS: number) {
  const left: Side = {
    attrs: [attr('leftKey', 'int'), attr('leftTime', 'timestamp', { delayMs: leftDelayS * 1000 }), attr('leftValue', 'int')],
    eventTimeMs: (r) => (r[1] as number) / 1000,
    delayMs: leftDelayS * 1000,
  };
  const right: Side = {
    attrs: [attr('rightKey', 'int'), attr('rightTime', 'timestamp', { delayMs: rightDelayS * 1000 }), attr('rightValue', 'int')],
    eventTimeMs: (r) => (r[1] as number) / 1000,
    delayMs: rightDelayS * 1000,
  };
  return { left, right };
}
const lRow = (k: number, t: number): Row => [k, t * S, k * 2];
const rRow = (k: number, t: number): Row => [k, t * S, k * 3];

const sorted = (rows: unknown[][]): unknown[][] => [...rows].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

describe('StreamingSymmetricHashJoinExec', () => {
  it('join-inner-time-range-two-sided-condition: range condition bounds both sides', async () => {
    const { left, right } = timeSides(20, 30);
    const cond = and(
      eq(col('leftKey'), col('rightKey')),
      call('between', col('leftTime'), call('-', col('rightTime'), seconds(10)), call('+', col('rightTime'), seconds(5))),
    );
    const d = new Driver(left, right, 'inner', cond);
    const out = (rows: Row[]): unknown[][] => sorted(rows.map((r) => [r[0], (r[1] as number) / S, (r[4] as number) / S]));

    expect(await d.step([lRow(1, 20)])).toEqual([]);
    expect(out(await d.step([], [14, 15, 25, 26, 30, 31].map((t) => rRow(1, t))))).toEqual(sorted([[1, 20, 15], [1, 20, 25], [1, 20, 26], [1, 20, 30]]));
    expect(d.metrics()).toMatchObject({ total: 7, updated: 7, dropped: 0 });

    expect(await d.step([], [rRow(1, 60)])).toEqual([]);
    expect(out(await d.step([49, 50, 65, 66].map((t) => lRow(1, t))))).toEqual(sorted([[1, 50, 60], [1, 65, 60]]));
    expect(d.metrics()).toMatchObject({ total: 10, updated: 5, dropped: 0 });

    // Watermark 30: (1,30) is at the watermark and is dropped.
    expect(out(await d.step([lRow(1, 30), lRow(1, 31)]))).toEqual(sorted([[1, 31, 26], [1, 31, 30], [1, 31, 31]]));
    expect(d.metrics()).toMatchObject({ total: 11, updated: 1, dropped: 1 });

    expect(await d.step([], [rRow(1, 80)])).toEqual([]);
    expect(d.metrics()).toMatchObject({ total: 6, updated: 1, dropped: 0 });

    expect(out(await d.step([], [rRow(1, 46), rRow(1, 50)]))).toEqual(sorted([[1, 49, 50], [1, 50, 50]]));
    expect(d.metrics()).toMatchObject({ total: 7, updated: 1, dropped: 1 });
  });

  it('join-left-outer-windowed: NULL rows once the watermark passes the window', async () => {
    const { left, right } = windowedSides();
    const d = new Driver(left, right, 'left_outer', usingKeyAndWindow(left, right));
    const out = (rows: Row[]): unknown[][] => sorted(rows.map(windowedOut));

    expect(out(await d.step([1, 2, 3, 4, 5].map(leftWindowRow), [3, 4, 5, 6, 7].map(rightWindowRow))))
      .toEqual(sorted([[3, 10, 6, 9], [4, 10, 8, 12], [5, 10, 10, 15]]));
    // (21, 22): watermark = 11, the no-data batch computes the NULL rows.
    expect(out(await d.step([leftWindowRow(21)], [rightWindowRow(22)]))).toEqual(sorted([[1, 10, 2, null], [2, 10, 4, null]]));
    expect(d.metrics()).toMatchObject({ total: 2, updated: 12, dropped: 0 });
    expect(out(await d.step([leftWindowRow(22)]))).toEqual([[22, 30, 44, 66]]);
    expect(d.metrics()).toMatchObject({ total: 3, updated: 1, dropped: 0 });
  });

  it('join-left-semi-time-range-5s: a left row is emitted once and not buffered when it matched', async () => {
    const { left, right } = timeSides(10, 10);
    const cond = and(
      eq(col('leftKey'), col('rightKey')),
      call('between', col('leftTime'), call('-', col('rightTime'), seconds(5)), call('+', col('rightTime'), seconds(5))),
    );
    const d = new Driver(left, right, 'left_semi', cond);
    const out = (rows: Row[]): unknown[][] => sorted(rows.map((r) => [r[0], (r[1] as number) / S]));

    expect(await d.step([lRow(1, 5), lRow(3, 5)])).toEqual([]);
    expect(d.metrics()).toMatchObject({ total: 2, updated: 2, dropped: 0 });
    expect(out(await d.step([], [rRow(1, 10), rRow(2, 5)]))).toEqual([[1, 5]]);
    expect(d.metrics()).toMatchObject({ total: 4, updated: 2, dropped: 0 });
    // No match: the left row is already matched.
    expect(await d.step([], [rRow(1, 9)])).toEqual([]);
    expect(d.metrics()).toMatchObject({ total: 5, updated: 1, dropped: 0 });
    expect(out(await d.step([lRow(1, 7), lRow(1, 30)]))).toEqual([[1, 7]]);
    expect(d.metrics()).toMatchObject({ total: 6, updated: 1, dropped: 0 });
    expect(await d.step([], [rRow(0, 30)])).toEqual([]);
    expect(d.metrics()).toMatchObject({ total: 2, updated: 1, dropped: 0 });
  });

  it('join-full-outer-windowed: NULL rows for both sides, state survives a restart', async () => {
    const { left, right } = windowedSides();
    const d = new Driver(left, right, 'full_outer', usingKeyAndWindow(left, right));
    const out = (rows: Row[]): unknown[][] => sorted(rows.map(windowedOut));

    expect(out(await d.step([1, 2, 3, 4, 5].map(leftWindowRow), [3, 4, 5, 6, 7].map(rightWindowRow))))
      .toEqual(sorted([[3, 10, 6, 9], [4, 10, 8, 12], [5, 10, 10, 15]]));
    expect(d.metrics()).toMatchObject({ total: 10, updated: 10, dropped: 0 });
    expect(out(await d.step([leftWindowRow(21)], [rightWindowRow(22)])))
      .toEqual(sorted([[1, 10, 2, null], [2, 10, 4, null], [6, 10, null, 18], [7, 10, null, 21]]));
    expect(d.metrics()).toMatchObject({ total: 2, updated: 2, dropped: 0 });
    expect(out(await d.step([leftWindowRow(22)]))).toEqual([[22, 30, 44, 66]]);
    expect(d.metrics()).toMatchObject({ total: 3, updated: 1, dropped: 0 });

    d.restart();
    // Watermark 12: window [0, 10) of the new rows is late on both sides.
    expect(await d.step([leftWindowRow(1)])).toEqual([]);
    expect(d.metrics()).toMatchObject({ total: 3, updated: 0, dropped: 1 });
    expect(await d.step([], [rightWindowRow(5)])).toEqual([]);
    expect(d.metrics()).toMatchObject({ total: 3, updated: 0, dropped: 1 });
  });

  it('join-right-outer-early-state-exclusion-right: right rows failing a right-only predicate get their NULL row at once', async () => {
    const { left, right } = windowedSides({ qualifiers: ['L', 'R'], rightValueType: 'string' });
    const cond = and(
      eq(col('L.key'), col('R.key')),
      eq(col('L.window'), col('R.window')),
      call('>', { kind: 'cast', child: col('rightValue'), to: 'int' }, lit(7)),
    );
    const d = new Driver(left, right, 'right_outer', cond);
    const rightStringRow = (v: number): Row => [v, win10(v), String(v * 3)];
    const out = (rows: Row[]): unknown[][] => sorted(rows.map((r) => [r[3], (r[4] as { end: number }).end / S, r[2], r[5]]));

    expect(out(await d.step([3, 4, 5].map(leftWindowRow), [1, 2, 3].map(rightStringRow))))
      .toEqual(sorted([[3, 10, 6, '9'], [1, 10, null, '3'], [2, 10, null, '6']]));
    expect(d.metrics()).toMatchObject({ total: 4, updated: 4, dropped: 0 });
    expect(await d.step([leftWindowRow(20)], [rightStringRow(21)])).toEqual([]);
    expect(out(await d.step([], [rightStringRow(20)]))).toEqual([[20, 30, 40, '60']]);
  });

  it('join-inner-windows-progress-metrics: removed rows of an inner join are counted', async () => {
    const { left, right } = windowedSides({ rightWatermark: false });
    const d = new Driver(left, right, 'inner', usingKeyAndWindow(left, right));
    expect(await d.step([leftWindowRow(1)])).toEqual([]);
    d.metrics();
    expect((await d.step([], [rightWindowRow(1)])).map(windowedOut)).toEqual([[1, 10, 2, 3]]);
    expect(d.metrics()).toEqual({ total: 2, updated: 1, dropped: 0, removed: 0 });
    // Watermark 15: the no-data batch removes the two rows of window [0, 10).
    expect(await d.step([leftWindowRow(25)])).toEqual([]);
    expect(d.metrics()).toEqual({ total: 1, updated: 1, dropped: 0, removed: 2 });
    expect((await d.step([], [rightWindowRow(25)])).map(windowedOut)).toEqual([[25, 30, 50, 75]]);
    expect(d.metrics()).toEqual({ total: 2, updated: 1, dropped: 0, removed: 0 });
    expect(d.exec.lastProgress()).toMatchObject({ operatorName: 'symmetricHashJoin', numStateStoreInstances: 4 });
  });

  it('left outer: a left row failing a left-only predicate is emitted at once and never stored', async () => {
    const { left, right } = windowedSides({ qualifiers: ['L', 'R'] });
    const cond = and(eq(col('L.key'), col('R.key')), eq(col('L.window'), col('R.window')), call('>', col('leftValue'), lit(4)));
    const d = new Driver(left, right, 'left_outer', cond);
    const out = await d.step([1, 2, 3].map(leftWindowRow), [1, 2, 3].map(rightWindowRow));
    expect(sorted(out.map(windowedOut))).toEqual(sorted([[1, 10, 2, null], [2, 10, 4, null], [3, 10, 6, 9]]));
    expect(d.metrics()).toMatchObject({ total: 4, updated: 4 });
  });

  it('fails the first batch of a join without an equality predicate (Spark: physical planning)', async () => {
    const { left, right } = timeSides(10, 10);
    for (const cond of [call('<', col('leftTime'), col('rightTime')), null]) {
      const d = new Driver(left, right, 'inner', cond);
      await expect(d.step([lRow(1, 1)])).rejects.toThrow('Stream-stream join without equality predicate is not supported');
    }
  });

  it('delays the output watermark of a time-interval join by the interval bound', () => {
    const { left, right } = timeSides(10, 10);
    const key = eq(col('leftKey'), col('rightKey'));
    const between = (lo: Expr, hi: Expr): StreamingSymmetricHashJoinExec =>
      new Driver(left, right, 'inner', and(key, call('between', col('leftTime'), lo, hi))).exec;
    expect(between(col('rightTime'), call('+', col('rightTime'), seconds(40))).produceOutputWatermark(0)).toBe(-40001);
    expect(between(call('-', col('rightTime'), seconds(30)), col('rightTime')).produceOutputWatermark(0)).toBe(-30001);
    expect(between(call('-', col('rightTime'), seconds(30)), call('+', col('rightTime'), seconds(40))).produceOutputWatermark(0)).toBe(-40001);
    // Watermark in the join keys: the input watermark passes through.
    const w = windowedSides();
    const windowed = new Driver(w.left, w.right, 'inner', usingKeyAndWindow(w.left, w.right)).exec;
    expect(windowed.produceOutputWatermark(5000)).toBe(5000);
  });

  it('asks for a no-data batch only when it evicts with a watermark that moved', async () => {
    const { left, right } = timeSides(10, 10);
    const d = new Driver(left, right, 'inner', eq(col('leftKey'), col('rightKey')));
    await d.step([lRow(1, 100)], [rRow(1, 100)]);
    // No range condition and no watermark in the keys: nothing is ever evicted.
    expect(d.exec.shouldRunAnotherBatch(1_000_000)).toBe(false);
    expect(d.metrics()).toMatchObject({ total: 2 });

    const w = windowedSides();
    const windowed = new Driver(w.left, w.right, 'inner', usingKeyAndWindow(w.left, w.right));
    expect(windowed.exec.shouldRunAnotherBatch(5000)).toBe(false); // never executed
    await windowed.step([leftWindowRow(1)], []);
    expect(windowed.exec.shouldRunAnotherBatch(0)).toBe(false);
    expect(windowed.exec.shouldRunAnotherBatch(1)).toBe(true);
    expect(windowed.exec.stateStoreIds.map((s) => s.storeName)).toEqual([
      'left-keyToNumValues', 'left-keyWithIndexToValue', 'right-keyToNumValues', 'right-keyWithIndexToValue',
    ]);
  });
});
