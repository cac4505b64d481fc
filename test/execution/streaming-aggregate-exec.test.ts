/**
 * The streaming aggregation's working table (groups indexed by key, kept between batches) must be
 * invisible: a failed and re-run batch, a stop and restart on the same checkpoint, and late rows
 * all give what Spark gives. Expected rows are computed by hand (or, for the randomized test, by a
 * small model of Spark's rules in this file), never by the engine.
 *
 * Query: withWatermark('ts', '5 seconds').groupBy(window(ts, '10 seconds'), k).agg(count, sum(v)).
 * Spark's rules used below: batch N runs with watermark max(event time before N) - delay; a row is
 * late when its window's end <= the previous batch's watermark (dropped, each late group counted
 * once per batch in numRowsDroppedByWatermark); a window is evicted (append: emitted) when its end
 * <= the batch's watermark; when the watermark moves, a no-data batch runs.
 */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import type { OutputMode } from '../../lib/core/output-mode.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import type { Sink, SinkBatch } from '../../lib/sinks/sink.js';
import type { MemoryStream } from '../../lib/sources/memory-stream.js';
import type { StreamingQuery } from '../../lib/runtime/streaming-query.js';
import { createPrng } from '../../lib/local/sample-events.js';

const S = 1_000_000; // µs per second
type Win = { start: number; end: number };
const w = (startSec: number): Win => ({ start: startSec * S, end: (startSec + 10) * S });
const row = (k: string, v: number, sec: number): unknown[] => [k, v, sec * S];

type Rows = unknown[][];
const key = (r: readonly unknown[]): string => JSON.stringify(r);
const sorted = (rows: readonly (readonly unknown[])[]): Rows => rows.map((r) => [...r]).sort((a, b) => key(a).localeCompare(key(b)));

/** A sink that fails (before writing anything) whenever `failWhen` says so. */
class FlakySink implements Sink {
  readonly description = 'FlakySink';
  readonly supportedOutputModes = ['append', 'update', 'complete'] as const;
  readonly inner = new MemorySink();
  failures = 0;
  constructor(private readonly failWhen: (batch: SinkBatch) => boolean) {}
  async addBatch(batch: SinkBatch): Promise<void> {
    if (this.failWhen(batch)) {
      this.failures++;
      throw new Error(`sink failed on batch ${batch.batchId}`);
    }
    await this.inner.addBatch(batch);
  }
}

type Failure = 'none' | 'input' | 'output' | 'sink';

function windowedQuery(failure: Failure): { stream: MemoryStream; query: DataFrame } {
  const { stream, df } = new SluiceSession().memoryStream('k string, v long, ts timestamp');
  let input = df.withWatermark('ts', '5 seconds');
  // 'input': the batch holding v = 8 fails before the aggregation saw it.
  if (failure === 'input') input = input.failOnce(col('v').eq(8), 'injected input failure');
  let query = input.groupBy(window(col('ts'), '10 seconds'), col('k')).agg(count('*').as('n'), sum('v').as('total'));
  // 'output': the batch emitting the group with n = 3 fails after the aggregation wrote its state.
  if (failure === 'output') query = query.failOnce(col('n').eq(3), 'injected output failure');
  return { stream, query };
}

interface RunResult {
  /** Rows written by the batches each step ran (sorted). */
  readonly perStep: Rows[];
  readonly all: Rows;
  readonly failures: number;
}

/**
 * Runs the steps: each adds one batch of rows and processes everything available (including
 * no-data batches). 'restart' stops the query and starts it again on the same checkpoint. A
 * failing batch terminates the query; it is then restarted on the same checkpoint and re-run.
 */
async function run(mode: OutputMode, steps: readonly (Rows | 'restart')[], failure: Failure = 'none'): Promise<RunResult> {
  const { stream, query } = windowedQuery(failure);
  let sinkFired = false;
  const sink = new FlakySink((batch) => {
    if (failure !== 'sink' || sinkFired) return false;
    // The first batch writing a row of group k = 'c' fails once (update: a data batch; append:
    // the no-data batch that evicts the [20, 30) windows).
    if (batch.rows.some((r) => r[1] === 'c')) return (sinkFired = true);
    return false;
  });
  const checkpoint = new MemoryCheckpoint();
  const start = (): Promise<StreamingQuery> => query.writeStream.outputMode(mode).sink(sink).checkpoint(checkpoint).start();
  let q = await start();
  let failures = 0;
  const perStep: Rows[] = [];
  for (const step of steps) {
    if (step === 'restart') {
      await q.stop();
      q = await start();
      continue;
    }
    const before = sink.inner.latestBatchId;
    stream.addData(step);
    for (let attempt = 0; ; attempt++) {
      try {
        await q.processAllAvailable();
        break;
      } catch (error) {
        expect(attempt, `failed again after a restart: ${(error as Error).message}`).toBe(0);
        expect(q.isActive).toBe(false);
        failures++;
        q = await start();
      }
    }
    perStep.push(sorted(sink.inner.rowsAfter(before)));
  }
  await q.stop();
  return { perStep, all: sorted(sink.inner.allRows()), failures };
}

