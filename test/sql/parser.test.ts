/**
 * The SQL parser: Spark's operator precedence, literals, names, the generic function call, and
 * Spark's syntax error texts (checked against PySpark 4.0.1's messages).
 */
import { describe, expect, it } from 'vitest';
import { parseExpression, parseStatement } from '../../lib/sql/index.js';
import { defaultName, type Expr } from '../../lib/plan/expressions.js';

/** A compact rendering of the tree: calls as fn(args), columns bare, literals as value:type. */
function tree(e: Expr): string {
  switch (e.kind) {
    case 'column': return e.name;
    case 'literal': return typeof e.value === 'string' ? JSON.stringify(e.value) : `${String(e.value)}:${String(e.type)}`;
    case 'star': return e.qualifier ? `${e.qualifier}.*` : '*';
    case 'alias': return `${tree(e.child)} AS ${e.name}`;
    case 'call': return `${e.fn}(${e.args.map(tree).join(', ')})`;
    case 'cast': return `${e.try ? 'try_cast' : 'cast'}(${tree(e.child)} AS ${JSON.stringify(e.to)})`;
    case 'case': return `case(${e.branches.map(([c, v]) => `${tree(c)} => ${tree(v)}`).join('; ')}${e.otherwise ? `; else ${tree(e.otherwise)}` : ''})`;
    case 'timeWindow': return `timeWindow(${tree(e.timeColumn)}, ${e.windowMicros}, ${e.slideMicros}, ${e.startMicros})`;
    case 'sessionWindow': return `sessionWindow(${tree(e.timeColumn)}, ${tree(e.gap)})`;
    case 'aggregate': return `agg:${e.fn}(${e.distinct ? 'DISTINCT ' : ''}${e.args.map(tree).join(', ')}${e.ignoreNulls ? ' IGNORE NULLS' : ''})`;
  }
}
const p = (sql: string): string => tree(parseExpression(sql));

function errorOf(f: () => unknown): Error & { errorClass?: string } {
  try {
    f();
  } catch (e) {
    return e as Error & { errorClass?: string };
  }
  throw new Error('expected an error');
}

describe('operator precedence (Spark SqlBaseParser)', () => {
  it.each([
    ['1 + 2 * 3 - 4 / 2', '-(+(1:int, *(2:int, 3:int)), /(4:int, 2:int))'],
    ['2 - 3 - 4', '-(-(2:int, 3:int), 4:int)'],
    ['7 % 3 * 2', '*(%(7:int, 3:int), 2:int)'],
    ['5 DIV 2 + 1', '+(div(5:int, 2:int), 1:int)'],
    ['-2 * 3', '*(-2:int, 3:int)'],
    ['-a * 3', '*(-(a), 3:int)'],
    ['NOT true AND false', 'and(not(true:boolean), false:boolean)'],
    ['true OR false AND false', 'or(true:boolean, and(false:boolean, false:boolean))'],
    ['NOT a = b', 'not(=(a, b))'],
    ['! a', 'not(a)'],
    ['1 < 2 = true', '=(<(1:int, 2:int), true:boolean)'],
    ['1 + 1 = 2', '=(+(1:int, 1:int), 2:int)'],
    ['a <> b OR a == b AND a <=> b', 'or(!=(a, b), and(=(a, b), <=>(a, b)))'],
    // `||` sits with + and -, left to right: (1 + 2) || 3 is '33' in Spark.
    ['1 + 2 || 3', 'concat(+(1:int, 2:int), 3:int)'],
    ['2 * 3 || 4', 'concat(*(2:int, 3:int), 4:int)'],
    ['1 | 2 ^ 3 & 4 + 5', '|(1:int, ^(2:int, &(3:int, +(4:int, 5:int))))'],
    ['~1 + 1', '+(~(1:int), 1:int)'],
    ['a + 1 BETWEEN 0 AND 5 AND true', 'and(between(+(a, 1:int), 0:int, 5:int), true:boolean)'],
    ['a NOT BETWEEN 1 AND 2', 'not(between(a, 1:int, 2:int))'],
    ['a IN (1, 2 + 1) OR a NOT IN (4)', 'or(in(a, 1:int, +(2:int, 1:int)), not(in(a, 4:int)))'],
    ["u LIKE 'a%' AND u NOT LIKE 'b%'", 'and(like(u, "a%"), not(like(u, "b%")))'],
    ["u ILIKE 'A%' ESCAPE '!'", 'ilike(u, "A%", "!")'],
    ["u RLIKE '^a' OR u REGEXP 'b$'", 'or(rlike(u, "^a"), rlike(u, "b$"))'],
    ['a IS NULL OR a IS NOT NULL', 'or(isnull(a), isnotnull(a))'],
    ['a = 1 IS NULL', 'isnull(=(a, 1:int))'],
    ['a IS TRUE', '<=>(a, true:boolean)'],
    ['a IS NOT FALSE', 'not(<=>(a, false:boolean))'],
    ['a IS DISTINCT FROM b', 'not(<=>(a, b))'],
    ['a IS NOT DISTINCT FROM b', '<=>(a, b)'],
  ])('%s', (sql, expected) => {
    expect(p(sql)).toBe(expected);
  });
});

