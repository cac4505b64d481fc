/**
 * The chaos oracle's account of records lost to retention (retention-loss.ts): a query counts as
 * lost exactly what its engine recorded as lost (expired-planned ranges) or its re-drive reported
 * expired, each checked against what really expired. Seed 1 with --expire-planned on main gave
 * mismatched=10: one query's fault trimmed the stream under another query, whose engine recorded
 * the loss, while the oracle counted only the losses of a query's own faults.
 */
import { describe, expect, it } from 'vitest';
import { SkippedBatchStore, type SkippedRange } from '../../../lib/aws/skipped-batches.js';
import type { DeadLetterRecord } from '../../../lib/sources/dead-letter.js';
import type { SinkBatch } from '../../../lib/sinks/sink.js';
import { SinkHistory } from '../../../lib/local/chaos/history.js';
import { deadLettersBesideLoss, recordedExpiredPlannedLoss, retentionLoss, runRecordsOf } from '../../../lib/local/chaos/retention-loss.js';

const stream = 'sales-r1';
const shard = 'shardId-000000000000';
const seq = (n: number): string => String(1000 + n);
// Ten records on shard 0, then two on shard 1 (in put order).
const records = runRecordsOf([{
  source: 'sales', streamName: stream,
  placed: [
    ...Array.from({ length: 10 }, (_, i) => ({ shardId: shard, sequenceNumber: seq(i), partitionKey: 'south', data: `s${i}` })),
    { shardId: 'shardId-000000000001', sequenceNumber: seq(3), partitionKey: 'east', data: 'e0' },
    { shardId: 'shardId-000000000001', sequenceNumber: seq(4), partitionKey: 'east', data: 'e1' },
  ],
}]);

/** The item the engine writes for a planned batch's expired records, as SkippedBatchStore.list() returns it. */
async function expiredPlannedItem(first: number, last: number, count: number, batchId = 4): Promise<SkippedRange> {
  type Value = { S?: string; N?: string };
  let input: { Key: Record<string, Value>; ExpressionAttributeValues: Record<string, Value> } | undefined;
  const client = { send: async (command: { input: NonNullable<typeof input> }) => { input = command.input; return {}; } };
  const store = new SkippedBatchStore({ client: client as never, checkpointTable: 't', queryName: 'chaos-live' });
  await store.recordExpiredPlanned(shard, stream, { firstSequenceNumber: seq(first), lastSequenceNumber: seq(last), count, shardId: shard, batchId });
  // The store widens the item by an update: its values are what a later list() reads back.
  const v = input!.ExpressionAttributeValues;
  const outcome = JSON.parse(v[':outcome']!.S!);
  return {
    sortKey: input!.Key.sk!.S!, partitionId: v[':partition']!.S!, shardId: v[':shard']!.S!, streamName: v[':stream']!.S!,
    firstSequenceNumber: v[':first']!.S!, lastSequenceNumber: v[':last']!.S!, batchSize: Number(v[':count']!.N), reason: v[':reason']!.S!,
    skippedAtMs: 0, recordedAtMs: 0, state: 'redriven', outcome,
  };
}

/** Shard 0's trim horizon at s<n> (Kinesis trims each shard oldest-first); shard 1 untouched. */
const expiredUpTo = (n: number) => (streamName: string, shardId: string, sequenceNumber: string): boolean =>
  streamName === stream && shardId === shard && BigInt(sequenceNumber) <= BigInt(seq(n));