// The data: four batches, no late rows.
const B1 = [row('a', 1, 1), row('a', 2, 3), row('b', 10, 7), row('a', 4, 12)]; // max 12 → watermark 7
const B2 = [row('a', 8, 9), row('b', 5, 15), row('c', 1, 26)]; // 9 is in [0, 10), end 10 > 7: on time; max 26 → 21
const B3 = [row('c', 2, 29), row('d', 3, 31), row('a', 6, 22)]; // max 31 → 26
const B4 = [row('d', 4, 38)]; // max 38 → 33: [20, 30) closes

/** By hand: per step, the rows update mode writes (the changed groups). */
const UPDATE_PER_STEP: Rows[] = [
  [[w(0), 'a', 2, 3], [w(0), 'b', 1, 10], [w(10), 'a', 1, 4]],
  [[w(0), 'a', 3, 11], [w(10), 'b', 1, 5], [w(20), 'c', 1, 1]],
  [[w(20), 'c', 2, 3], [w(30), 'd', 1, 3], [w(20), 'a', 1, 6]],
  [[w(30), 'd', 2, 7]],
].map(sorted);

/** By hand: per step, the rows append mode writes (windows closed by the watermark, once). */
const APPEND_PER_STEP: Rows[] = [
  [],
  // The no-data batch after B2 runs with watermark 21: [0, 10) and [10, 20) close.
  [[w(0), 'a', 3, 11], [w(0), 'b', 1, 10], [w(10), 'a', 1, 4], [w(10), 'b', 1, 5]],
  // Watermark 26: nothing closes.
  [],
  // Watermark 33: [20, 30) closes; [30, 40) stays open.
  [[w(20), 'a', 1, 6], [w(20), 'c', 2, 3]],
].map(sorted);

const EXPECTED: Record<'update' | 'append', Rows[]> = { update: UPDATE_PER_STEP, append: APPEND_PER_STEP };

describe('windowed aggregation: the uninterrupted run matches Spark', () => {
  for (const mode of ['update', 'append'] as const) {
    it(`${mode}: rows per batch as computed by hand`, async () => {
      const result = await run(mode, [B1, B2, B3, B4]);
      expect(result.perStep).toEqual(EXPECTED[mode]);
      expect(result.all).toEqual(sorted(EXPECTED[mode].flat()));
    });
  }
});

describe('windowed aggregation: a batch that fails once and is re-run', () => {
  for (const mode of ['update', 'append'] as const) {
    for (const failure of ['input', 'output', 'sink'] as const) {
      it(`${mode}, failing at the ${failure}: same rows as without the failure`, async () => {
        const result = await run(mode, [B1, B2, B3, B4], failure);
        expect(result.failures).toBe(1);
        expect(result.perStep).toEqual(EXPECTED[mode]);
        expect(result.all).toEqual(sorted(EXPECTED[mode].flat()));
      });
    }
  }

  it('update: the groups touched by the failed batch are not counted twice in the re-run', async () => {
    // B2 fails after the aggregation wrote ([0, 10), a) = 3/11, ([10, 20), b) and ([20, 30), c) to
    // the state store; the re-run must start again from B1's state.
    const { stream, query } = windowedQuery('output');
    const sink = new MemorySink();
    const checkpoint = new MemoryCheckpoint();
    const start = (): Promise<StreamingQuery> => query.writeStream.outputMode('update').sink(sink).checkpoint(checkpoint).start();
    let q = await start();
    stream.addData(B1);
    await q.processAllAvailable();
    stream.addData(B2);
    await expect(q.processAllAvailable()).rejects.toThrow(/injected output failure/);
    expect(sink.latestBatchId).toBe(1); // B1 and its no-data batch
    q = await start();
    await q.processAllAvailable();
    expect(sorted(sink.rowsAfter(1))).toEqual(UPDATE_PER_STEP[1]);
    const before = sink.latestBatchId;
    stream.addData([row('c', 100, 27), row('b', 1, 20)]);
    await q.processAllAvailable();
    expect(sorted(sink.rowsAfter(before))).toEqual(sorted([[w(20), 'c', 2, 101], [w(20), 'b', 1, 1]]));
    await q.stop();
  });
});

