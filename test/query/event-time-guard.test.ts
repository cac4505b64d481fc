import { describe, expect, it } from 'vitest';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { col, count, window } from '../../lib/plan/functions.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { formatTimestamp } from '../../lib/core/timestamps.js';
import { parseMaxEventTimeSkew } from '../../lib/execution/event-time-skew.js';

const ARRIVAL_MS = Date.parse('2024-05-01T15:00:00Z');

const perHour = (conf?: Record<string, string>): StreamingQueryDefinition => defineQuery({
  name: 'orders-per-hour',
  source: { schema: 'id long, ts timestamp' },
  transform: (events) => events.withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '1 hour')).agg(count('id').as('orders')),
  outputMode: 'update',
  sink: { kind: 'dynamodb' },
  conf,
});

let sequence = 5000n;
function records(events: readonly object[], arrivalMs = ARRIVAL_MS): ShardRecord[] {
  return events.map((e) => ({
    sequenceNumber: String(sequence++ * 1_000_000_000n),
    partitionKey: 'p',
    dataBase64: Buffer.from(JSON.stringify(e)).toString('base64'),
    approximateArrivalTimestampMs: arrivalMs,
  }));
}

const onTime = [1, 2, 3, 4, 5, 6].map((id) => ({ id, ts: `2024-05-01T14:${String(10 + id).padStart(2, '0')}:00Z` }));

async function run(definition: StreamingQueryDefinition, batches: ShardRecord[][]) {
  const b = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
  const query = compileQuery(definition, { expectedShardCount: 1 });
  const progress = [];
  for (const batch of batches) {
    const r = await runShardInvocation(query, { shardId: 's', records: batch }, b);
    expect(r.error).toBeUndefined();
    expect(r.firstUncommittedSequenceNumber).toBeNull();
    progress.push(...r.progress);
  }
  const latest = new Map<number, unknown>();
  for (const row of b.sink.allRows()) latest.set((row[0] as { start: number }).start, row[1]);
  const counts = [...latest].map(([start, n]) => `${formatTimestamp(start)}=${String(n)}`);
  const committedWatermark = new Date((await b.checkpoint.commitLog.getLatest())![1].nextBatchWatermarkMs).toISOString();
  return { ...b, progress, counts, committedWatermark };
}

describe('one bad timestamp does not move the watermark', () => {
  it('a 9999-12-31 event time (beyond the range held exactly) is dead-lettered; the six on-time records all count', async () => {
    const r = await run(perHour(), [records([{ id: 0, ts: '9999-12-31T23:00:00Z' }]), records(onTime)]);
    expect(r.counts).toEqual(['2024-05-01 14:00:00=6']);
    expect(r.deadLetters.records).toHaveLength(1);
    expect(r.deadLetters.records[0]!.reason).toMatch(/outside the timestamp range held exactly/);
    expect(r.committedWatermark).toBe('2024-05-01T14:06:00.000Z');
  });

  it('an event time far ahead of its arrival but in range (2200) is dead-lettered with the skew as reason', async () => {
    const r = await run(perHour(), [records([{ id: 0, ts: '2200-01-01T00:00:00Z' }]), records(onTime)]);
    expect(r.counts).toEqual(['2024-05-01 14:00:00=6']);
    expect(r.deadLetters.records.map((d) => d.reason)).toEqual([expect.stringMatching(/ahead of the record's arrival .*sluice\.streaming\.maxEventTimeSkew/)]);
    expect(r.progress[0]!.numDeadLetteredRows).toBe(1);
  });

  it('the skew is configurable: 30 minutes refuses 45 minutes ahead, the default hour accepts it, none turns the check off', async () => {
    const ahead = (): ShardRecord[] => records([{ id: 9, ts: '2024-05-01T15:45:00Z' }]);
    expect((await run(perHour({ 'sluice.streaming.maxEventTimeSkew': '30 minutes' }), [ahead()])).deadLetters.records).toHaveLength(1);
    expect((await run(perHour(), [ahead()])).deadLetters.records).toHaveLength(0);
    const far = (): ShardRecord[] => records([{ id: 9, ts: '2200-01-01T00:00:00Z' }]);
    expect((await run(perHour({ 'sluice.streaming.maxEventTimeSkew': 'none' }), [far()])).deadLetters.records).toHaveLength(0);
    expect(() => parseMaxEventTimeSkew('soon')).toThrow(/maxEventTimeSkew/);
  });

  it('a record without an arrival time (0) is not checked', async () => {
    const r = await run(perHour(), [records([{ id: 0, ts: '2200-01-01T00:00:00Z' }], 0)]);
    expect(r.deadLetters.records).toHaveLength(0);
  });

  it('rows dropped for a NULL event time are counted in progress', async () => {
    const r = await run(perHour(), [records([{ id: 1 }, { id: 2, ts: null }, onTime[0]!])]);
    expect(r.counts).toEqual(['2024-05-01 14:00:00=1']);
    expect(r.progress[0]!.numInputRows).toBe(3);
    expect(r.progress[0]!.numRowsNullEventTime).toBe(2);
  });
});
