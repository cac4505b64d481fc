/**
 * session.sql over temp views, and the SQL-string forms of the DataFrame API, on static
 * DataFrames (collect()): views, aliases, GROUP BY ordinal/alias, HAVING, names of unaliased
 * expressions, and Spark's analysis errors (texts from PySpark 4.0.1).
 */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { Column } from '../../lib/plan/column.js';
import { col, expr } from '../../lib/plan/functions.js';

function setup() {
  const session = new SluiceSession();
  const events = session.createDataFrame(
    [['a', 1, 10], ['b', 2, 250], ['a', 3, 120], [null, 4, 300], ['c', 5, null]],
    'user string, id int, amount long',
  );
  events.createOrReplaceTempView('events');
  return { session, events };
}

/** Rows as a multiset: both sides sorted by their JSON text. */
const sorted = (rows: unknown[][]): string[] => rows.map((r) => JSON.stringify(r)).sort();

function errorOf(f: () => unknown): Error & { errorClass?: string } {
  try {
    f();
  } catch (e) {
    return e as Error & { errorClass?: string };
  }
  throw new Error('expected an error');
}

describe('session.sql over temp views', () => {
  it('SELECT with WHERE, aliases and expressions', () => {
    const { session } = setup();
    const df = session.sql("SELECT user, amount * 2 AS x, CASE WHEN amount > 100 THEN 'big' ELSE 'small' END AS size FROM events WHERE amount IS NOT NULL AND user <> 'b'");
    expect(df.columns).toEqual(['user', 'x', 'size']);
    expect(sorted(df.collect())).toEqual(sorted([['a', 20, 'small'], ['a', 240, 'big']]));
  });

  it('view names and qualifiers are case-insensitive; the view name qualifies its columns', () => {
    const { session } = setup();
    expect(sorted(session.sql('select EVENTS.user from Events where events.id = 1').collect())).toEqual(sorted([['a']]));
    expect(sorted(session.sql('select e2.user from Events e2 where E2.id = 1').collect())).toEqual(sorted([['a']]));
    expect(session.sql('SELECT e.* FROM events AS e').columns).toEqual(['user', 'id', 'amount']);
  });

  it('GROUP BY with HAVING, by ordinal and by select alias', () => {
    const { session } = setup();
    const expected = sorted([['a', 2, 130]]);
    expect(sorted(session.sql('SELECT user, count(*) AS n, sum(amount) AS total FROM events GROUP BY user HAVING count(*) > 1').collect())).toEqual(expected);
    expect(sorted(session.sql('SELECT user AS u, count(*) AS n, sum(amount) AS total FROM events GROUP BY 1 HAVING n > 1').collect())).toEqual(expected);
    expect(sorted(session.sql('SELECT upper(user) AS u, count(*) AS n FROM events GROUP BY u').collect())).toEqual(sorted([[null, 1], ['A', 2], ['B', 1], ['C', 1]]));
  });

  it('expressions over keys and aggregates in the select list', () => {
    const { session } = setup();
    const df = session.sql('SELECT max(amount) - min(amount) AS spread, count(DISTINCT user) AS users, amount > 100 AS big FROM events GROUP BY amount > 100');
    expect(df.columns).toEqual(['spread', 'users', 'big']);
    expect(sorted(df.collect())).toEqual(sorted([[null, 1, null], [0, 1, false], [180, 2, true]]));
  });

  it('global aggregation without GROUP BY', () => {
    const { session } = setup();
    expect(session.sql('SELECT count(*), count(user) AS users, avg(amount) AS mean FROM events').collect()).toEqual([[5, 4, 170]]);
    expect(session.sql('SELECT count(*) FROM events').columns).toEqual(['count(1)']);
  });

  it('unaliased expressions get Spark\'s names', () => {
    const { session } = setup();
    expect(session.sql('SELECT user, amount * 2, -amount, amount IS NULL, NOT id = 1, id <> 1, sum(id) FROM events GROUP BY user, amount, id').columns)
      .toEqual(['user', '(amount * 2)', '(- amount)', '(amount IS NULL)', '(NOT (id = 1))', '(NOT (id = 1))', 'sum(id)']);
  });

  it('joins two views, with ON and with USING', () => {
    const { session } = setup();
    session.createDataFrame([['a', 'Ann'], ['b', 'Bob']], 'user string, name string').createOrReplaceTempView('users');
    expect(sorted(session.sql('SELECT e.id, u.name FROM events e JOIN users u ON e.user = u.user').collect())).toEqual(sorted([[1, 'Ann'], [2, 'Bob'], [3, 'Ann']]));
    expect(sorted(session.sql('SELECT user, name FROM events LEFT JOIN users USING (user) WHERE id > 3').collect())).toEqual(sorted([[null, null], ['c', null]]));
  });

  it('SELECT DISTINCT, ORDER BY (by name and by position), subqueries', () => {
    const { session } = setup();
    expect(session.sql('SELECT DISTINCT user FROM events WHERE user IS NOT NULL ORDER BY user DESC').collect()).toEqual([['c'], ['b'], ['a']]);
    expect(session.sql('SELECT id, amount FROM events WHERE amount IS NOT NULL ORDER BY 2').collect().map((r) => r[0])).toEqual([1, 3, 2, 4]);
    expect(sorted(session.sql('SELECT t.n FROM (SELECT user, count(*) AS n FROM events GROUP BY user) t WHERE t.n > 1').collect())).toEqual(sorted([[2]]));
  });

  it('createOrReplaceTempView replaces; table() and dropTempView()', () => {
    const { session, events } = setup();
    events.filter('id > 4').createOrReplaceTempView('events');
    expect(session.table('events').collect()).toEqual([['c', 5, null]]);
    expect(session.dropTempView('EVENTS')).toBe(true);
    expect(errorOf(() => session.table('events')).errorClass).toBe('TABLE_OR_VIEW_NOT_FOUND');
  });
});

