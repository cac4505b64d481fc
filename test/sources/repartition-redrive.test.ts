/**
 * A record of the internal stream put back by `sluice redrive --skipped` (RepartitionRecord.redrive):
 * stage 2 has moved past its source batch, so as it was it would be dropped; tagged, it is applied
 * under the range's own progress entry, once, and that entry is no part of the watermark.
 */
import { describe, expect, it } from 'vitest';
import { applyRepartitionRecord, sourcesWatermarkMs, type RepartitionRecord, type SourceProgress } from '../../lib/sources/repartition-records.js';

const record = (batch: number, rows: unknown[][], extra: Partial<RepartitionRecord> = {}): RepartitionRecord => ({
  v: 1, kind: 'rows', src: 'shardId-0', batch, part: 0, parts: 1, maxEventTimeMs: 1_000 * batch, rows, ...extra,
});

describe('a re-driven record of the internal stream', () => {
  it('is applied once although its source batch is behind, and a second copy is dropped', () => {
    const progress: Record<string, SourceProgress> = {};
    expect(applyRepartitionRecord(progress, record(4, [['a']]))).toEqual([['a']]);
    expect(applyRepartitionRecord(progress, record(6, [['c']]))).toEqual([['c']]);
    // Batch 5 was skipped: put back as it was, it is a duplicate to stage 2.
    expect(applyRepartitionRecord(progress, record(5, [['b']]))).toBeNull();
    const redriven = record(5, [['b']], { redrive: 'shardId-1/49000' });
    expect(applyRepartitionRecord(progress, redriven)).toEqual([['b']]);
    expect(applyRepartitionRecord(progress, redriven)).toBeNull();
    // Another range of the same source has its own entry.
    expect(applyRepartitionRecord(progress, record(3, [['z']], { redrive: 'shardId-1/48000' }))).toEqual([['z']]);
  });

  it('does not hold the watermark back', () => {
    const progress: Record<string, SourceProgress> = {};
    applyRepartitionRecord(progress, record(60, [['a']]));
    const before = sourcesWatermarkMs(progress, 10_000, ['shardId-0']);
    applyRepartitionRecord(progress, record(5, [['b']], { redrive: 'shardId-1/49000' }));
    expect(sourcesWatermarkMs(progress, 10_000, ['shardId-0'])).toBe(before);
    expect(before).toBe(50_000);
  });
});
