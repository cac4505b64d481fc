/** Date and decimal columns through a streaming query: grouping keys, sum/avg/min/max, dedup, casts. */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { avg, col, count, max, min, sum, to_date } from '../../lib/plan/functions.js';
import { parseDecimal } from '../../lib/core/decimal.js';
import { typeToString } from '../../lib/plan/data-types.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import type { MemoryStream } from '../../lib/sources/memory-stream.js';

/** Runs `df`, feeding each step to `stream`, and returns the sink's collect() after each. */
async function run(df: DataFrame, mode: 'append' | 'complete', stream: MemoryStream, steps: unknown[][][]): Promise<Record<string, unknown>[][]> {
  const sink = new MemorySink();
  const query = await df.writeStream.outputMode(mode).sink(sink).checkpoint(new MemoryCheckpoint()).start();
  const out: Record<string, unknown>[][] = [];
  try {
    for (const rows of steps) {
      stream.addData(rows);
      await query.processAllAvailable();
      out.push(sink.collect());
    }
  } finally {
    await query.stop();
  }
  return out;
}
const text = (rows: Record<string, unknown>[]): Record<string, string | null>[] =>
  rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v === null ? null : String(v)])));

describe('date and decimal columns in a streaming query', () => {
  it('groups by a date key and aggregates decimals exactly with Spark’s result types', async () => {
    const { stream, df } = new SluiceSession().memoryStream('day string, amount decimal(10,2)');
    const totals = df
      .groupBy(to_date(col('day')).as('d'))
      .agg(sum('amount').as('total'), avg('amount').as('mean'), min('amount').as('lo'), max('amount').as('hi'), count().as('n'));
    // PySpark 4.0.1: sum(decimal(10,2)) is decimal(20,2), avg decimal(14,6); 1.25 and 2.50 give 3.75 and 1.875000.
    expect(totals.plan.output.map((a) => typeToString(a.type))).toEqual(['date', 'decimal(20,2)', 'decimal(14,6)', 'decimal(10,2)', 'decimal(10,2)', 'long']);
    const [first, second] = await run(totals, 'complete', stream, [
      [['2024-01-02', parseDecimal('1.25')], ['2024-01-02 10:00', parseDecimal('2.50')], ['2024-01-03', null]],
      // 0.1 + 0.2 is exactly 0.30 here (a double sum gives 0.30000000000000004).
      [['2024-01-04', parseDecimal('0.10')], ['2024-01-04', parseDecimal('0.20')]],
    ]);
    expect(text(first!)).toEqual([
      { d: '2024-01-02', total: '3.75', mean: '1.875000', lo: '1.25', hi: '2.50', n: '2' },
      { d: '2024-01-03', total: null, mean: null, lo: null, hi: null, n: '1' },
    ]);
    expect(text(second!).find((r) => r.d === '2024-01-04')).toEqual({ d: '2024-01-04', total: '0.30', mean: '0.150000', lo: '0.10', hi: '0.20', n: '2' });
  });

  it('deduplicates on a decimal column by value', async () => {
    const { stream, df } = new SluiceSession().memoryStream('amount decimal(5,1), tag string');
    const [rows] = await run(df.dropDuplicates(['amount']).select('tag'), 'append', stream, [
      [[parseDecimal('1.5'), 'a'], [parseDecimal('1.50'), 'b'], [parseDecimal('2.0'), 'c']],
    ]);
    expect(rows!.map((r) => r.tag)).toEqual(['a', 'c']);
  });
});