describe('windowed aggregation: stop and restart on the same checkpoint', () => {
  for (const mode of ['update', 'append'] as const) {
    it(`${mode}: a restart between every batch gives the uninterrupted result`, async () => {
      const result = await run(mode, [B1, 'restart', B2, 'restart', B3, 'restart', B4]);
      expect(result.perStep).toEqual(EXPECTED[mode]);
      expect(result.all).toEqual(sorted(EXPECTED[mode].flat()));
    });

    it(`${mode}: restarts combined with a failure give the uninterrupted result`, async () => {
      const result = await run(mode, ['restart', B1, B2, 'restart', 'restart', B3, 'restart', B4], 'output');
      expect(result.failures).toBe(1);
      expect(result.perStep).toEqual(EXPECTED[mode]);
    });
  }

  it('update: state restored after a restart keeps accumulating into the same groups', async () => {
    const result = await run('update', [B1, 'restart', [row('a', 10, 2), row('b', 1, 8)]]);
    expect(result.perStep[1]).toEqual(sorted([[w(0), 'a', 3, 13], [w(0), 'b', 2, 11]]));
  });
});

describe('windowed aggregation: late rows', () => {
  // After B1 and B2 (and the no-data batch), the watermark is 21 s: [0, 10) and [10, 20) are closed.
  async function lateRun(mode: OutputMode) {
    const { stream, query } = windowedQuery('none');
    const sink = new MemorySink();
    const q = await query.writeStream.outputMode(mode).sink(sink).checkpoint(new MemoryCheckpoint()).start();
    const step = async (rows: Rows) => {
      const before = sink.latestBatchId;
      const lastBatchBefore = q.lastProgress?.batchId ?? -1;
      stream.addData(rows);
      await q.processAllAvailable();
      const dataBatches = q.recentProgress.filter((p) => p.batchId > lastBatchBefore && p.numInputRows > 0);
      expect(dataBatches).toHaveLength(1);
      return { rows: sorted(sink.rowsAfter(before)), dropped: dataBatches[0]!.stateOperators[0]!.numRowsDroppedByWatermark };
    };
    return { q, step };
  }

  for (const mode of ['update', 'append'] as const) {
    it(`${mode}: rows for a closed window are dropped; each late group counts once per batch`, async () => {
      const { q, step } = await lateRun(mode);
      expect((await step(B1)).dropped).toBe(0);
      expect((await step(B2)).dropped).toBe(0);
      expect(q.lastProgress?.batchWatermarkMs).toBe(21_000);

      // Two late rows of one group ([0, 10), a): 1.
      const third = await step([row('a', 100, 5), row('a', 100, 8), row('c', 2, 29)]);
      expect(third.dropped).toBe(1);
      expect(third.rows).toEqual(mode === 'update' ? [[w(20), 'c', 2, 3]] : []);

      // Late rows of two groups ([0, 10), a) and ([10, 20), b) (two rows of b): 2.
      const fourth = await step([row('a', 100, 1), row('b', 100, 19), row('b', 100, 12), row('d', 3, 31)]);
      expect(fourth.dropped).toBe(2);
      expect(fourth.rows).toEqual(mode === 'update' ? [[w(30), 'd', 1, 3]] : []);

      // Late rows of two groups under one key ([0, 10), c) and ([10, 20), c) (c is open in [20, 30)): 2.
      const fifth = await step([row('c', 100, 3), row('c', 100, 13), row('c', 1, 24)]);
      expect(fifth.dropped).toBe(2);
      expect(fifth.rows).toEqual(mode === 'update' ? [[w(20), 'c', 3, 4]] : []);

      // A row on time is not dropped: window [20, 30) ends at 30 s > 26 s.
      const sixth = await step([row('e', 1, 45)]);
      expect(sixth.dropped).toBe(0);
      // The closed windows never come back: append writes [20, 30) and [30, 40) once, with no late row in them.
      expect(sixth.rows).toEqual(mode === 'update' ? [[w(40), 'e', 1, 1]] : sorted([[w(20), 'c', 3, 4], [w(30), 'd', 1, 3]]));
      await q.stop();
    });
  }

  it('update: a late row counts even when the same batch also updates the group key in an open window', async () => {
    const { q, step } = await lateRun('update');
    await step(B1);
    await step(B2);
    const third = await step([row('b', 1, 18), row('b', 1, 25)]);
    expect(third.dropped).toBe(1);
    expect(third.rows).toEqual([[w(20), 'b', 1, 1]]);
    await q.stop();
  });
});

