/**
 * KinesisShardSource re-drive batches (lib/aws/redrive-batch.ts): a re-drive run's records form a
 * batch of their own at the shard's committed position; the batch after it reads the shard on from
 * that position; a no-data batch repeating the re-drive's offset is not a re-drive batch.
 */
import { describe, expect, it } from 'vitest';
import { toSchema } from '../../lib/api/session.js';
import { KinesisShardSource, asKinesisOffset, redriveRunOf, type ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { createRecordDecoder } from '../../lib/sources/record-decoder.js';
import type { Offset } from '../../lib/sources/source.js';

const SCHEMA = toSchema('a long, k string');

function record(sequenceNumber: string, data: Record<string, unknown>): ShardRecord {
  return { sequenceNumber, partitionKey: 'p', dataBase64: Buffer.from(JSON.stringify(data)).toString('base64'), approximateArrivalTimestampMs: 0 };
}

function source(): KinesisShardSource {
  return new KinesisShardSource({ name: 'kinesis', queryName: 'q', shardId: 'shard-0', schema: SCHEMA, decode: createRecordDecoder({ schema: '' }, SCHEMA) });
}

const committed = { shardId: 'shard-0', sequenceNumber: '5000', firstSequenceNumber: '4000', recordCount: 2 } as unknown as Offset;
const RUN = 'shard-0@redrive:r1';

describe('KinesisShardSource re-drive batches', () => {
  it('plans the run at the committed sequence number with its mark, reads exactly its records, and names failures by the run', () => {
    const s = source();
    s.setCommitted(committed);
    s.offer([record('6000', { a: 6, k: 'x' })]);
    s.offerRedrive(RUN, [record('1', { a: 1, k: 'x' }), record('2', { a: 'bad', k: 'y' }), record('3', { a: 3, k: 'z' })]);
    const end = s.latestOffset()!;
    expect(end).toEqual({ shardId: 'shard-0', sequenceNumber: '5000', redrive: { run: RUN, count: 3 } });
    expect(redriveRunOf(committed, end)).toEqual({ run: RUN, count: 3 });
    expect(s.covers(committed, end)).toBe(true);
    expect(s.getBatch(committed, end)).toEqual([[1, 'x'], [3, 'z']]);
    expect(s.batchSequenceNumbers(committed, end)).toEqual(['1', '2', '3']);
    expect(s.numInvalidRecords(committed, end)).toBe(1);
    expect(s.deadLetters().map((d) => `${d.shardId}/${d.sequenceNumber}`)).toEqual([`${RUN}/2`]);

    // Committed: the shard's own records follow, from the unchanged position.
    s.commit(end);
    const next = s.latestOffset()!;
    expect(asKinesisOffset(next)).toEqual({ shardId: 'shard-0', sequenceNumber: '6000', firstSequenceNumber: '6000', recordCount: 1 });
    expect(redriveRunOf(end, next)).toBeNull();
    expect(s.getBatch(end, next)).toEqual([[6, 'x']]);
    // Offered again after its commit (a late resume): ignored.
    s.offerRedrive(RUN, [record('1', { a: 1, k: 'x' })]);
    expect(s.latestOffset()).toEqual(next);
  });

  it('a batch repeating the run\'s offset (a no-data batch after it) is not a re-drive batch; another run after it is', () => {
    const end = { shardId: 'shard-0', sequenceNumber: '5000', redrive: { run: RUN, count: 1 } } as unknown as Offset;
    expect(redriveRunOf(end, end)).toBeNull();
    const s = source();
    s.setCommitted(end);
    expect(s.latestOffset()).toEqual(end);
    s.offerRedrive('shard-0@redrive:r2', [record('1', { a: 1, k: 'x' })]);
    const second = s.latestOffset()!;
    expect(redriveRunOf(end, second)).toEqual({ run: 'shard-0@redrive:r2', count: 1 });
    expect(s.getBatch(end, second)).toEqual([[1, 'x']]);
  });

  it('a pending re-drive batch is not covered until its run\'s records are offered, all of them', () => {
    const s = source();
    s.setCommitted(committed);
    const end = { shardId: 'shard-0', sequenceNumber: '5000', redrive: { run: RUN, count: 2 } } as unknown as Offset;
    expect(s.covers(committed, end)).toBe(false);
    s.offerRedrive(RUN, [record('1', { a: 1, k: 'x' })]);
    expect(s.covers(committed, end)).toBe(false);
    s.offerRedrive(RUN, [record('1', { a: 1, k: 'x' }), record('2', { a: 2, k: 'x' })]);
    expect(s.covers(committed, end)).toBe(true);
  });

  it('refuses to plan a re-drive batch on a shard with no committed batch', () => {
    const s = source();
    s.offerRedrive(RUN, [record('1', { a: 1, k: 'x' })]);
    expect(() => s.latestOffset()).toThrow(/no committed batch yet/);
  });

  it('a child seeded after a reshard (committed, no position of its own yet): the run sits before its first record, which follows from the start', () => {
    const s = source();
    s.setCommitted(null);
    expect(() => { s.offerRedrive(RUN, [record('1', { a: 1, k: 'x' })]); s.latestOffset(); }).toThrow(/no committed batch yet/);
    const seeded = source();
    seeded.setCommitted(null);
    seeded.offer([record('7000', { a: 7, k: 'x' })]);
    seeded.offerRedrive(RUN, [record('1', { a: 1, k: 'x' })], true);
    const end = seeded.latestOffset()!;
    expect(end).toEqual({ shardId: 'shard-0', sequenceNumber: '0', redrive: { run: RUN, count: 1 } });
    expect(seeded.getBatch(null, end)).toEqual([[1, 'x']]);
    seeded.commit(end);
    const next = seeded.latestOffset()!;
    expect(asKinesisOffset(next)).toEqual({ shardId: 'shard-0', sequenceNumber: '7000', firstSequenceNumber: '7000', recordCount: 1 });
    expect(seeded.getBatch(end, next)).toEqual([[7, 'x']]);
  });
});
