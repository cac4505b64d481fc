/** Each source's own SourceProgress in a batch over two streams: its rows and its rates (Spark's shape). */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { col } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';

describe('progress sources[] of a query over two streams', () => {
  it('carries each source\'s numInputRows, and its rates over the batch\'s own intervals', async () => {
    const session = new SluiceSession();
    const orders = session.memoryStream('id string, n long');
    const payments = session.memoryStream('id string, n long');
    const union = orders.df.select(col('id'), col('n')).union(payments.df.select(col('id'), col('n')));
    const q = await union.writeStream.outputMode('append').sink(new MemorySink()).start();
    const batch = async (o: number, p: number): Promise<void> => {
      orders.stream.addData(Array.from({ length: o }, (_, i) => [`o${i}`, i]));
      payments.stream.addData(Array.from({ length: p }, (_, i) => [`p${i}`, i]));
      await q.processAllAvailable();
      // Two triggers must not start in one millisecond (the rate over a zero interval is left out).
      await new Promise((r) => setTimeout(r, 5));
    };
    await batch(30, 12);
    await batch(7, 21);
    await q.stop();
    const withRows = q.recentProgress.filter((p) => p.numInputRows > 0);
    expect(withRows.map((p) => p.sources.map((s) => s.numInputRows))).toEqual([[30, 12], [7, 21]]);
    for (const p of withRows) {
      for (const s of p.sources) {
        expect(s.processedRowsPerSecond).toBeCloseTo(s.numInputRows / (Math.max(1, p.batchDuration) / 1000), 6);
        // The same interval as the batch's: each source's share of the batch's input rate.
        expect(s.inputRowsPerSecond).toBeCloseTo((p.inputRowsPerSecond! * s.numInputRows) / p.numInputRows, 6);
      }
      expect(p.sources.reduce((a, s) => a + s.processedRowsPerSecond!, 0)).toBeCloseTo(p.processedRowsPerSecond, 6);
    }
    expect(withRows[1]!.sources[1]!.inputRowsPerSecond).toBeGreaterThan(0);
  });
});