describe('literals and names', () => {
  it('numbers take Spark\'s types (int, then bigint; suffixes L, S, Y, D)', () => {
    expect(p('2147483647')).toBe('2147483647:int');
    expect(p('2147483648')).toBe('2147483648:long');
    expect(p('-2147483648')).toBe('-2147483648:int');
    expect(p('10L')).toBe('10:long');
    expect(p('5Y + 5S')).toBe('+(5:int, 5:int)');
    expect(p('0.5D')).toBe('0.5:double');
    expect(p('1e3')).toBe('1000:double');
    const big = parseExpression('9223372036854775807');
    expect(big).toEqual({ kind: 'literal', value: 9223372036854775807n, type: 'long' });
  });

  it('strings in single or double quotes, with escapes, adjacent ones concatenated', () => {
    expect(parseExpression(`'a' "b" 'c'`)).toEqual({ kind: 'literal', value: 'abc', type: 'string' });
    expect(parseExpression(String.raw`'it\'s\ta'`)).toEqual({ kind: 'literal', value: "it's\ta", type: 'string' });
    expect(parseExpression(String.raw`"say \"hi\""`)).toEqual({ kind: 'literal', value: 'say "hi"', type: 'string' });
    // LIKE's escapes survive: \% stays two characters.
    expect(parseExpression(String.raw`'100\%'`)).toEqual({ kind: 'literal', value: '100\\%', type: 'string' });
  });

  it('backquoted names, dotted struct access, reserved words after a dot, stars', () => {
    expect(p('`my col` + `a``b`')).toBe('+(my col, a`b)');
    expect(p('w.start')).toBe('w.start');
    expect(p('e.w.end')).toBe('e.w.end');
    expect(p('`select`')).toBe('select');
    expect(p('*')).toBe('*');
    expect(p('e.*')).toBe('e.*');
    expect(p('(a + 1).x')).toBe('get_field(+(a, 1:int), "x")');
  });

  it('NULL, booleans, TIMESTAMP and INTERVAL literals', () => {
    expect(p('NULL')).toBe('null:null');
    expect(p('TRUE AND false')).toBe('and(true:boolean, false:boolean)');
    expect(p("TIMESTAMP '2024-01-01 00:00:00'")).toBe('1704067200000000:timestamp');
    const minutes5 = 5 * 60 * 1_000_000;
    expect(p('INTERVAL 5 MINUTES')).toBe(`${minutes5}:interval`);
    expect(p("INTERVAL '5' MINUTE")).toBe(`${minutes5}:interval`);
    expect(p("INTERVAL '5 minutes'")).toBe(`${minutes5}:interval`);
    expect(p('INTERVAL 1 HOUR 30 MINUTES')).toBe(`${90 * 60 * 1_000_000}:interval`);
    expect(p('ts + INTERVAL 10 SECONDS')).toBe('+(ts, 10000000:interval)');
  });

  it('comments are skipped', () => {
    expect(p('a -- the rest\n + /* inline */ 1')).toBe('+(a, 1:int)');
  });

  it('aliases: AS name, bare name, backquoted', () => {
    expect(p('amount * 2 AS x')).toBe('*(amount, 2:int) AS x');
    expect(p('amount x')).toBe('amount AS x');
    expect(p('amount AS `my x`')).toBe('amount AS my x');
  });
});

