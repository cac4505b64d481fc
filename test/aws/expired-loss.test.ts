/**
 * How many records of a skipped range that left the stream are lost: those no committed batch
 * holds (skipped-batch-redrive.ts expiredLoss), counted from the committed batches' offsets.
 */
import { describe, expect, it } from 'vitest';
import { expiredLoss, type CommittedSpan } from '../../lib/aws/skipped-batch-redrive.js';
import type { SkippedRange } from '../../lib/aws/skipped-batches.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';

/** A range of records 100, 110, ... 190 (ten records). */
const range: SkippedRange = {
  partitionId: 's', shardId: 's', streamName: 'x', firstSequenceNumber: '100', lastSequenceNumber: '190', batchSize: 10,
  reason: 'r', skippedAtMs: 0, recordedAtMs: 0, state: 'waiting',
};
const held = (...seqs: number[]): ShardRecord[] => seqs.map((s) => ({ sequenceNumber: String(s), partitionKey: 'k', dataBase64: '', approximateArrivalTimestampMs: 0 }));
const span = (from: number, to: number, count: number): CommittedSpan => ({ from: BigInt(from), to: BigInt(to), count });

describe('expiredLoss', () => {
  it('is nothing when every record is still held', () => {
    expect(expiredLoss(range, held(100, 110, 120, 130, 140, 150, 160, 170, 180, 190), [])).toEqual({ lost: 0, committed: 0 });
  });

  it('counts every gone record lost when no batch committed any', () => {
    expect(expiredLoss(range, held(170, 180, 190), [])).toEqual({ lost: 7, committed: 0, range: { first: '100', last: '169' } });
  });

  it('counts none lost when committed batches cover the gone records, inside or around the range', () => {
    expect(expiredLoss(range, held(170, 180, 190), [span(100, 190, 10)])).toEqual({ lost: 0, committed: 7 });
    expect(expiredLoss(range, held(), [span(50, 250, 30)])).toEqual({ lost: 0, committed: 10 });
  });

  it('subtracts a committed batch inside the range: its count less its records still held', () => {
    // Batch 120..180 (7 records) committed; 100, 110 never were; 170..190 still held.
    expect(expiredLoss(range, held(170, 180, 190), [span(120, 180, 7)])).toEqual({ lost: 2, committed: 5, range: { first: '100', last: '119' } });
    // Two batches leave the gap 130..149 (records 130 and 140) uncommitted.
    expect(expiredLoss(range, held(), [span(100, 120, 3), span(150, 190, 5)])).toEqual({ lost: 2, committed: 8, range: { first: '121', last: '149' } });
  });

  it('does not split a batch reaching outside the range over a gap: the loss is over-, never under-reported', () => {
    // Batch 60..120 covers 100..120 (how many of its 5 records are in the range is not known); 130..169 uncommitted.
    expect(expiredLoss(range, held(170, 180, 190), [span(60, 120, 5)])).toEqual({ lost: 7, committed: 0, range: { first: '121', last: '169' } });
  });
});
