import { describe, expect, it } from 'vitest';
import { abs, bround, ceil, col, floor, greatest, least, log, pmod, round, sqrt } from '../../../lib/plan/functions.js';
import { evaluator } from './evaluate-call.js';
import { Column } from '../../../lib/plan/column.js';

const schema = { i: 'int', l: 'long', d: 'double' };
const ev = (c: Parameters<typeof evaluator>[0]): ReturnType<typeof evaluator> => evaluator(c, schema);

describe('math functions (Spark semantics)', () => {
  it('round is HALF_UP on the decimal value (2.675 -> 2.68, 1.005 -> 1.01), bround HALF_EVEN', () => {
    const r2 = ev(round('d', 2));
    expect(r2.type).toBe('double');
    expect(r2.run(null, null, 2.675)).toBe(2.68);
    expect(r2.run(null, null, 1.005)).toBe(1.01);
    expect(ev(round('d')).run(null, null, -2.5)).toBe(-3);
    expect(ev(bround('d')).run(null, null, 2.5)).toBe(2);
    expect(ev(bround('d', 2)).run(null, null, 2.675)).toBe(2.68);
    expect(ev(round('d')).run(null, null, NaN)).toBeNaN();
    expect(Object.is(ev(round('d')).run(null, null, -0.4), 0)).toBe(true);
  });

  it('round keeps integral types, rounds them to a negative scale, and fails on overflow (ANSI)', () => {
    expect(ev(round('i', -1)).type).toBe('int');
    expect(ev(round('i', -1)).run(125, null, null)).toBe(130);
    expect(ev(round('l', -2)).run(null, -1250, null)).toBe(-1300);
    expect(ev(bround('l', -2)).run(null, -1250, null)).toBe(-1200);
    expect(() => ev(round('i', -1)).run(2147483647, null, null)).toThrow(/ARITHMETIC_OVERFLOW/);
  });

  it('refuses a scale that is not a constant', () => {
    expect(() => ev(new Column({ kind: 'call', fn: 'round', args: [col('d').expr, col('i').expr] }))).toThrow(/NON_FOLDABLE_INPUT/);
  });

  it('floor and ceil give longs; a double beyond the long range saturates as Java\'s (long) cast', () => {
    expect(ev(floor('d')).type).toBe('long');
    expect(ev(floor('d')).run(null, null, -1.5)).toBe(-2);
    expect(ev(ceil('d')).run(null, null, -1.5)).toBe(-1);
    expect(ev(floor('d')).run(null, null, 1e300)).toBe(2n ** 63n - 1n);
    expect(ev(floor('d')).run(null, null, NaN)).toBe(0);
    expect(ev(ceil('i')).run(7, null, null)).toBe(7);
  });

  it('abs overflows on the smallest int, as under ANSI mode', () => {
    expect(ev(abs('i')).run(-3, null, null)).toBe(3);
    expect(() => ev(abs('i')).run(-2147483648, null, null)).toThrow(/ARITHMETIC_OVERFLOW/);
    expect(ev(abs('l')).run(null, -(2n ** 60n), null)).toBe(2n ** 60n);
  });

  it('log is NULL for arguments <= 0; sqrt of a negative is NaN', () => {
    expect(ev(log('d')).run(null, null, 0)).toBeNull();
    expect(ev(log(10, 'd')).run(null, null, 1000)).toBeCloseTo(3, 12);
    expect(ev(sqrt('d')).run(null, null, -1)).toBeNaN();
  });

  it('greatest/least skip NULLs, widen to the common type, and rank NaN above all numbers', () => {
    const g = ev(greatest('i', 'd'));
    expect(g.type).toBe('double');
    expect(g.run(3, null, 2.5)).toBe(3);
    expect(g.run(null, null, 2.5)).toBe(2.5);
    expect(g.run(null, null, null)).toBeNull();
    expect(g.run(3, null, NaN)).toBeNaN();
    expect(ev(least('i', 'd')).run(3, null, NaN)).toBe(3);
    expect(() => evaluator(greatest('i', 's'), { i: 'int', s: 'array<int>' })).toThrow(/DATA_DIFF_TYPES/);
  });

  it('pmod is never negative; a zero divisor raises DIVIDE_BY_ZERO', () => {
    expect(ev(pmod('i', 4)).run(-7, null, null)).toBe(1);
    expect(ev(pmod('d', 2)).run(null, null, -1.5)).toBe(0.5);
    expect(() => ev(pmod('i', 0)).run(-7, null, null)).toThrow(/DIVIDE_BY_ZERO/);
  });
});

describe('format_number', () => {
  it('groups thousands, rounds HALF_EVEN on the exact binary value as Java\'s DecimalFormat, keeps a negative zero\'s sign', async () => {
    const { format_number } = await import('../../../lib/plan/functions.js');
    const f = (x: number, d: number): unknown => ev(format_number('d', d)).run(null, null, x);
    expect(f(1234567.891, 2)).toBe('1,234,567.89');
    expect(f(0.125, 2)).toBe('0.12');
    expect(f(2.675, 2)).toBe('2.67');
    expect(f(-0.001, 2)).toBe('-0.00');
    expect(f(1.5, -1)).toBeNull();
  });
});
