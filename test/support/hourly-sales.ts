/**
 * The hourly sales per store query of the Kinesis-trigger emulator tests, and its reference answer:
 * the engine in memory over the same sales, in complete mode (every group's final value).
 */
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';

export const SALES_SCHEMA = 'store_id string, amount long, ts timestamp';
export interface Sale { store_id: string; amount: number; ts: string }

export const hourlySales = (df: DataFrame): DataFrame => df
  .withWatermark('ts', '15 minutes')
  .groupBy(window(col('ts'), '1 hour'), col('store_id'))
  .agg(sum('amount').as('revenue'), count('*').as('orders'));

export async function inMemoryHourlySales(sales: readonly Sale[]): Promise<string[]> {
  const { stream, df } = new SluiceSession().memoryStream(SALES_SCHEMA);
  const result = hourlySales(df);
  const sink = new MemorySink();
  const q = await result.writeStream.outputMode('complete').sink(sink).start();
  stream.addData(sales.map((s) => [s.store_id, s.amount, parseTimestamp(s.ts)]));
  await q.processAllAvailable();
  await q.stop();
  const schema = result.plan.output.map((a) => ({ name: a.name, type: a.type }));
  return canonicalSales(sink.allRows().map((r) => toExternalRow(r, schema)));
}

/** Rows read back from a sink (or from memory) as sorted text, to compare. */
export const canonicalSales = (rows: readonly Record<string, unknown>[]): string[] =>
  rows.map((r) => JSON.stringify({ window: r.window, store_id: r.store_id, revenue: Number(r.revenue), orders: Number(r.orders) })).sort();
