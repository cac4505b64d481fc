import { describe, expect, it } from 'vitest';
import { MemoryStream } from '../../lib/sources/memory-stream.js';
import { toSchema } from '../../lib/api/session.js';

describe('MemoryStream', () => {
  const schema = toSchema('a string, b double, c timestamp');

  it('returns exactly the added values, in fresh arrays, for any range and on replay', () => {
    const stream = new MemoryStream(schema);
    const first = [['x', 1.5, 1_714_521_600_000_000], ['y', -0, null], [null, Number.NaN, 3]];
    const second = [['z', 2, 4]];
    const ragged = [['short'], ['long', 1, 2, 'extra']];
    stream.addData(first);
    stream.addData([]);
    stream.addData(second);
    stream.addData(ragged);
    first[0]![0] = 'mutated by the caller';
    const all = stream.getBatch(null, 4);
    expect(all).toEqual([['x', 1.5, 1_714_521_600_000_000], ['y', -0, null], [null, Number.NaN, 3], ['z', 2, 4], ['short'], ['long', 1, 2, 'extra']]);
    expect(Object.is(all[1]![1], -0)).toBe(true);
    all[3]![0] = 'mutated by an operator';
    all[4]![0] = 'mutated by an operator';
    expect(stream.getBatch(2, 4)).toEqual([['z', 2, 4], ['short'], ['long', 1, 2, 'extra']]);
    expect(stream.getBatch(1, 2)).toEqual([]);
    expect(stream.latestOffset()).toBe(4);
  });
});
