/**
 * The main job for now: seed 003's hourly revenue query over sample events, run in all three
 * output modes, printing each batch like Spark's console sink, with its progress line.
 */
import { SluiceSession } from '../lib/api/session.js';
import { ConsoleSink } from '../lib/sinks/console-sink.js';
import { col, count, sum, window } from '../lib/plan/functions.js';
import { parseTimestamp } from '../lib/core/timestamps.js';
import type { OutputMode } from '../lib/core/output-mode.js';

const at = (hhmm: string): number => parseTimestamp(`2024-05-01 ${hhmm}:00`)!;

/** Each inner list is one micro-batch of (store, amount, event time). */
const batches: unknown[][][] = [
  [['north', 15, at('14:40')], ['north', 10, at('14:30')], ['south', 30, at('15:10')]],
  [['south', 20, at('15:20')]],
  [['north', 5, at('14:45')], ['north', 40, at('16:20')]],
];

async function run(mode: OutputMode): Promise<void> {
  console.log(`\n==================== outputMode("${mode}") ====================`);
  const { stream, df } = new SluiceSession().memoryStream('store string, amount long, ts timestamp');
  const revenue = df
    .withWatermark('ts', '15 minutes')
    .groupBy(window(col('ts'), '1 hour'), col('store'))
    .agg(sum('amount').as('revenue'), count().as('orders'));
  if (mode === 'append') console.log(revenue.explain(mode));
  const query = await revenue.writeStream.outputMode(mode).sink(new ConsoleSink()).queryName(`hourly_revenue_${mode}`).start();
  for (const rows of batches) {
    stream.addData(rows);
    await query.processAllAvailable();
  }
  for (const p of query.recentProgress) {
    const op = p.stateOperators[0]!;
    console.log(
      `progress batch=${p.batchId} inputRows=${p.numInputRows} watermark=${p.eventTime.watermark ?? '-'} ` +
      `stateRows=${op.numRowsTotal} updated=${op.numRowsUpdated} removed=${op.numRowsRemoved} late=${op.numRowsDroppedByWatermark} output=${p.sink.numOutputRows}`,
    );
  }
  await query.stop();
}

async function main(): Promise<void> {
  for (const mode of ['append', 'update', 'complete'] as const) await run(mode);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
