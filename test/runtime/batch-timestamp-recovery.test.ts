/**
 * A batch's processing time is decided once, when it is planned, and kept in the offset log (as
 * Spark's OffsetSeqMetadata.batchTimestampMs): a re-run of the planned batch in another container,
 * whose clock is hours off (the chaos harness's 'clock-skew'), must compute the same answer.
 */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { ManualClock } from '../../lib/runtime/clock.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { col, current_timestamp } from '../../lib/plan/functions.js';

describe('a planned batch re-run on a container with a skewed clock', () => {
  it('uses the processing time recorded at plan time, not the retrying container\'s clock', async () => {
    const plannedAtMs = Date.parse('2026-12-05T12:00:00Z');
    const { stream, df } = new SluiceSession().memoryStream('v long');
    const query = df.select(col('v'), current_timestamp().as('at'));
    const checkpoint = new MemoryCheckpoint();

    // The first container plans batch 0 and dies in the sink write (the batch stays uncommitted).
    const failing = new MemorySink();
    failing.addBatch = async () => { throw new Error('the process died'); };
    const first = await query.writeStream.outputMode('append').sink(failing).checkpoint(checkpoint).clock(new ManualClock(plannedAtMs)).start();
    stream.addData([[1], [2]]);
    await expect(first.processAllAvailable()).rejects.toThrow(/the process died/);
    await first.stop().catch(() => undefined);

    // The retry runs in a container whose clock is three hours ahead.
    const sink = new MemorySink();
    const retry = await query.writeStream.outputMode('append').sink(sink).checkpoint(checkpoint)
      .clock(new ManualClock(plannedAtMs + 3 * 3_600_000)).start();
    await retry.processAllAvailable();
    await retry.stop();

    expect(sink.allRows()).toEqual([[1, plannedAtMs * 1000], [2, plannedAtMs * 1000]]);
  });
});
