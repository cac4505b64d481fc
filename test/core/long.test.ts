import { describe, expect, it } from 'vitest';
import {
  addLong, longFromBigInt, longReplacer, longReviver, multiplyLong, negateLong, parseLongDigits, remainderLong, stringifyWithLongs, subtractLong,
} from '../../lib/core/long.js';
import { makeAggregateFunction } from '../../lib/execution/aggregate-functions.js';
import { newEvalContext } from '../../lib/execution/eval-context.js';

const MAX = 9223372036854775807n;
const MIN = -9223372036854775808n;

describe('exact 64-bit longs', () => {
  it('adds exactly past 2^53: 9007199254740991 + 1 + 1 is 9007199254740993', () => {
    expect(addLong(addLong(9007199254740991, 1), 1)).toBe(9007199254740993n);
    expect(addLong(9007199254740993n, -2)).toBe(9007199254740991); // back to a number: canonical
    expect(subtractLong(-9007199254740991, 2)).toBe(-9007199254740993n);
    expect(multiplyLong(4294967296, 1073741824)).toBe(4611686018427387904n);
  });

  it('raises ARITHMETIC_OVERFLOW past the int64 range, as Spark 4 with ANSI on', () => {
    expect(addLong(MAX - 1n, 1)).toBe(MAX);
    expect(() => addLong(MAX, 1)).toThrow(expect.objectContaining({ code: 'ARITHMETIC_OVERFLOW', errorClass: 'ARITHMETIC_OVERFLOW', retryable: false }));
    expect(() => subtractLong(MIN, 1)).toThrow(/ARITHMETIC_OVERFLOW/);
    expect(() => multiplyLong(4294967296, 4294967296 * 2)).toThrow(/ARITHMETIC_OVERFLOW/);
    expect(() => negateLong(MIN)).toThrow(/ARITHMETIC_OVERFLOW/);
    expect(negateLong(-MAX)).toBe(MAX);
    expect(remainderLong(MAX, 10)).toBe(7);
  });

  it('parses digits exactly, null beyond int64', () => {
    expect(parseLongDigits('9223372036854775807')).toBe(MAX);
    expect(parseLongDigits('-9223372036854775808')).toBe(MIN);
    expect(parseLongDigits('9223372036854775808')).toBeNull();
    expect(parseLongDigits('000000000000000000042')).toBe(42);
    expect(longFromBigInt(2n ** 53n - 1n)).toBe(2 ** 53 - 1);
  });

  it('writes JSON with longs as bare digits and carries them through repartition records', () => {
    expect(stringifyWithLongs({ total: 9007199254740993n, xs: [1n << 60n, null], s: 'a' })).toBe('{"total":9007199254740993,"xs":[1152921504606846976,null],"s":"a"}');
    expect(stringifyWithLongs({ n: 1, s: 'x' })).toBe('{"n":1,"s":"x"}');
    const text = JSON.stringify({ rows: [[MAX, 'k']] }, longReplacer);
    expect(JSON.parse(text, longReviver)).toEqual({ rows: [[MAX, 'k']] });
  });
});

describe('count is an exact long', () => {
  const count = makeAggregateFunction({ kind: 'aggregate', fn: 'count', args: [], distinct: false, ignoreNulls: false, type: 'long' }, newEvalContext());

  it('merges partial counts (state + batch, or stage 2 merging stage 1\'s partial counts) exactly past 2^53', () => {
    expect(count.merge(9007199254740991, 2)).toBe(9007199254740993n);
    expect(count.merge(9007199254740993n, 1)).toBe(9007199254740994n);
    expect(() => count.merge(MAX, 1)).toThrow(/ARITHMETIC_OVERFLOW/);
  });

  it('counts one more row exactly on a buffer at or past 2^53 - 1', () => {
    expect(count.update(9007199254740991, [])).toBe(9007199254740992n);
    expect(count.update(count.update(9007199254740991, []), [])).toBe(9007199254740993n);
    expect(count.update(41, [])).toBe(42);
  });
});
