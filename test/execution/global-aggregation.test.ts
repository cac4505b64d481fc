/**
 * A global aggregation (no grouping keys) has its one group in every batch, as Spark's hash
 * aggregate gives a row of initial values for empty input without grouping keys. Expected rows by
 * hand; the same cases match PySpark 4.0.1 in spark-diff (global-update/empty-first,
 * global-complete/empty-first, global-update-watermark/no-data-batch-re-emits).
 */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import type { OutputMode } from '../../lib/core/output-mode.js';
import { count, max, sum } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';

const S = 1_000_000;

async function globalCounts(mode: OutputMode, watermark: boolean) {
  const { stream, df } = new SluiceSession().memoryStream('k string, ts timestamp, v long');
  const input = watermark ? df.withWatermark('ts', '10 seconds') : df;
  const query = input.groupBy().agg(count('*').as('n'), sum('v').as('s'), max('v').as('mx'));
  const sink = new MemorySink();
  const q = await query.writeStream.outputMode(mode).sink(sink).checkpoint(new MemoryCheckpoint()).start();
  /** Each batch the step ran: its input row count and the state rows after it. */
  const step = async (rows: unknown[][]) => {
    const last = q.lastProgress?.batchId ?? -1;
    stream.addData(rows);
    await q.processAllAvailable();
    return q.recentProgress.filter((p) => p.batchId > last).map((p) => ({ input: p.numInputRows, stateRows: p.stateOperators[0]!.numRowsTotal }));
  };
  return { step, sink };
}

describe('global aggregation on empty batches (Spark HashAggregateExec without grouping keys)', () => {
  for (const mode of ['update', 'complete'] as const) {
    it(`${mode}: an empty first batch emits [0, NULL, NULL] and keeps one state row`, async () => {
      const { step, sink } = await globalCounts(mode, false);
      expect(await step([])).toEqual([{ input: 0, stateRows: 1 }]);
      expect(sink.lastBatch()!.rows).toEqual([[0, null, null]]);
      await step([['a', 1 * S, 3], ['b', 2 * S, null]]);
      expect(sink.lastBatch()!.rows).toEqual([[2, 3, 3]]);
    });
  }

  it('update: an empty data batch after data re-emits the stored row', async () => {
    const { step, sink } = await globalCounts('update', false);
    await step([['a', 1 * S, 3]]);
    const batches = await step([]);
    expect(batches.map((b) => b.input)).toEqual([0]);
    expect(sink.lastBatch()!.rows).toEqual([[1, 3, 3]]);
  });

  it('update with a watermark: the no-data batch the watermark triggers re-emits the row too', async () => {
    const { step, sink } = await globalCounts('update', true);
    await step([['a', 5 * S, 1]]);
    const batches = await step([['b', 40 * S, 2]]);
    // The data batch, then the no-data batch for the watermark's move to 30 s.
    expect(batches.map((b) => b.input)).toEqual([1, 0]);
    expect(sink.lastBatch()!.rows).toEqual([[2, 3, 2]]);
  });
});