describe('sliding windows (a row in several groups)', () => {
  it('update: over a restart, each window of a row is its own group; a row late for one window still counts in the others', async () => {
    const { stream, df } = new SluiceSession().memoryStream('k string, v long, ts timestamp');
    const query = df.withWatermark('ts', '5 seconds')
      .groupBy(window(col('ts'), '10 seconds', '5 seconds'), col('k'))
      .agg(count('*').as('n'), sum('v').as('total'));
    const sink = new MemorySink();
    const checkpoint = new MemoryCheckpoint();
    const start = (): Promise<StreamingQuery> => query.writeStream.outputMode('update').sink(sink).checkpoint(checkpoint).start();
    let q = await start();
    // a@1 is in [-5, 5) and [0, 10); a@7 in [0, 10) and [5, 15); b@12 in [5, 15) and [10, 20).
    stream.addData([row('a', 1, 1), row('a', 1, 7), row('b', 1, 12)]);
    await q.processAllAvailable();
    expect(sorted(sink.allRows())).toEqual(sorted([
      [w(-5), 'a', 1, 1], [w(0), 'a', 2, 2], [w(5), 'a', 1, 1], [w(5), 'b', 1, 1], [w(10), 'b', 1, 1],
    ]));
    await q.stop();

    q = await start();
    const before = sink.latestBatchId;
    // Watermark 7 s: a@2's window [-5, 5) is closed (late, one group), its window [0, 10) is open.
    stream.addData([row('a', 1, 8), row('a', 10, 2)]);
    await q.processAllAvailable();
    expect(sorted(sink.rowsAfter(before))).toEqual(sorted([[w(0), 'a', 4, 13], [w(5), 'a', 2, 2]]));
    const dataBatch = q.recentProgress.filter((p) => p.numInputRows > 0).at(-1)!;
    expect(dataBatch.stateOperators[0]!.numRowsDroppedByWatermark).toBe(1);
    await q.stop();
  });
});

describe('grouping keys that look like a window', () => {
  it('a struct<start, end> column that is not a window groups by both fields', async () => {
    // Only window() guarantees one end per start; a user struct with fields named start and end
    // is an ordinary struct key, compared field by field.
    const { stream, df } = new SluiceSession().memoryStream('span struct<start:timestamp,end:timestamp>, v long');
    const sink = new MemorySink();
    const q = await df.groupBy(col('span')).agg(count('*').as('n'), sum('v').as('total'))
      .writeStream.outputMode('update').sink(sink).checkpoint(new MemoryCheckpoint()).start();
    stream.addData([[{ start: 1, end: 2 }, 1], [{ start: 1, end: 3 }, 10], [{ start: 1, end: 3 }, 100]]);
    await q.processAllAvailable();
    expect(sorted(sink.allRows())).toEqual(sorted([[{ start: 1, end: 2 }, 1, 1], [{ start: 1, end: 3 }, 2, 110]]));
    await q.stop();
  });
});

// ---------------------------------------------------------------------------------------------
// Randomized: many batches with random restarts and sink failures, against a model of Spark's rules.


/** Spark's windowed aggregation, batch by batch: the rows each step writes and its late groups. */
class Model {
  private readonly groups = new Map<string, { start: number; k: string; n: number; total: number }>();
  private maxEventSec = -Infinity;
  private watermarkSec = 0; // the watermark the next batch runs with
  private lastBatchWatermarkSec = 0; // the watermark the last batch ran with
  private lastEvictionSec: number | null = null;

  constructor(private readonly mode: 'update' | 'append', private readonly delaySec = 5, private readonly sizeSec = 10) {}

  step(rows: readonly [string, number, number][]): { rows: Rows; dropped: number } {
    const out: Rows = [];
    const dropped = this.batch(rows, out);
    // No-data batches while the watermark moves.
    while (this.lastEvictionSec !== null && this.watermarkSec > this.lastEvictionSec) this.batch([], out);
    return { rows: sorted(out), dropped };
  }

