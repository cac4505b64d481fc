/**
 * UDFs: TypeScript functions with a declared return type, called from the DataFrame API (the
 * definition rides in the expression) and by name from SQL text (`session.udf.register`, found
 * when the call binds). A throw or a value of another type is FAILED_EXECUTE_UDF: the in-memory
 * query fails as Spark's does; the deployed runtime dead-letters the record and moves on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { col, count, expr, sum } from '../../lib/plan/functions.js';
import { udf } from '../../lib/plan/udf.js';
import { isNondeterministicFunction, unregisterUserFunction } from '../../lib/plan/function-catalog/index.js';
import { addData, checkNewAnswer, testStream } from '../../lib/testing/test-stream.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { compileQuery } from '../../lib/query/compiled-query.js';

const slugify = (s: string | null): string | null => (s === null ? null : s.trim().toLowerCase().replace(/[^a-z0-9]+/g, '-'));
const titles = (session = new SluiceSession()): DataFrame => session.createDataFrame([['Hello World'], [null], ['  Spark & Sluice ']], 'title string');

afterEach(() => {
  for (const name of ['slug', 'plus_days', 'pick']) unregisterUserFunction(name);
});

describe('udf() in the DataFrame API', () => {
  it('applies the function row by row; NULL reaches the function, which decides', () => {
    const slug = udf(slugify, 'string').withName('slug');
    const out = titles().select(col('title'), slug(col('title')));
    expect(out.columns).toEqual(['title', 'slug(title)']);
    expect(out.schema[1]).toEqual({ name: 'slug(title)', type: 'string' });
    expect(out.collect()).toEqual([['Hello World', 'hello-world'], [null, null], ['  Spark & Sluice ', 'spark-sluice']]);
  });

  it('is named after the function, or UDF when it has none, as Spark names a Scala UDF', () => {
    function shout(s: string): string { return s.toUpperCase(); }
    expect(titles().select(udf(shout)('title')).columns).toEqual(['shout(title)']);
    expect(titles().select(udf((s: string) => s)('title')).columns).toEqual(['UDF(title)']);
  });

  it('several arguments and typed results: the declared type is the column type', () => {
    const df = new SluiceSession().createDataFrame([[1, 2.5, 'x'], [3, null, 'y']], 'a int, b double, c string');
    const combine = udf((a: number, b: number | null, c: string) => ({ label: `${c}${a}`, total: a + (b ?? 0), tags: [c, c] }), 'struct<label: string, total: double, tags: array<string>>');
    const out = df.select(combine(col('a'), col('b'), col('c')).alias('r'));
    expect(out.schema).toEqual([{ name: 'r', type: 'struct<label:string,total:double,tags:array<string>>' }]);
    expect(out.collect()).toEqual([[{ label: 'x1', total: 3.5, tags: ['x', 'x'] }], [{ label: 'y3', total: 3, tags: ['y', 'y'] }]]);
    // A filter and a grouping key may use a UDF like any expression.
    const parity = udf((a: number) => (a % 2 === 0 ? 'even' : 'odd'), 'string').withName('parity');
    expect(df.filter(udf((a: number) => a > 1, 'boolean')(col('a'))).collect()).toEqual([[3, null, 'y']]);
    expect(df.groupBy(parity('a')).agg(count('*').as('n')).collect()).toEqual([['odd', 2]]);
  });

  it('a timestamp arrives as microseconds; a Date returned is a timestamp', () => {
    const df = new SluiceSession().createDataFrame([[1_700_000_000_123_456]], 'ts timestamp');
    const nextDay = udf((micros: number) => new Date(Math.floor(micros / 1000) + 86_400_000), 'timestamp');
    expect(df.select(nextDay('ts')).collect()).toEqual([[1_700_086_400_123_000]]);
  });

  it('in a streaming query, per micro-batch', async () => {
    const { stream, df } = new SluiceSession().memoryStream('title string, n long');
    const slug = udf(slugify, 'string');
    await testStream(df.select(slug(col('title')).alias('slug'), col('n')))(
      addData(stream, ['A B', 1], [null, 2]), checkNewAnswer(['a-b', 1], [null, 2]),
      addData(stream, ['C', 3]), checkNewAnswer(['c', 3]),
    );
  });
});

describe('FAILED_EXECUTE_UDF', () => {
  it("a throw fails the query with Spark's message: the function, its signature, the cause", async () => {
    const { stream, df } = new SluiceSession().memoryStream('title string');
    const strict = udf((s: string) => { if (s.length > 3) throw new RangeError('title too long'); return s; }, 'string').withName('short_title');
    await expect(testStream(df.select(strict('title')))(addData(stream, ['abcdef']), checkNewAnswer())).rejects.toThrow(
      '[FAILED_EXECUTE_UDF] User defined function (`short_title`: (string) => string) failed due to: RangeError: title too long. SQLSTATE: 39000',
    );
  });

  it('a value of another type than declared is refused (Spark would fail the cast), and undefined is NULL', () => {
    const df = new SluiceSession().createDataFrame([[1], [2]], 'a int');
    expect(() => df.select(udf((a: number) => a * 1.5, 'int').withName('half')('a')).collect()).toThrow(
      /User defined function \(`half`: \(int\) => int\) failed due to: it returned a number, which is not a value of its declared return type int/,
    );
    expect(() => df.select(udf((a: number) => String(a), 'long')('a')).collect()).toThrow(/returned a string, which is not a value of its declared return type long/);
    expect(df.select(udf(() => undefined, 'string')('a')).collect()).toEqual([[null], [null]]);
  });

  it("the log message withholds the user's error text (it may quote the row); the message has it", () => {
    const df = new SluiceSession().createDataFrame([['4111-secret']], 'card string');
    try {
      df.select(udf((c: string) => { throw new Error(`bad card ${c}`); }, 'string')('card')).collect();
      expect.unreachable();
    } catch (error) {
      const e = error as { message: string; logMessage: string; errorClass: string };
      expect(e.errorClass).toBe('FAILED_EXECUTE_UDF');
      expect(e.message).toContain('Error: bad card 4111-secret');
      expect(e.logMessage).not.toContain('4111');
      expect(e.logMessage).toContain('failed due to: Error (details in the dead letter)');
    }
  });

  it('on the deployed runtime the record that fails the UDF is dead-lettered with the reason; the others are aggregated', async () => {
    const parse = udf((code: string) => { const n = Number.parseInt(code, 16); if (Number.isNaN(n)) throw new Error('not hex'); return n; }, 'long').withName('hex');
    const definition = defineQuery({
      name: 'hex-codes', source: { schema: 'k string, code string', partitionKey: 'k' },
      transform: (df) => df.groupBy(col('k')).agg(sum(parse(col('code'))).as('total'), count('*').as('n')),
      outputMode: 'update', sink: { kind: 'dynamodb', keyColumns: ['k'] },
    });
    const delivered: ShardRecord[] = [{ k: 'a', code: 'ff' }, { k: 'a', code: 'zz' }, { k: 'b', code: '10' }, { k: 'a', code: '1' }].map((e, i) => ({
      sequenceNumber: String(1000 + i), partitionKey: e.k, dataBase64: Buffer.from(JSON.stringify(e)).toString('base64'), approximateArrivalTimestampMs: 0,
    }));
    const backends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
    const result = await runShardInvocation(compileQuery(definition, { expectedShardCount: 1 }), { shardId: 's', records: delivered }, backends);
    expect(result.error).toBeUndefined();
    expect(backends.deadLetters.records.map((d) => [d.sequenceNumber, d.reason])).toEqual([
      ['1001', 'FAILED_EXECUTE_UDF: [FAILED_EXECUTE_UDF] User defined function (`hex`: (string) => long) failed due to: Error: not hex. SQLSTATE: 39000\n'
        + '  How to fix: fix hex for this input, or handle it there (return null); the input record is dead-lettered on the deployed runtime.'],
    ]);
    expect(Object.fromEntries(backends.sink.allRows().map((r) => [r[0], r.slice(1)]))).toEqual({ a: [256, 2], b: [16, 1] });
  });
});

describe('session.udf.register: by name, for SQL text', () => {
  it('a call by name (as the SQL parser builds it, lowercased) binds to the registered UDF', () => {
    const session = new SluiceSession();
    const slug = session.udf.register('Slug', slugify, 'string');
    const byName = titles(session).select(expr({ kind: 'call', fn: 'slug', args: [{ kind: 'column', name: 'title' }] }).alias('s'));
    expect(byName.schema).toEqual([{ name: 's', type: 'string' }]);
    expect(byName.collect()).toEqual([['hello-world'], [null], ['spark-sluice']]);
    // The returned UDF works in the DataFrame API too.
    expect(titles(session).select(slug('title')).columns).toEqual(['Slug(title)']);
  });

  it('an unknown name is UNRESOLVED_ROUTINE with how to register one; a built-in name cannot be taken', () => {
    const session = new SluiceSession();
    expect(() => titles(session).select(expr({ kind: 'call', fn: 'pick', args: [] }))).toThrow(/\[UNRESOLVED_ROUTINE\] Cannot resolve function `pick`[\s\S]*session\.udf\.register\('pick', fn, returnType\)/);
    expect(() => session.udf.register('upper', (s: string) => s, 'string')).toThrow(/Cannot register a UDF named `upper`: it is a built-in function/);
    expect(() => session.udf.register('concat_ws', (s: string) => s, 'string')).toThrow(/built-in function/);
    expect(() => session.udf.register('my-fn', (s: string) => s)).toThrow(/INVALID_IDENTIFIER/);
  });

  it('registers a udf() with its type and determinism; asNondeterministic reaches the catalog', () => {
    const session = new SluiceSession();
    const pick = udf(() => Math.random(), 'double').asNondeterministic();
    session.udf.register('pick', pick);
    expect(isNondeterministicFunction('pick')).toBe(true);
    expect(isNondeterministicFunction('pick', pick.definition)).toBe(true);
    expect(isNondeterministicFunction('slug', udf(slugify).definition)).toBe(false);
    expect(() => session.udf.register('pick', pick, 'double')).toThrow(/CANNOT_REGISTER_UDF_WITH_RETURN_TYPE/);
  });
});
