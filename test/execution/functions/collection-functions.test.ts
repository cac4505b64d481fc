import { describe, expect, it } from 'vitest';
import { col, array_contains, array_distinct, array_join, array_position, array_union, element_at, size, slice, sort_array, try_element_at } from '../../../lib/plan/functions.js';
import { evaluator } from './evaluate-call.js';

const schema = { xs: 'array<int>', ys: 'array<long>', v: 'int' };
const ev = (c: Parameters<typeof evaluator>[0]): ReturnType<typeof evaluator> => evaluator(c, schema);

describe('array functions (Spark semantics)', () => {
  it('array_contains: NULL when not found but the array holds a NULL', () => {
    expect(ev(array_contains('xs', 2)).run([1, 2], null, null)).toBe(true);
    expect(ev(array_contains('xs', 3)).run([1, null], null, null)).toBeNull();
    expect(ev(array_contains('xs', 3)).run([1], null, null)).toBe(false);
    expect(ev(array_contains('xs', col('v'))).run([1], null, null)).toBeNull();
  });

  it('element_at: 1-based, negative from the end, out of range an error (try_element_at: NULL)', () => {
    expect(ev(element_at('xs', -1)).run([1, 2, 3], null, null)).toBe(3);
    expect(() => ev(element_at('xs', 5)).run([1], null, null)).toThrow(/INVALID_ARRAY_INDEX_IN_ELEMENT_AT/);
    expect(() => ev(element_at('xs', 0)).run([1], null, null)).toThrow(/INVALID_INDEX_OF_ZERO/);
    expect(ev(try_element_at('xs', 5)).run([1], null, null)).toBeNull();
  });

  it('distinct keeps first-seen order and one NULL; union widens the element type', () => {
    expect(ev(array_distinct('xs')).run([3, 1, 3, null, null], null, null)).toEqual([3, 1, null]);
    const u = ev(array_union('xs', 'ys'));
    expect(u.type).toEqual({ kind: 'array', element: 'long' });
    expect(u.run([1, 2], [2, 3], null)).toEqual([1, 2, 3]);
  });

  it('sort_array: NULLs first ascending, last descending', () => {
    expect(ev(sort_array('xs')).run([2, null, 1], null, null)).toEqual([null, 1, 2]);
    expect(ev(sort_array('xs', false)).run([2, null, 1], null, null)).toEqual([2, 1, null]);
  });

  it('array_join skips NULLs unless given a replacement; array_position is 1-based, 0 when absent', () => {
    expect(ev(array_join('xs', ',')).run([1, null, 2], null, null)).toBe('1,2');
    expect(ev(array_join('xs', ',', '?')).run([1, null, 2], null, null)).toBe('1,?,2');
    expect(ev(array_position('xs', col('v'))).run([5, 6], null, 6)).toBe(2);
    expect(ev(array_position('xs', col('v'))).run([5, 6], null, 7)).toBe(0);
  });

  it('slice: start 0 or a negative length is an error; size(NULL) is NULL under ANSI mode', () => {
    expect(ev(slice('xs', -2, 5)).run([1, 2, 3], null, null)).toEqual([2, 3]);
    expect(() => ev(slice('xs', 0, 1)).run([1], null, null)).toThrow(/INVALID_PARAMETER_VALUE.START/);
    expect(ev(size('xs')).run(null, null, null)).toBeNull();
  });
});