describe("unaliased expressions take Spark's names", () => {
  it.each([
    ['amount * 2', '(amount * 2)'],
    ['-amount', '(- amount)'],
    ['NOT a', '(NOT a)'],
    ['a IS NULL', '(a IS NULL)'],
    ['a IS NOT NULL', '(a IS NOT NULL)'],
    ['a <> 1', '(NOT (a = 1))'],
    ['a IN (1, 2)', '(a IN (1, 2))'],
    ['a <=> 1', '(a <=> 1)'],
    ["user LIKE 'a%'", 'user LIKE a%'],
    ["user RLIKE '^a'", 'RLIKE(user, ^a)'],
    ['count(*)', 'count(1)'],
    ['window(ts, "5 minutes")', 'window'],
  ])('%s', (sql, name) => {
    expect(defaultName(parseExpression(sql))).toBe(name);
  });
});

describe('functions', () => {
  it('a function call stays generic, lower-cased, for the binder to resolve', () => {
    expect(p('Upper(name)')).toBe('upper(name)');
    expect(p('my_udf(a, 1, \'x\')')).toBe('my_udf(a, 1:int, "x")');
    expect(p('current_timestamp()')).toBe('current_timestamp()');
    expect(p('CURRENT_TIMESTAMP')).toBe('current_timestamp()');
  });

  it('aggregates become aggregate nodes: count(*), DISTINCT, first(x, true)', () => {
    expect(p('count(*)')).toBe('agg:count()');
    expect(p('COUNT(1)')).toBe('agg:count(1:int)');
    expect(p('count(DISTINCT a, b)')).toBe('agg:count(DISTINCT a, b)');
    expect(p('sum(amount * 2)')).toBe('agg:sum(*(amount, 2:int))');
    expect(p('first(x, true)')).toBe('agg:first(x IGNORE NULLS)');
    expect(p('last(x) IGNORE NULLS')).toBe('agg:last(x IGNORE NULLS)');
    expect(p('last(x) RESPECT NULLS')).toBe('agg:last(x)');
    expect(p('max(a) - min(a)')).toBe('-(agg:max(a), agg:min(a))');
  });

  it('window() and session_window() become window nodes with Spark\'s checks', () => {
    expect(p('window(ts, "5 minutes")')).toBe(`timeWindow(ts, ${300e6}, ${300e6}, 0)`);
    expect(p("window(ts, '10 minutes', '5 minutes', '1 minute')")).toBe(`timeWindow(ts, ${600e6}, ${300e6}, ${60e6})`);
    expect(p('window(ts, INTERVAL 1 HOUR)')).toBe(`timeWindow(ts, ${3600e6}, ${3600e6}, 0)`);
    expect(p("session_window(ts, '30 seconds')")).toBe(`sessionWindow(ts, ${30e6}:interval)`);
    expect(p("session_window(ts, CASE WHEN u = 'a' THEN INTERVAL 5 SECONDS ELSE INTERVAL 9 SECONDS END)"))
      .toBe(`sessionWindow(ts, case(=(u, "a") => 5000000:interval; else 9000000:interval))`);
    expect(errorOf(() => p("window(ts, '5 minutes', '10 minutes')")).message).toContain('must be less than or equal to the windowDuration');
    expect(errorOf(() => p('window(ts, amount)')).message).toMatch(/^The duration and time inputs to window must be an integer, long or string literal\./);
    expect(errorOf(() => p('window(ts)')).errorClass).toBe('WRONG_NUM_ARGS.WITHOUT_SUGGESTION');
  });

  it('CASE (searched and simple), CAST, TRY_CAST, ::', () => {
    expect(p("CASE WHEN a > 1 THEN 'x' WHEN a > 0 THEN 'y' ELSE 'z' END"))
      .toBe('case(>(a, 1:int) => "x"; >(a, 0:int) => "y"; else "z")');
    expect(p("CASE a WHEN 1 THEN 'one' END")).toBe('case(=(a, 1:int) => "one")');
    expect(p('CAST(a AS bigint)')).toBe('cast(a AS "long")');
    expect(p('TRY_CAST(a AS int)')).toBe('try_cast(a AS "int")');
    expect(p('CAST(a AS array<struct<x:int,y:string>>)')).toBe('cast(a AS {"kind":"array","element":{"kind":"struct","fields":[{"name":"x","type":"int"},{"name":"y","type":"string"}]}})');
    expect(p('a::string || b')).toBe('concat(cast(a AS "string"), b)');
    const unknown = errorOf(() => p('CAST(a AS foo)'));
    expect(unknown.errorClass).toBe('UNSUPPORTED_DATATYPE');
    expect(unknown.message).toContain('[UNSUPPORTED_DATATYPE] Unsupported data type "FOO".');
  });
});

