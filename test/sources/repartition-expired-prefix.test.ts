/**
 * A planned stage-2 batch whose oldest internal records expired (issue 11): it runs over the rest,
 * and the loss says which senders' batches the lost records carried rows of, found by comparing
 * the planned progress with the progress of the records still held.
 */
import { describe, expect, it } from 'vitest';
import { RepartitionShardSource } from '../../lib/sources/repartition-shard-source.js';
import { encodeRepartitionRecord, type RepartitionRecord } from '../../lib/sources/repartition-records.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { missingBatches } from '../../lib/sources/hash-range-progress.js';
import type { Offset } from '../../lib/sources/source.js';

const FULL: [string, string] = ['0', 'ffffffffffffffffffffffffffffffff'];
const shardRecord = (seq: number, src: string, batch: number, rows: unknown[][]): ShardRecord => {
  const record: RepartitionRecord = { v: 1, kind: 'rows', src, batch, part: 0, parts: 1, maxEventTimeMs: 1_000 * batch, rows, hr: FULL };
  return { sequenceNumber: String(seq), partitionKey: 'p', dataBase64: Buffer.from(encodeRepartitionRecord(record)).toString('base64'), approximateArrivalTimestampMs: 0 };
};
// Internal records 10..15: source shard A's batches 0..3 and B's 0..1, interleaved.
const records = [
  shardRecord(10, 'A', 0, [['a0']]), shardRecord(11, 'A', 1, [['a1']]), shardRecord(12, 'B', 0, [['b0']]),
  shardRecord(13, 'A', 2, [['a2']]), shardRecord(14, 'B', 1, [['b1']]), shardRecord(15, 'A', 3, [['a3']]),
];
const source = (): RepartitionShardSource => new RepartitionShardSource('repartition', [{ name: 'x', type: 'string' }], 'shardId-9');

/** The batch planned over records 10..15 after `committed` (records up to it applied before). */
function planned(committed: number): { start: Offset | null; end: Offset } {
  const first = source();
  first.offer(records.filter((r) => Number(r.sequenceNumber) <= committed));
  const start = committed < 10 ? null : first.latestOffset();
  first.setCommitted(start);
  first.offer(records);
  return { start, end: first.latestOffset()! };
}

/** The retry's read of the shard is `read` (offered too); the batch runs without what it lacks, as the invocation does. */
function runWithoutExpired(retry: RepartitionShardSource, start: Offset | null, end: Offset, read: readonly ShardRecord[]) {
  retry.offer(read);
  const expired = retry.expiredPrefixOf(start, end, read);
  if (expired) expect(retry.runWithoutExpired(start, end, expired)).toBe(true);
  return expired;
}

