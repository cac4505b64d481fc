/** The memory sink's rows as named objects (Spark's collect() as Row.asDict); allRows() keeps arrays. */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import { col, count, window } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';

describe('MemorySink.collect', () => {
  it('returns each row as an object keyed by column, timestamps and windows as the deployed sinks write them', async () => {
    const { stream, df } = new SluiceSession().memoryStream('store string, ts timestamp');
    const sink = new MemorySink();
    const query = await df.withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '1 hour'), col('store')).agg(count().as('n'))
      .writeStream.outputMode('update').sink(sink).start();
    stream.addData([['north', parseTimestamp('2024-05-01 14:10:00')], ['north', parseTimestamp('2024-05-01 14:20:00.000001')]]);
    await query.processAllAvailable();
    stream.addData([['south', parseTimestamp('2024-05-01 15:05:00')]]);
    await query.processAllAvailable();
    await query.stop();

    expect(sink.collect()).toEqual([
      { window: { start: '2024-05-01T14:00:00Z', end: '2024-05-01T15:00:00Z' }, store: 'north', n: 2 },
      { window: { start: '2024-05-01T15:00:00Z', end: '2024-05-01T16:00:00Z' }, store: 'south', n: 1 },
    ]);
    expect(sink.collectAfter(0)).toEqual([sink.collect()[1]]);
    // The arrays the testStream DSL compares stay as they were.
    expect(sink.allRows()[0]).toEqual([{ start: parseTimestamp('2024-05-01 14:00:00'), end: parseTimestamp('2024-05-01 15:00:00') }, 'north', 2]);
  });
});
