/**
 * Issue 11, limits: every record stage 1 sends fits Kinesis's 1 MiB, counted in UTF-8 bytes (a
 * row of multi-byte characters is up to three times its length in characters), and a row that
 * cannot fit any record is declared unwritable before anything is sent.
 */
import { describe, expect, it } from 'vitest';
import { KINESIS_RECORD_LIMIT_BYTES, RepartitionSink, type RepartitionChannel, type RepartitionRecordOut, type RepartitionTarget } from '../../lib/sinks/repartition-sink.js';
import { findUnwritableRows } from '../../lib/sinks/row-limits.js';
import type { SinkBatch } from '../../lib/sinks/sink.js';

const one: RepartitionTarget = { shardId: 'shard-0', startingHashKey: 0n, endingHashKey: (1n << 128n) - 1n };

class RecordingStream implements RepartitionChannel {
  readonly sent: RepartitionRecordOut[] = [];
  async shards(): Promise<readonly RepartitionTarget[]> { return [one]; }
  async put(records: readonly RepartitionRecordOut[]): Promise<void> { this.sent.push(...records); }
}

const batchOf = (rows: unknown[][]): SinkBatch => ({ partitionId: 'src-0', batchId: 0, rows, outputMode: 'append' }) as never;

describe('the size of what crosses the hop', () => {
  it('rows of multi-byte text are cut by bytes: no record passes 1 MiB', async () => {
    const stream = new RecordingStream();
    const sink = new RepartitionSink({ channel: stream, routingOrdinals: [0], eventTimeOrdinal: null });
    // 250,000 euro signs: 250 KB of characters, 750 KB of UTF-8; two of them fit no single record.
    const rows = ['a', 'b', 'c'].map((k) => [k, '€'.repeat(250_000)]);
    const batch = batchOf(rows);
    expect(findUnwritableRows(sink.rowLimits, batch)).toEqual([]);
    await sink.addBatch(batch);
    expect(stream.sent.length).toBe(3);
    for (const r of stream.sent) expect(r.data.length + Buffer.byteLength(r.partitionKey)).toBeLessThanOrEqual(KINESIS_RECORD_LIMIT_BYTES);
  });

  it('a row that fits no record is refused by the row limits, with the limit and no value', () => {
    const sink = new RepartitionSink({ channel: new RecordingStream(), routingOrdinals: [0], eventTimeOrdinal: null });
    const batch = batchOf([['small', 'x'], ['big', '€'.repeat(400_000)]]);
    const refused = findUnwritableRows(sink.rowLimits, batch);
    expect(refused.map((r) => r.rowIndex)).toEqual([1]);
    expect(refused[0]!.refusal.code).toBe('SINK_ITEM_TOO_LARGE');
    expect(refused[0]!.refusal.reason).toMatch(/1200\d{3} bytes.*1 MiB/);
    expect(refused[0]!.refusal.reason).not.toMatch(/€/);
  });
});