describe("Spark's analysis errors", () => {
  it('an unknown view', () => {
    const { session } = setup();
    const e = errorOf(() => session.sql('SELECT user FROM nope'));
    expect(e.errorClass).toBe('TABLE_OR_VIEW_NOT_FOUND');
    expect(e.message).toMatch(/^\[TABLE_OR_VIEW_NOT_FOUND\] The table or view `nope` cannot be found\. Verify the spelling and correctness of the schema and catalog\. SQLSTATE: 42P01/);
    expect(e.message).toContain('`events`');
  });

  it('a column neither grouped nor aggregated', () => {
    const { session } = setup();
    const e = errorOf(() => session.sql('SELECT user, amount FROM events GROUP BY user'));
    expect(e.errorClass).toBe('MISSING_AGGREGATION');
    expect(e.message).toMatch(/^\[MISSING_AGGREGATION\] The non-aggregating expression "amount" is based on columns which are not participating in the GROUP BY clause\. SQLSTATE: 42803/);
  });

  it('GROUP BY positions, nested aggregates, HAVING without GROUP BY', () => {
    const { session } = setup();
    expect(errorOf(() => session.sql('SELECT user FROM events GROUP BY 5')).message)
      .toMatch(/^\[GROUP_BY_POS_OUT_OF_RANGE\] GROUP BY position 5 is not in select list \(valid range is \[1, 1\]\)\./);
    expect(errorOf(() => session.sql('SELECT count(*) FROM events GROUP BY 1')).errorClass).toBe('GROUP_BY_POS_AGGREGATE');
    expect(errorOf(() => session.sql('SELECT sum(count(*)) FROM events')).message)
      .toMatch(/^\[NESTED_AGGREGATE_FUNCTION\] It is not allowed to use an aggregate function in the argument of another aggregate function\./);
    expect(errorOf(() => session.sql('SELECT amount FROM events HAVING amount > 0')).errorClass).toBe('MISSING_GROUP_BY');
    expect(errorOf(() => session.sql('SELECT user, count(*) FROM events GROUP BY user ORDER BY 3')).message)
      .toMatch(/^\[ORDER_BY_POS_OUT_OF_RANGE\] ORDER BY position 3 is not in select list \(valid range is \[1, 2\]\)\./);
  });

  it('unknown columns fail as in the DataFrame API', () => {
    const { session } = setup();
    expect(errorOf(() => session.sql('SELECT nope FROM events')).errorClass).toBe('UNRESOLVED_COLUMN.WITH_SUGGESTION');
  });
});

describe('SQL strings in the DataFrame API', () => {
  it('filter/where take SQL text; selectExpr takes SQL expressions', () => {
    const { events } = setup();
    expect(sorted(events.filter('amount > 100').selectExpr('user', 'amount / 2 AS half').collect())).toEqual(sorted([[null, 150], ['a', 60], ['b', 125]]));
    expect(events.where("user = 'c' OR id = 1").selectExpr('id').collect()).toEqual([[1], [5]]);
  });

  it('expr() parses SQL and still takes an expression tree', () => {
    const { events } = setup();
    expect(events.select(expr('id + 1 AS next')).columns).toEqual(['next']);
    expect(events.select(expr({ kind: 'column', name: 'id' })).collect().map((r) => r[0])).toEqual([1, 2, 3, 4, 5]);
    expect(events.withColumn('double', expr('id * 2')).filter(col('double').gt(8)).collect()).toEqual([['c', 5, null, 10]]);
  });

  it('withColumn takes a Column, as PySpark does, and says how to pass SQL', () => {
    const { events } = setup();
    const e = errorOf(() => events.withColumn('x', 'id + 1' as unknown as Column));
    expect(e.errorClass).toBe('NOT_COLUMN');
    expect(e.message).toContain('withColumn(name, expr("id + 1"))');
  });

  it('a syntax error in a filter string fails at the call', () => {
    const { events } = setup();
    expect(errorOf(() => events.filter('amount >')).errorClass).toBe('PARSE_SYNTAX_ERROR');
  });
});
