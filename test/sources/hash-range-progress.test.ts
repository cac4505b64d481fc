/**
 * Progress per hash range (what a stage-2 partition applied from a source shard): the watermark
 * counts a batch's event time only once every hash of the partition has it, across a reshard too.
 */
import { describe, expect, it } from 'vitest';
import { applyRange, mergeRanges, rangeSummary, type HashRange } from '../../lib/sources/hash-range-progress.js';

const MAX = (1n << 128n) - 1n;
const whole: HashRange = { start: 0n, end: MAX };
const lower: HashRange = { start: 0n, end: MAX / 2n };
const upper: HashRange = { start: MAX / 2n + 1n, end: MAX };

const record = (batch: number, range: HashRange, span: HashRange, maxEventTimeMs: number) => ({ batch, range, span, part: 0, parts: 1, maxEventTimeMs });

describe('hash-range progress', () => {
  it('a batch applied over part of the partition does not move its event time yet', () => {
    let { progress } = applyRange(undefined, record(0, whole, whole, 100));
    expect(rangeSummary(progress).maxEventTimeMs).toBe(100);
    ({ progress } = applyRange(progress, record(1, lower, whole, 200)));
    expect(rangeSummary(progress).maxEventTimeMs).toBe(100);
    const again = applyRange(progress, record(1, lower, whole, 200));
    expect(again.verdict.kind).toBe('duplicate');
    const rest = applyRange(progress, record(1, whole, whole, 200));
    expect(rest.verdict.kind).toBe('some');
    expect(rangeSummary(rest.progress).maxEventTimeMs).toBe(200);
    expect(rest.progress.ranges).toHaveLength(1);
  });

  it('a merge child holds at the parent that is behind; a split child keeps its own range only', () => {
    const a = applyRange(undefined, record(4, lower, lower, 400)).progress;
    const b = applyRange(undefined, record(3, upper, upper, 300)).progress;
    const merged = mergeRanges([a, b], whole);
    expect(rangeSummary(merged).maxEventTimeMs).toBe(300);
    // Batch 4 re-sent to the merged child: only the upper half's rows are new.
    const resent = applyRange(merged, record(4, whole, whole, 400));
    if (resent.verdict.kind !== 'some') throw new Error(`expected some, got ${resent.verdict.kind}`);
    expect(resent.verdict.fresh(1n)).toBe(false);
    expect(resent.verdict.fresh(MAX)).toBe(true);
    expect(rangeSummary(mergeRanges([b], upper)).maxEventTimeMs).toBe(300);
    // A parent that never heard of the source: its half has nothing applied, the child holds.
    expect(rangeSummary(mergeRanges([a], whole)).maxEventTimeMs).toBeNull();
  });
});