describe("Spark's syntax errors", () => {
  // Texts as PySpark 4.0.1 prints them (less its leading newline).
  it('points at the token where parsing stopped, with line and position', () => {
    expect(errorOf(() => parseStatement('SELECT (user FROM events')).message).toBe(
      "[PARSE_SYNTAX_ERROR] Syntax error at or near 'FROM'. SQLSTATE: 42601 (line 1, pos 13)\n\n== SQL ==\nSELECT (user FROM events\n-------------^^^",
    );
    expect(errorOf(() => parseExpression('amount +')).message).toBe(
      '[PARSE_SYNTAX_ERROR] Syntax error at or near end of input. SQLSTATE: 42601 (line 1, pos 8)\n\n== SQL ==\namount +\n--------^^^',
    );
    expect(errorOf(() => parseStatement("SELECT 'abc FROM events")).message).toMatch(/^\[PARSE_SYNTAX_ERROR\] Syntax error at or near '''\. SQLSTATE: 42601 \(line 1, pos 7\)/);
    expect(errorOf(() => parseStatement('SELECT user FROM events x y z')).message).toMatch(/^\[PARSE_SYNTAX_ERROR\] Syntax error at or near 'y'\. SQLSTATE: 42601 \(line 1, pos 26\)/);
  });

  it('counts lines and positions within the line', () => {
    const e = errorOf(() => parseStatement('SELECT user\nFROM events\nWHERE amount >'));
    expect(e.message).toBe(
      '[PARSE_SYNTAX_ERROR] Syntax error at or near end of input. SQLSTATE: 42601 (line 3, pos 14)\n\n== SQL ==\nSELECT user\nFROM events\nWHERE amount >\n--------------^^^',
    );
    expect(e.errorClass).toBe('PARSE_SYNTAX_ERROR');
  });

  it('a trailing comma before FROM is TRAILING_COMMA_IN_SELECT', () => {
    const e = errorOf(() => parseStatement('SELECT user, FROM events'));
    expect(e.errorClass).toBe('TRAILING_COMMA_IN_SELECT');
    expect(e.message).toBe('[TRAILING_COMMA_IN_SELECT] Trailing comma detected in SELECT clause. Remove the trailing comma before the FROM clause. SQLSTATE: 42601');
  });

  it('an unclosed block comment', () => {
    expect(errorOf(() => parseExpression('a /* never closed')).errorClass).toBe('UNCLOSED_BRACKETED_COMMENT');
  });

  it('trailing tokens after a complete expression are an error, not ignored', () => {
    expect(errorOf(() => parseExpression('a b c')).message).toMatch(/at or near 'c'/);
    expect(errorOf(() => parseExpression('1 FROM')).message).toMatch(/at or near 'FROM'/);
  });

  it('refuses what Sluice does not run, naming it', () => {
    expect(errorOf(() => parseStatement('SELECT a FROM t LIMIT 1')).message).toContain('does not support LIMIT');
    expect(errorOf(() => parseExpression('row_number() OVER (ORDER BY a)')).message).toContain('window functions (OVER)');
    expect(errorOf(() => parseExpression('a IN (SELECT b FROM t)')).message).toContain('IN (subquery)');
    expect(errorOf(() => parseStatement('SELECT a FROM t UNION SELECT a FROM u')).message).toContain('UNION');
    expect(errorOf(() => parseStatement('WITH x AS (SELECT 1) SELECT * FROM x')).message).toContain('WITH statements');
  });
});

describe('SELECT statements', () => {
  it('parses every clause', () => {
    const sql = `SELECT window(ts, "5 minutes") AS w, user, count(*) AS n
      FROM events AS e LEFT JOIN users u ON e.user = u.id
      WHERE amount > 100 GROUP BY window(ts, "5 minutes"), user HAVING count(*) > 1 ORDER BY n DESC, user;`;
    const q = parseStatement(sql);
    expect(q.items.map(tree)).toEqual([`timeWindow(ts, ${300e6}, ${300e6}, 0) AS w`, 'user', 'agg:count() AS n']);
    expect(q.from).toEqual({
      kind: 'join', joinType: 'left_outer', using: null,
      left: { kind: 'view', name: 'events', alias: 'e', position: sql.indexOf('events AS') },
      right: { kind: 'view', name: 'users', alias: 'u', position: sql.indexOf('users u') },
      on: parseExpression('e.user = u.id'),
    });
    expect(tree(q.where!)).toBe('>(amount, 100:int)');
    expect(q.groupBy!.map(tree)).toEqual([`timeWindow(ts, ${300e6}, ${300e6}, 0)`, 'user']);
    expect(tree(q.having!)).toBe('>(agg:count(), 1:int)');
    expect(q.orderBy.map((o) => `${tree(o.expr)} ${o.descending ? 'desc' : 'asc'}`)).toEqual(['n desc', 'user asc']);
  });

  it('join kinds, USING, comma joins and subqueries', () => {
    const kinds = ['JOIN', 'INNER JOIN', 'LEFT OUTER JOIN', 'RIGHT JOIN', 'FULL OUTER JOIN', 'LEFT SEMI JOIN', 'LEFT ANTI JOIN', 'CROSS JOIN']
      .map((j) => parseStatement(`SELECT * FROM a ${j} b`).from)
      .map((r) => (r?.kind === 'join' ? r.joinType : null));
    expect(kinds).toEqual(['inner', 'inner', 'left_outer', 'right_outer', 'full_outer', 'left_semi', 'left_anti', 'cross']);
    const using = parseStatement('SELECT * FROM a JOIN b USING (k, `t`)').from;
    expect(using?.kind === 'join' && using.using).toEqual(['k', 't']);
    const sub = parseStatement('SELECT x FROM (SELECT a AS x FROM t) s').from;
    expect(sub?.kind).toBe('subquery');
    expect(sub?.kind === 'subquery' && sub.alias).toBe('s');
  });

  it('keywords are case-insensitive', () => {
    expect(parseStatement('select DISTINCT a from t where a is not null').distinct).toBe(true);
  });
});