  private batch(rows: readonly [string, number, number][], out: Rows): number {
    const wm = this.watermarkSec;
    const lateBefore = this.lastBatchWatermarkSec;
    const late = new Set<string>();
    const changed = new Set<string>();
    for (const [k, v, sec] of rows) {
      const start = Math.floor(sec / this.sizeSec) * this.sizeSec;
      const id = `${start}/${k}`;
      if (start + this.sizeSec <= lateBefore) {
        late.add(id);
        continue;
      }
      const g = this.groups.get(id) ?? { start, k, n: 0, total: 0 };
      g.n++;
      g.total += v;
      this.groups.set(id, g);
      changed.add(id);
    }
    if (this.mode === 'update') for (const id of changed) { const g = this.groups.get(id)!; out.push([w(g.start), g.k, g.n, g.total]); }
    for (const [id, g] of [...this.groups]) {
      if (g.start + this.sizeSec <= wm) {
        if (this.mode === 'append') out.push([w(g.start), g.k, g.n, g.total]);
        this.groups.delete(id);
      }
    }
    for (const [, , sec] of rows) this.maxEventSec = Math.max(this.maxEventSec, sec);
    this.lastBatchWatermarkSec = wm;
    this.lastEvictionSec = wm;
    this.watermarkSec = Math.max(wm, this.maxEventSec - this.delaySec);
    return late.size;
  }
}

describe('windowed aggregation: randomized against a model, with restarts and failures', () => {
  for (const mode of ['update', 'append'] as const) {
    for (const seed of [7, 11, 23]) {
      it(`${mode}, seed ${seed}`, async () => {
        const random = createPrng(seed);
        const { stream, df } = new SluiceSession().memoryStream('k string, v long, ts timestamp');
        const query = df.withWatermark('ts', '5 seconds').groupBy(window(col('ts'), '10 seconds'), col('k')).agg(count('*').as('n'), sum('v').as('total'));
        const failing = new Set<number>();
        const sink = new FlakySink((batch) => failing.delete(batch.batchId));
        const checkpoint = new MemoryCheckpoint();
        const start = (): Promise<StreamingQuery> => query.writeStream.outputMode(mode).sink(sink).checkpoint(checkpoint).start();
        const model = new Model(mode);
        let q = await start();
        let clockSec = 10;
        let failures = 0;
        let droppedGroups = 0;
        for (let step = 0; step < 40; step++) {
          if (random() < 0.15) {
            await q.stop();
            q = await start();
          }
          // Fail one of the next batches (a data or a no-data one) once.
          if (random() < 0.2) failing.add(sink.inner.latestBatchId + 1 + Math.floor(random() * 2));
          clockSec += Math.floor(random() * 6);
          const n = 1 + Math.floor(random() * 6);
          const rows: [string, number, number][] = [];
          // Mostly recent rows, some up to 30 s old (late once their window closed).
          for (let i = 0; i < n; i++) rows.push(['abc'[Math.floor(random() * 3)]!, 1 + Math.floor(random() * 9), Math.max(0, clockSec - Math.floor(random() * (random() < 0.2 ? 30 : 8)))]);
          const expected = model.step(rows);
          const before = sink.inner.latestBatchId;
          const lastBatchBefore = q.lastProgress?.batchId ?? -1;
          let progress = [...q.recentProgress];
          stream.addData(rows.map(([k, v, sec]) => row(k, v, sec)));
          for (let attempt = 0; ; attempt++) {
            try {
              await q.processAllAvailable();
              progress = [...progress, ...q.recentProgress];
              break;
            } catch {
              expect(attempt).toBeLessThan(3);
              progress = [...progress, ...q.recentProgress];
              failures++;
              q = await start();
            }
          }
          const actual = sorted(sink.inner.rowsAfter(before));
          expect(actual, `seed ${seed}, step ${step}, rows ${JSON.stringify(rows)}`).toEqual(expected.rows);
          const dataBatch = progress.filter((p) => p.batchId > lastBatchBefore && p.numInputRows > 0).at(-1);
          expect(dataBatch?.stateOperators[0]?.numRowsDroppedByWatermark, `seed ${seed}, step ${step}: late groups`).toBe(expected.dropped);
          droppedGroups += expected.dropped;
        }
        await q.stop();
        // The run exercised what it is meant to: re-run batches and late rows.
        expect(failures).toBeGreaterThan(0);
        expect(droppedGroups).toBeGreaterThan(0);
      });
    }
  }
});
