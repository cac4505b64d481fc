import { describe, expect, it } from 'vitest';
import { progressRates } from '../../lib/runtime/progress-rates.js';
import { SluiceSession } from '../../lib/api/session.js';
import { ManualClock } from '../../lib/runtime/clock.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { Trigger } from '../../lib/runtime/trigger.js';
import type { StreamingQueryProgress } from '../../lib/runtime/progress.js';

describe('progressRates (Spark ProgressContext)', () => {
  it('input rate over the trigger interval, processed rate over the processing time', () => {
    expect(progressRates(100, 10_000, 250)).toEqual({ inputRowsPerSecond: 10, processedRowsPerSecond: 400 });
  });

  it('first trigger (no previous start): input rate 0, as Spark dividing by +Infinity', () => {
    expect(progressRates(100, null, 250)).toEqual({ inputRowsPerSecond: 0, processedRowsPerSecond: 400 });
  });

  it('processing time below 1 ms counts as 1 ms (Spark: max(1, ms))', () => {
    expect(progressRates(3, 1000, 0).processedRowsPerSecond).toBe(3000);
  });

  it('a no-data batch reports 0 for both', () => {
    expect(progressRates(0, 5000, 12)).toEqual({ inputRowsPerSecond: 0, processedRowsPerSecond: 0 });
  });

  it('a zero interval gives NaN or Infinity in Spark, which its JSON leaves out: the field is absent', () => {
    const rates = progressRates(5, 0, 3);
    expect('inputRowsPerSecond' in rates).toBe(false);
    expect(JSON.parse(JSON.stringify(rates))).toEqual({ processedRowsPerSecond: 5 / 0.003 });
    expect('inputRowsPerSecond' in progressRates(0, 0, 3)).toBe(false);
  });

  it('a previous start ahead of this one (another container\'s clock) is treated as unknown', () => {
    expect(progressRates(7, -20, 7).inputRowsPerSecond).toBe(0);
  });
});

describe('StreamExecution progress rates on a manual clock', () => {
  it('input rate is rows per second since the previous trigger started, not per second of batch time', async () => {
    const clock = new ManualClock(1_000_000);
    const { stream, df } = new SluiceSession().memoryStream('key string, n long', 'events');
    const q = await df.writeStream.outputMode('append').sink(new MemorySink()).trigger(Trigger.ProcessingTime(1000)).clock(clock).start();
    const progress: StreamingQueryProgress[] = [];
    const tick = async (rows: number, advanceMs: number): Promise<void> => {
      clock.advance(advanceMs);
      if (rows > 0) stream.addData(Array.from({ length: rows }, (_, i) => [`k${i}`, i]));
      await q.runDueTriggers();
      if (q.lastProgress && q.lastProgress !== progress[progress.length - 1]) progress.push(q.lastProgress);
    };
    await tick(4, 0); // first trigger: no previous start
    await tick(6, 2000); // one batch 2 s after the first trigger: 3 rows/s
    await tick(0, 1000); // a trigger with nothing to do: no batch, but the next one's previous trigger
    await tick(9, 3000); // 9 rows, 3 s after the idle trigger
    await q.stop();
    expect(progress.map((p) => p.numInputRows)).toEqual([4, 6, 9]);
    expect(progress.map((p) => p.inputRowsPerSecond)).toEqual([0, 3, 3]);
    for (const p of progress) {
      expect(p.processedRowsPerSecond).toBeCloseTo(p.numInputRows / (Math.max(1, p.batchDuration) / 1000), 6);
    }
  });
});