describe('recordedExpiredPlannedLoss: the records a query\'s engine recorded as lost to retention', () => {
  it('counts a recorded range as lost though the query had no fault of its own (another query\'s trimmed the stream)', async () => {
    // Another query's planned-then-expired fault expired s0..s8; this query's planned batch 4 held s5..s9.
    const got = recordedExpiredPlannedLoss([await expiredPlannedItem(5, 8, 4)], records, expiredUpTo(8));
    expect(got.lost.map((r) => r.data)).toEqual(['s5', 's6', 's7', 's8']);
    expect(got.diff).toMatchObject({ lost: 0, mismatched: 0 });
    expect([...got.lossyBatches]).toEqual([`${shard}#4`]);
    // Only the range's shard: shardId-000000000001's records with the same sequence numbers stay.
    expect(got.lost.every((r) => r.shardId === shard)).toBe(true);
  });

  it('a recorded loss of records that never expired is data loss', async () => {
    // The engine says s5..s8 are gone, but retention trimmed only s0..s6: s7 and s8 were dropped.
    const got = recordedExpiredPlannedLoss([await expiredPlannedItem(5, 8, 4)], records, expiredUpTo(6));
    expect(got.diff.lost).toBe(2);
    expect(got.diff.examples[0]).toMatch(/never expired/);
    expect(got.lost.map((r) => r.data)).toEqual(['s5', 's6']);
  });

  it('a range whose count is not its records\' is a wrong report', async () => {
    const got = recordedExpiredPlannedLoss([await expiredPlannedItem(5, 8, 3)], records, expiredUpTo(8));
    expect(got.diff.lost).toBe(1);
    expect(got.diff.examples[0]).toMatch(/says 3 records, it holds 4/);
  });

  it('ignores skipped ranges that are not expired-planned (expiry.ts judges those)', () => {
    const skipped: SkippedRange = {
      partitionId: shard, shardId: shard, streamName: stream, firstSequenceNumber: seq(0), lastSequenceNumber: seq(9), batchSize: 10,
      reason: 'RetryAttemptsExhausted', skippedAtMs: 0, recordedAtMs: 0, state: 'waiting', sortKey: `${shard}#${seq(0)}`,
    };
    expect(recordedExpiredPlannedLoss([skipped], records, expiredUpTo(9)).lost).toEqual([]);
  });
});

describe('retentionLoss: recorded and re-driven losses, each record once', () => {
  it('merges the engine\'s record and the re-drive\'s report of the same records', async () => {
    const got = retentionLoss({
      recorded: [await expiredPlannedItem(0, 2, 3)], records, expired: expiredUpTo(2),
      redriveLost: [{ streamName: stream, shardId: shard, sequenceNumber: seq(1) }, { streamName: stream, shardId: shard, sequenceNumber: seq(2) }],
    });
    expect(got.lost.map((r) => [r.data, r.index])).toEqual([['s0', 0], ['s1', 1], ['s2', 2]]);
    expect(got.diff.lost).toBe(0);
  });
});

describe('deadLettersBesideLoss: a lost record\'s dead letter counts neither way', () => {
  it('drops dead letters of lost records, keeps the others', () => {
    const dl = (n: number): DeadLetterRecord => ({
      queryName: 'q', shardId: shard, sequenceNumber: seq(n), partitionKey: 'south', approximateArrivalTimestampMs: 0, dataBase64: '', reason: 'bad',
    });
    const lost = records.filter((r) => r.data === 's6');
    expect(deadLettersBesideLoss([dl(2), dl(6)], lost).map((d) => d.sequenceNumber)).toEqual([seq(2)]);
  });
});

describe('SinkHistory with a batch that lost planned records to retention', () => {
  const schema = [
    { name: 'store_id', dataType: 'string', nullable: true },
    { name: 'sales', dataType: 'double', nullable: true },
  ] as unknown as SinkBatch['schema'];
  const batch = (batchId: number, rows: [string, number][]): SinkBatch => ({
    batchId, partitionId: shard, columns: ['store_id', 'sales'], outputMode: 'update', schema, rows,
  });
  const item = (batchId: number, store: string, sales: number) => ({
    pk: { S: store }, _partition: { S: shard }, _batchId: { N: String(batchId) }, store_id: { S: store }, sales: { N: String(sales) },
  });
  const committed = new Set([`${shard}#0`]);

  it('accepts attempts before and after the trim for the batch that recorded the loss, and no other', async () => {
    const h = new SinkHistory(['store_id'], '');
    // Attempt 1 saw all its records (and died after the sink write); attempt 2 ran over the rest.
    h.attempt(batch(0, [['south', 81]]));
    h.dynamoDbWrite(item(0, 'south', 81));
    h.attempt(batch(0, [['south', 46.25]]));
    h.dynamoDbWrite(item(0, 'south', 46.25));
    expect(await h.check(committed, new Set([`${shard}#0`]))).toMatchObject({ lost: 0, duplicated: 0, mismatched: 0 });
    // Without a recorded loss the same history is a re-run with a new answer.
    expect((await h.check(committed)).mismatched).toBeGreaterThan(0);
    // A value neither attempt wrote is still wrong.
    h.dynamoDbWrite(item(0, 'south', 99));
    expect((await h.check(committed, new Set([`${shard}#0`]))).mismatched).toBe(1);
  });
});
