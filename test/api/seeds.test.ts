import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import { addData, assertOnQuery, checkAnswer, checkLastBatch, checkNewAnswer, stopStream, startStream, testStream } from '../../lib/testing/test-stream.js';

const at = (hhmm: string): number => parseTimestamp(`2024-05-01 ${hhmm}:00`)!;
const hour = (h: number): { start: number; end: number } => ({ start: at(`${h}:00`), end: at(`${h + 1}:00`) });

/** Seed 003: hourly revenue with a 15-minute watermark. */
function hourlyRevenue() {
  const { stream, df } = new SluiceSession().memoryStream('amount long, ts timestamp');
  const revenue = df
    .withWatermark('ts', '15 minutes')
    .groupBy(window(col('ts'), '1 hour'))
    .agg(sum('amount').as('revenue'));
  return { stream, revenue };
}

const firstBatch = [[15, at('14:40')], [10, at('14:30')], [30, at('15:10')]];

describe('seed 003: hourly revenue, 15 minute watermark', () => {
  it('append emits nothing until the watermark (15:05) closes [14:00, 15:00)', async () => {
    const { stream, revenue } = hourlyRevenue();
    await testStream(revenue, 'append')(
      addData(stream, ...firstBatch),
      checkNewAnswer(),
      assertOnQuery((q) => expect(q.lastProgress?.eventTime.watermark).toBe('2024-05-01T14:55:00.000Z')),
      addData(stream, [20, at('15:20')]),
      checkNewAnswer([hour(14), 25]),
      assertOnQuery((q) => expect(q.lastProgress?.eventTime.watermark).toBe('2024-05-01T15:05:00.000Z')),
    );
  });

  it('update emits the windows changed by each batch', async () => {
    const { stream, revenue } = hourlyRevenue();
    await testStream(revenue, 'update')(
      addData(stream, ...firstBatch),
      checkNewAnswer([hour(14), 25], [hour(15), 30]),
      addData(stream, [20, at('15:20')]),
      checkNewAnswer([hour(15), 50]),
    );
  });

  it('complete emits the whole table every trigger', async () => {
    const { stream, revenue } = hourlyRevenue();
    await testStream(revenue, 'complete')(
      addData(stream, ...firstBatch),
      checkLastBatch([hour(14), 25], [hour(15), 30]),
      addData(stream, [20, at('15:20')]),
      checkLastBatch([hour(14), 25], [hour(15), 50]),
    );
  });

  it('append drops a row behind the watermark and counts it', async () => {
    const { stream, revenue } = hourlyRevenue();
    await testStream(revenue, 'append')(
      addData(stream, ...firstBatch),
      addData(stream, [20, at('15:20')]),
      checkNewAnswer([hour(14), 25]),
      addData(stream, [99, at('14:50')]),
      checkNewAnswer(),
      assertOnQuery((q) => {
        const withInput = [...q.recentProgress].reverse().find((p) => p.numInputRows > 0);
        expect(withInput?.stateOperators[0]?.numRowsDroppedByWatermark).toBe(1);
      }),
    );
  });
});

/** Seed 002: counts per category in update and complete mode. */
function categoryTotals() {
  const { stream, df } = new SluiceSession().memoryStream('category string, amount long');
  return { stream, totals: df.groupBy('category').agg(sum('amount').as('total')) };
}

describe('seed 002: food/drink/sport', () => {
  it('update writes only the changed keys', async () => {
    const { stream, totals } = categoryTotals();
    await testStream(totals, 'update')(
      addData(stream, ['food', 100], ['drink', 50]),
      checkNewAnswer(['food', 100], ['drink', 50]),
      addData(stream, ['food', 200], ['sport', 30]),
      checkNewAnswer(['food', 300], ['sport', 30]),
    );
  });

  it('complete rewrites the whole table, across a restart', async () => {
    const { stream, totals } = categoryTotals();
    await testStream(totals, 'complete')(
      addData(stream, ['food', 100], ['drink', 50]),
      checkLastBatch(['food', 100], ['drink', 50]),
      stopStream(),
      addData(stream, ['food', 200], ['sport', 30]),
      startStream(),
      checkLastBatch(['food', 300], ['drink', 50], ['sport', 30]),
      checkAnswer(['food', 300], ['drink', 50], ['sport', 30]),
    );
  });

  it('refuses append mode for an aggregation without watermark, saying how to fix it', async () => {
    const { totals } = categoryTotals();
    await expect(totals.writeStream.outputMode('append').format('memory').queryName('t').start()).rejects.toThrow(/without watermark/);
    const counted = categoryTotals().totals.groupBy('category').agg(count().as('n'));
    expect(counted.columns).toEqual(['category', 'n']);
  });
});