describe('a planned stage-2 batch whose oldest internal records expired', () => {
  it('runs over the records still held and names the senders\' batches the lost ones carried', () => {
    const { start, end } = planned(-1);
    const retry = source();
    expect(retry.covers(start, end)).toBe(false);
    expect(runWithoutExpired(retry, start, end, records.slice(3))).toEqual({
      firstSequenceNumber: '10', lastSequenceNumber: '12', count: 3,
      lostSources: [
        { src: 'A', lo: FULL[0], hi: FULL[1], fromBatch: 0, toBatch: 1 },
        { src: 'B', lo: FULL[0], hi: FULL[1], fromBatch: 0, toBatch: 0 },
      ],
    });
    expect(retry.covers(start, end)).toBe(true);
    expect(retry.getBatch(start, end)).toEqual([['a2'], ['b1'], ['a3']]);
    expect(retry.expiredLostSources(start, end).map((l) => [l.src, l.fromBatch, l.toBatch])).toEqual([['A', 0, 1], ['B', 0, 0]]);
  });

  it('counts from what the committed batches applied', () => {
    const { start, end } = planned(11);
    const retry = source();
    retry.setCommitted(start);
    expect(runWithoutExpired(retry, start, end, records.slice(4))?.lostSources).toEqual([
      { src: 'A', lo: FULL[0], hi: FULL[1], fromBatch: 2, toBatch: 2 },
      { src: 'B', lo: FULL[0], hi: FULL[1], fromBatch: 0, toBatch: 0 },
    ]);
    expect(retry.getBatch(start, end)).toEqual([['b1'], ['a3']]);
  });

  it('every record expired: the batch runs empty, all it carried is lost', () => {
    const { start, end } = planned(-1);
    const retry = source();
    expect(runWithoutExpired(retry, start, end, [])).toMatchObject({ firstSequenceNumber: '10', lastSequenceNumber: '15', count: 6 });
    expect(retry.getBatch(start, end)).toEqual([]);
  });

  it('a delivery still holding a record the read lacks: it is left out with the recorded loss', () => {
    const { start, end } = planned(-1);
    const retry = source();
    retry.offer(records.slice(1, 2));
    expect(runWithoutExpired(retry, start, end, records.slice(3))).toMatchObject({ lastSequenceNumber: '12', count: 3 });
    expect(retry.getBatch(start, end)).toEqual([['a2'], ['b1'], ['a3']]);
  });

  it('records missing in the middle are no trim: the batch still needs them all', () => {
    const { start, end } = planned(-1);
    const retry = source();
    expect(runWithoutExpired(retry, start, end, [records[0]!, ...records.slice(2)])).toBeNull();
    expect(() => retry.getBatch(start, end)).toThrow(/not all available/);
  });
});

describe('a stage 2 reading several hop inputs', () => {
  it('each input\'s view names its own senders, tagged with the input', () => {
    const tagged = (seq: number, input: string, src: string, batch: number): ShardRecord => {
      const record: RepartitionRecord = { v: 1, kind: 'rows', src, batch, part: 0, parts: 1, maxEventTimeMs: 0, rows: [[`${input}${batch}`]], hr: FULL, in: input };
      return { sequenceNumber: String(seq), partitionKey: 'p', dataBase64: Buffer.from(encodeRepartitionRecord(record)).toString('base64'), approximateArrivalTimestampMs: 0 };
    };
    const shard = [tagged(10, 'orders', 'A', 0), tagged(11, 'payments', 'P', 0), tagged(12, 'orders', 'A', 1), tagged(13, 'payments', 'P', 1)];
    const view = (input: string): RepartitionShardSource => new RepartitionShardSource(`repartition.${input}`, [{ name: 'x', type: 'string' }], 'shardId-9', undefined, input);
    for (const input of ['orders', 'payments']) {
      const planner = view(input);
      planner.offer(shard);
      const end = planner.latestOffset()!;
      const retry = view(input);
      expect(runWithoutExpired(retry, null, end, shard.slice(2))?.lostSources).toEqual([
        { src: input === 'orders' ? 'A' : 'P', input, lo: FULL[0], hi: FULL[1], fromBatch: 0, toBatch: 0 },
      ]);
      expect(retry.getBatch(null, end)).toEqual([[`${input}1`]]);
    }
  });
});

describe('missingBatches', () => {
  it('only the hash ranges and parts the held progress lacks', () => {
    const planned = { span: FULL, idle: false, ranges: [{ lo: '0', hi: '7f', batch: 5, maxEventTimeMs: null }, { lo: '80', hi: 'ff', batch: 4, parts: [0, 1], maxEventTimeMs: null }] };
    const held = { span: FULL, idle: false, ranges: [{ lo: '0', hi: '3f', batch: 5, maxEventTimeMs: null }, { lo: '40', hi: '7f', batch: 2, maxEventTimeMs: null }, { lo: '80', hi: 'ff', batch: 4, parts: [0], maxEventTimeMs: null }] };
    expect(missingBatches(held, planned)).toEqual([
      { lo: '40', hi: '7f', fromBatch: 3, toBatch: 5 },
      { lo: '80', hi: 'ff', fromBatch: 4, toBatch: 4 },
    ]);
    expect(missingBatches(planned, planned)).toEqual([]);
  });
});
