/**
 * Stage 2's watermark over the source shards after a reshard of the source stream. A child shard
 * not heard from yet used to hold every state partition's watermark at 0: in a chaos run with a
 * split, wave 2's late rows (routed to the children) were counted where the run without the split
 * dropped them. A child carries its parents' event time; a closed parent is represented by its
 * children.
 */
import { describe, expect, it } from 'vitest';
import { sourcesWatermarkMs, type SourceProgress } from '../../lib/sources/repartition-records.js';

const at = (maxEventTimeMs: number | null, idle = false): SourceProgress => ({ span: ['0', 'f'.repeat(32)], ranges: [{ lo: '0', hi: 'f'.repeat(32), batch: 3, maxEventTimeMs }], idle });
const MIN = 60_000;

describe('sourcesWatermarkMs across a reshard of the source stream', () => {
  it('without lineage, a shard not heard from holds the watermark at 0 (as before)', () => {
    expect(sourcesWatermarkMs({ a: at(100 * MIN), b: at(90 * MIN) }, 10 * MIN, ['a', 'b', 'c'])).toBe(0);
    expect(sourcesWatermarkMs({ a: at(100 * MIN), b: at(90 * MIN) }, 10 * MIN, ['a', 'b'])).toBe(80 * MIN);
  });

  it('the children of a split, not heard from yet, carry their parent\'s event time', () => {
    const progress = { p: at(100 * MIN), q: at(90 * MIN) };
    const shards = [{ id: 'p' }, { id: 'q' }, { id: 'c1', parents: ['p'] }, { id: 'c2', parents: ['p'] }];
    expect(sourcesWatermarkMs(progress, 10 * MIN, shards)).toBe(80 * MIN);
    // The parent is represented by its children: once they are ahead of it, it no longer holds back.
    expect(sourcesWatermarkMs({ ...progress, q: at(120 * MIN), c1: at(130 * MIN), c2: at(125 * MIN) }, 10 * MIN, shards)).toBe(110 * MIN);
    // A child that sent an older row than its parent's last still carries the parent's time.
    expect(sourcesWatermarkMs({ ...progress, q: at(120 * MIN), c1: at(50 * MIN), c2: at(125 * MIN) }, 10 * MIN, shards)).toBe(90 * MIN);
  });

  it('a merge child carries the later of its parents; a child of a child too; an unknown parent holds at 0', () => {
    const progress = { a: at(100 * MIN), b: at(70 * MIN), q: at(200 * MIN) };
    expect(sourcesWatermarkMs(progress, 0, [{ id: 'a' }, { id: 'b' }, { id: 'q' }, { id: 'm', parents: ['a', 'b'] }])).toBe(100 * MIN);
    expect(sourcesWatermarkMs({ a: progress.a, q: progress.q }, 0, [{ id: 'a' }, { id: 'q' }, { id: 'c', parents: ['a'] }, { id: 'g', parents: ['c'] }])).toBe(100 * MIN);
    expect(sourcesWatermarkMs(progress, 0, [{ id: 'q' }, { id: 'c', parents: ['gone'] }])).toBe(0);
  });

  it('all idle: the maximum, a child of idle parents idle too', () => {
    const progress = { p: at(100 * MIN, true), q: at(90 * MIN, true) };
    expect(sourcesWatermarkMs(progress, 10 * MIN, [{ id: 'p' }, { id: 'q' }, { id: 'c', parents: ['p'] }])).toBe(90 * MIN);
  });
});
