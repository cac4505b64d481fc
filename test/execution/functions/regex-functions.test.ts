import { describe, expect, it } from 'vitest';
import { col, regexp_extract, regexp_replace, regexp_extract_all } from '../../../lib/plan/functions.js';
import { translateJavaRegex, parseJavaReplacement } from '../../../lib/execution/functions/java-regex.js';
import { evaluator } from './evaluate-call.js';

const run = (c: Parameters<typeof evaluator>[0], ...v: unknown[]): unknown => evaluator(c, { s: 'string' }).run(...v);

describe('Java regular expressions on JavaScript (Spark uses java.util.regex)', () => {
  it('translates POSIX classes to ASCII classes and keeps Unicode properties', () => {
    expect(run(regexp_replace('s', '\\p{Alpha}', '_'), 'aÄ1')).toBe('_Ä1');
    expect(run(regexp_replace('s', '\\p{L}', '_'), 'aÄ1')).toBe('__1');
    expect(run(regexp_replace('s', '\\p{Punct}+', ''), 'a.b,c!')).toBe('abc');
  });

  it('reads $ as Java does: also before a final line terminator', () => {
    expect(run(col('s').rlike('c$'), 'abc\n')).toBe(true);
    expect(run(col('s').rlike('c$'), 'abc\nd')).toBe(false);
  });

  it('quotes \\Q...\\E, escapes any non-letter, and takes leading inline flags', () => {
    expect(run(regexp_replace('s', '\\Q.*\\E', '!'), 'a.*b')).toBe('a!b');
    expect(run(regexp_replace('s', '\\@', '#'), 'a@b')).toBe('a#b');
    expect(run(col('s').rlike('(?i)ABC'), 'xabcx')).toBe(true);
  });

  it('uses Java\'s ASCII \\s (JavaScript\'s also matches a no-break space)', () => {
    expect(run(regexp_replace('s', '\\s', '_'), 'a b\u00a0c')).toBe('a_b\u00a0c');
  });

  it('refuses what JavaScript cannot express, with Spark\'s error class', () => {
    expect(() => translateJavaRegex('a*+', 'rlike')).toThrow(/INVALID_PARAMETER_VALUE.PATTERN.*Possessive/);
    expect(() => translateJavaRegex('(?>a)', 'rlike')).toThrow(/Atomic/);
    expect(() => translateJavaRegex('[a-z&&[^b]]', 'rlike')).toThrow(/intersection|Nested/);
    expect(translateJavaRegex('\\p{Alpha}+', 'rlike').source).toBe('[a-zA-Z]+');
  });

  it('reads replacements as Java: $n takes the longest existing group, \\$ is a dollar, ${name} a named group', () => {
    expect(parseJavaReplacement('$12', 1, 'f')).toEqual([{ group: 1 }, '2']);
    expect(parseJavaReplacement('$12', 12, 'f')).toEqual([{ group: 12 }]);
    expect(parseJavaReplacement('\\$1', 1, 'f')).toEqual(['$1']);
    expect(() => parseJavaReplacement('$x', 1, 'f')).toThrow(/Illegal group reference/);
    expect(run(regexp_replace('s', '(?<w>[a-z]+)', '${w}!'), 'ab 1')).toBe('ab! 1');
    expect(run(regexp_replace('s', '(\\d+)', '<$1>'), 'a1b22')).toBe('a<1>b<22>');
  });

  it('regexp_extract: "" when nothing matches or the group did not take part; an error for a group that does not exist', () => {
    expect(run(regexp_extract('s', '(\\d+)-(\\d+)', 2), '10-20')).toBe('20');
    expect(run(regexp_extract('s', 'x(y)?', 1), 'x')).toBe('');
    expect(run(regexp_extract('s', '\\d', 0), 'abc')).toBe('');
    expect(() => run(regexp_extract('s', '(\\d)', 2), 'a1')).toThrow(/REGEX_GROUP_INDEX/);
    expect(run(regexp_extract_all('s', '\\d+', 0), 'a1b22')).toEqual(['1', '22']);
  });

  it('LIKE: _ and %, escapes, whole-string match, NULL in NULL out', () => {
    expect(run(col('s').like('a_c%'), 'abcdef')).toBe(true);
    expect(run(col('s').like('a\\%'), 'a%')).toBe(true);
    expect(run(col('s').like('a\\%'), 'ab')).toBe(false);
    expect(run(col('s').like('b'), 'abc')).toBe(false);
    expect(run(col('s').ilike('ABC'), 'abc')).toBe(true);
    expect(run(col('s').like('a%'), null)).toBeNull();
    expect(() => run(col('s').like('a\\b'), 'a')).toThrow(/ESC_IN_THE_MIDDLE/);
  });
});
