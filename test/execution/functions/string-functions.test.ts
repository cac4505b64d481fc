import { describe, expect, it } from 'vitest';
import { col, concat_ws, initcap, instr, left, locate, lpad, ltrim, repeat, replace, reverse, right, rpad, split_part, substring_index, translate, trim } from '../../../lib/plan/functions.js';
import { evaluator } from './evaluate-call.js';

const s = { s: 'string' };
const run = (c: Parameters<typeof evaluator>[0], ...v: unknown[]): unknown => evaluator(c, s).run(...v);

describe('string functions (Spark semantics)', () => {
  it('give NULL for a NULL string', () => {
    for (const c of [ltrim('s'), lpad('s', 3), instr('s', 'a'), replace('s', 'a', 'b'), reverse('s'), initcap('s'), translate('s', 'a', 'b'), substring_index('s', ',', 1)]) {
      expect(run(c, null)).toBeNull();
    }
  });

  it('trim only spaces (not tabs), as Spark does', () => {
    expect(run(trim('s'), ' \ta b\t ')).toBe('\ta b\t');
    expect(run(ltrim('s'), '  x  ')).toBe('x  ');
  });

  it('count characters as code points: padding, positions and reversal keep emoji whole', () => {
    expect(run(lpad('s', 5, '*'), '😀x')).toBe('***😀x');
    expect(run(rpad('s', 1), '😀x')).toBe('😀');
    expect(run(reverse('s'), 'a😀b')).toBe('b😀a');
    expect(run(instr('s', 'x'), '😀😀x')).toBe(3);
    expect(run(left('s', 1), '😀x')).toBe('😀');
    expect(run(right('s', 1), 'x😀')).toBe('😀');
  });

  it('pad with a repeated pattern, cut a longer string, and give "" for a length <= 0', () => {
    expect(run(lpad('s', 7, 'xy'), 'ab')).toBe('xyxyxab');
    expect(run(lpad('s', 2, 'xy'), 'abcd')).toBe('ab');
    expect(run(rpad('s', 0, 'x'), 'ab')).toBe('');
    expect(run(lpad('s', 5, ''), 'ab')).toBe('ab');
  });

  it('locate: 1-based from pos, 0 when absent or pos < 1, 1 for an empty needle', () => {
    expect(run(locate('b', 's'), 'abcb')).toBe(2);
    expect(run(locate('b', 's', 3), 'abcb')).toBe(4);
    expect(run(locate('b', 's', 0), 'abcb')).toBe(0);
    expect(run(locate('z', 's'), 'abcb')).toBe(0);
    expect(run(locate('', 's', 3), 'abcb')).toBe(1);
  });

  it('replace with an empty search leaves the string; translate deletes unmatched characters', () => {
    expect(run(replace('s', ''), 'abc')).toBe('abc');
    expect(run(replace('s', 'b'), 'abcb')).toBe('ac');
    expect(run(translate('s', 'abc', 'x'), 'aabbcc!')).toBe('xx!');
  });

  it('substring_index counts from the left (count > 0) or the right (count < 0)', () => {
    expect(run(substring_index('s', '.', 2), 'www.apache.org')).toBe('www.apache');
    expect(run(substring_index('s', '.', -2), 'www.apache.org')).toBe('apache.org');
    expect(run(substring_index('s', '.', 0), 'www.apache.org')).toBe('');
  });

  it('initcap splits words at spaces only', () => {
    expect(run(initcap('s'), 'hello wORLD-foo')).toBe('Hello World-foo');
  });

  it('repeat and split_part: negative counts give "", part 0 is an error', () => {
    expect(run(repeat('s', 3), 'ab')).toBe('ababab');
    expect(run(repeat('s', -1), 'ab')).toBe('');
    expect(run(split_part('s', ',', -1), 'a,b,c')).toBe('c');
    expect(run(split_part('s', ',', 9), 'a,b,c')).toBe('');
    expect(() => run(split_part('s', ',', 0), 'a,b,c')).toThrow(/INVALID_INDEX_OF_ZERO/);
  });

  it('concat_ws writes a double as Spark casts it to string', () => {
    const { run: r } = evaluator(concat_ws('/', col('d'), col('s')), { d: 'double', s: 'string' });
    expect(r(1e10, 'x')).toBe('1.0E10/x');
    expect(r(2, null)).toBe('2.0');
  });

  it('refuses a struct argument with Spark\'s DATATYPE_MISMATCH', () => {
    expect(() => evaluator(lpad('w', 3), { w: 'struct<a:int>' })).toThrow(/DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE/);
  });
});

describe('split (a Java regex, as Java\'s String.split with limit -1)', () => {
  it('keeps trailing empty strings, splits an empty pattern into characters, and honours a positive limit', async () => {
    const { split } = await import('../../../lib/plan/functions.js');
    expect(run(split('s', ','), 'a,b,,c,,')).toEqual(['a', 'b', '', 'c', '', '']);
    expect(run(split('s', ',', 2), 'a,b,,c')).toEqual(['a', 'b,,c']);
    expect(run(split('s', ''), '😀ab')).toEqual(['😀', 'a', 'b']);
    expect(run(split('s', '(?=y)'), 'xyzy')).toEqual(['x', 'yz', 'y']);
    expect(run(split('s', ','), '')).toEqual(['']);
    expect(run(split('s', ','), null)).toBeNull();
  });
});
