import { describe, expect, it } from 'vitest';
import { col, equal_null, isnan, nanvl, nullif, nvl, nvl2, zeroifnull } from '../../../lib/plan/functions.js';
import { evaluator } from './evaluate-call.js';

const schema = { a: 'int', b: 'int', d: 'double', s: 'string' };
const ev = (c: Parameters<typeof evaluator>[0]): ReturnType<typeof evaluator> => evaluator(c, schema);

describe('NULL-handling functions and IN (Spark semantics)', () => {
  it('nvl takes the first non-NULL, widened to the common type', () => {
    const e = ev(nvl('a', 'd'));
    expect(e.type).toBe('double');
    expect(e.run(null, null, 1.5, null)).toBe(1.5);
    expect(e.run(2, null, 1.5, null)).toBe(2);
  });

  it('nvl2 picks by NULL-ness; nullif gives NULL when equal', () => {
    expect(ev(nvl2('a', 's', 'b')).run(1, 9, null, 'x')).toBe('x');
    expect(() => ev(nvl2('a', 's', 'b'))).not.toThrow();
    expect(ev(nvl2('a', 'b', 'b')).run(null, 9, null, null)).toBe(9);
    expect(ev(nullif('a', 'b')).run(3, 3, null, null)).toBeNull();
    expect(ev(nullif('a', 'b')).run(3, null, null, null)).toBe(3);
    expect(ev(nullif('a', 'd')).run(3, null, 3, null)).toBeNull();
  });

  it('equal_null is NULL-safe equality; isnan is never NULL; nanvl replaces NaN only', () => {
    expect(ev(equal_null('a', 'b')).run(null, null, null, null)).toBe(true);
    expect(ev(equal_null('a', 'b')).run(1, null, null, null)).toBe(false);
    expect(ev(isnan('d')).run(null, null, null, null)).toBe(false);
    expect(ev(isnan('d')).run(null, null, NaN, null)).toBe(true);
    expect(ev(nanvl('d', 'a')).run(7, null, NaN, null)).toBe(7);
    expect(ev(nanvl('d', 'a')).run(7, null, null, null)).toBeNull();
    expect(ev(zeroifnull('a')).run(null, null, null, null)).toBe(0);
  });

  it('isin: true on a match, NULL (not false) when nothing matches but the list holds a NULL', () => {
    expect(ev(col('a').isin(1, 2)).run(2, null, null, null)).toBe(true);
    expect(ev(col('a').isin(1, 2)).run(3, null, null, null)).toBe(false);
    expect(ev(col('a').isin(1, null)).run(3, null, null, null)).toBeNull();
    expect(ev(col('a').isin([1, 2])).run(null, null, null, null)).toBeNull();
    expect(ev(col('a').isin(1.5, 3)).run(3, null, null, null)).toBe(true);
  });
});
