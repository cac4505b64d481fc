/**
 * Spark 4's ANSI mode (spark.sql.ansi.enabled=true, its default) beyond overflow: a zero divisor
 * raises DIVIDE_BY_ZERO, a malformed string cast to a number raises CAST_INVALID_INPUT, and the
 * try_ forms give NULL. On the streaming runtime the record that raises one is dead-lettered with
 * the error class, as ARITHMETIC_OVERFLOW is, and the shard moves on.
 */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { addData, checkNewAnswer, testStream } from '../../lib/testing/test-stream.js';
import { col, count, sum, try_divide, try_mod } from '../../lib/plan/functions.js';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { compileQuery } from '../../lib/query/compiled-query.js';

/** Runs `select(...)` over one row per value; resolves to the rows, or rejects with the error. */
async function evaluate(schema: string, rows: unknown[][], project: (df: DataFrame) => DataFrame, expected: unknown[][] = []): Promise<void> {
  const { stream, df } = new SluiceSession().memoryStream(schema);
  await testStream(project(df))(addData(stream, ...rows), checkNewAnswer(...expected));
}

describe('DIVIDE_BY_ZERO', () => {
  it('x / 0 and x % 0 raise it with Spark\'s message, for longs, ints and doubles', async () => {
    const message = '[DIVIDE_BY_ZERO] Division by zero. Use `try_divide` to tolerate divisor being 0 and return NULL instead. If necessary set "spark.sql.ansi.enabled" to "false" to bypass this error. SQLSTATE: 22012';
    for (const type of ['long', 'int', 'double']) {
      await expect(evaluate(`a ${type}, b ${type}`, [[7, 0]], (df) => df.select(col('a').divide(col('b'))))).rejects.toThrow(message);
      await expect(evaluate(`a ${type}, b ${type}`, [[7, 0]], (df) => df.select(col('a').mod(col('b'))))).rejects.toThrow(/\[DIVIDE_BY_ZERO\] Division by zero/);
    }
  });

  it('try_divide and try_mod give NULL for a zero divisor and the quotient otherwise', async () => {
    await evaluate('a long, b long', [[7, 0], [7, 2], [null, 0]], (df) => df.select(try_divide(col('a'), col('b')), try_mod(col('a'), col('b'))), [[null, null], [3.5, 1], [null, null]]);
    await evaluate('a double, b double', [[1.5, 0]], (df) => df.select(try_divide(col('a'), col('b'))), [[null]]);
  });
});

describe('CAST_INVALID_INPUT', () => {
  const castAs = (to: string) => (df: DataFrame) => df.select(col('s').cast(to));
  it('a malformed string cast to bigint raises it with Spark\'s message', async () => {
    await expect(evaluate('s string', [['abc']], castAs('long'))).rejects.toThrow(
      '[CAST_INVALID_INPUT] The value \'abc\' of the type "STRING" cannot be cast to "BIGINT" because it is malformed. Correct the value as per the syntax, or change its target type. Use `try_cast` to tolerate malformed input and return NULL instead. If necessary set "spark.sql.ansi.enabled" to "false" to bypass this error. SQLSTATE: 22018',
    );
  });

  it('what Spark\'s string-to-integral parse accepts (trimmed, signed, a fraction truncated) and what it refuses', async () => {
    await evaluate('s string', [[' 42 '], ['-1.9'], ['+7.'], ['9223372036854775807'], ['-9223372036854775808']], castAs('long'),
      [[42], [-1], [7], [9223372036854775807n], [-9223372036854775808n]]);
    for (const bad of ['', '1e1', '12abc', '9223372036854775808', '--1', '0x10']) {
      await expect(evaluate('s string', [[bad]], castAs('long')), bad).rejects.toThrow(/CAST_INVALID_INPUT.*"BIGINT"/);
    }
    await evaluate('s string', [['2147483647']], castAs('int'), [[2147483647]]);
    await expect(evaluate('s string', [['2147483648']], castAs('int'))).rejects.toThrow(/CAST_INVALID_INPUT.*"INT"/);
    await evaluate('s string', [['1.5e3'], ['-Infinity'], [' NaN ']], castAs('double'), [[1500], [-Infinity], [Number.NaN]]);
    await expect(evaluate('s string', [['1,5']], castAs('double'))).rejects.toThrow(/CAST_INVALID_INPUT.*"DOUBLE"/);
  });

  it("strings to boolean: Spark's spellings (t/true/y/yes/1, f/false/n/no/0), anything else refused", async () => {
    await evaluate('s string', [[' Yes '], ['0'], ['F']], castAs('boolean'), [[true], [false], [false]]);
    await expect(evaluate('s string', [['maybe']], castAs('boolean'))).rejects.toThrow(/CAST_INVALID_INPUT.*"BOOLEAN"/);
    await evaluate('s string', [['maybe']], (df) => df.select(col('s').try_cast('boolean')), [[null]]);
  });

  it('try_cast gives NULL for malformed input and for overflow (CAST_OVERFLOW)', async () => {
    await evaluate('s string, d double', [['abc', 1e20], ['12', 3.7]], (df) => df.select(col('s').try_cast('long'), col('s').try_cast('int'), col('d').try_cast('long')),
      [[null, null, null], [12, 12, 3]]);
    await expect(evaluate('d double', [[1e20]], (df) => df.select(col('d').cast('long')))).rejects.toThrow(/CAST_OVERFLOW/);
  });
});

describe('on the streaming runtime, the record that raises is dead-lettered and the shard moves on', () => {
  const perUnit = (transform: (df: DataFrame) => DataFrame): StreamingQueryDefinition => defineQuery({
    name: 'per-unit', source: { schema: 'k string, amount long, qty long, code string', partitionKey: 'k' },
    transform, outputMode: 'update', sink: { kind: 'dynamodb', keyColumns: ['k'] },
  });
  let sequence = 9000n;
  const records = (...events: object[]): ShardRecord[] => events.map((e) => ({
    sequenceNumber: String(sequence++ * 1_000_000_000n), partitionKey: (e as { k: string }).k,
    dataBase64: Buffer.from(JSON.stringify(e)).toString('base64'), approximateArrivalTimestampMs: 0,
  }));
  async function run(definition: StreamingQueryDefinition, delivered: ShardRecord[]) {
    const b = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
    const result = await runShardInvocation(compileQuery(definition, { expectedShardCount: 1 }), { shardId: 's', records: delivered }, b);
    return { ...b, result };
  }

  it('amount / qty with qty 0: DIVIDE_BY_ZERO dead-letters that record only', async () => {
    const q = perUnit((df) => df.groupBy(col('k')).agg(sum(col('amount').divide(col('qty'))).as('unit'), count('*').as('n')));
    const delivered = records({ k: 'a', amount: 10, qty: 2, code: '1' }, { k: 'a', amount: 5, qty: 0, code: '1' }, { k: 'b', amount: 9, qty: 3, code: '1' }, { k: 'a', amount: 4, qty: 4, code: '1' });
    const r = await run(q, delivered);
    expect(r.result.error).toBeUndefined();
    expect(r.deadLetters.records.map((d) => [d.sequenceNumber, d.reason])).toEqual([[delivered[1]!.sequenceNumber, expect.stringMatching(/^DIVIDE_BY_ZERO: \[DIVIDE_BY_ZERO\] Division by zero/)]]);
    expect(Object.fromEntries(r.sink.allRows().map((row) => [row[0], row.slice(1)]))).toEqual({ a: [6, 2], b: [3, 1] });
    expect(r.result.firstUncommittedSequenceNumber).toBeNull();
  });

  it('many zero divisors in one batch (20 of 60 records, over the old cap of 16): each is dead-lettered, the rest is summed', async () => {
    const q = perUnit((df) => df.groupBy(col('k')).agg(sum(col('amount').divide(col('qty'))).as('unit'), count('*').as('n')));
    const events = Array.from({ length: 60 }, (_, i) => ({ k: 'a', amount: 6, qty: i % 3 === 1 ? 0 : 2, code: '1' }));
    const delivered = records(...events);
    const r = await run(q, delivered);
    expect(r.result.error).toBeUndefined();
    expect(r.deadLetters.records.map((d) => d.sequenceNumber)).toEqual(delivered.filter((_, i) => i % 3 === 1).map((d) => d.sequenceNumber));
    expect(r.sink.allRows()).toEqual([['a', 120, 40]]);
  });

  it('code cast to bigint with code "x7": CAST_INVALID_INPUT dead-letters that record only; try_cast keeps it as NULL', async () => {
    const delivered = records({ k: 'a', amount: 1, qty: 1, code: '7' }, { k: 'a', amount: 1, qty: 1, code: 'x7' }, { k: 'a', amount: 1, qty: 1, code: ' 8 ' });
    const strict = await run(perUnit((df) => df.groupBy(col('k')).agg(sum(col('code').cast('long')).as('codes'), count('*').as('n'))), delivered);
    expect(strict.result.error).toBeUndefined();
    expect(strict.deadLetters.records.map((d) => [d.sequenceNumber, d.reason])).toEqual([[delivered[1]!.sequenceNumber, expect.stringMatching(/^CAST_INVALID_INPUT: \[CAST_INVALID_INPUT\] The value 'x7' of the type "STRING" cannot be cast to "BIGINT"/)]]);
    expect(strict.sink.allRows()).toEqual([['a', 15, 2]]);
    const tolerant = await run(perUnit((df) => df.groupBy(col('k')).agg(sum(col('code').try_cast('long')).as('codes'), count('*').as('n'))), delivered);
    expect(tolerant.deadLetters.records).toEqual([]);
    expect(tolerant.sink.allRows()).toEqual([['a', 15, 3]]);
  });
});

describe('logs carry no data values', () => {
  it("CAST_INVALID_INPUT's log message withholds the value (the dead letter, holding the record, has it)", async () => {
    const { castInvalidInput } = await import('../../lib/core/ansi-errors.js');
    const error = castInvalidInput('secret-4111', 'string', 'bigint');
    expect(error.message).toContain("'secret-4111'");
    expect(error.logMessage).not.toContain('secret');
    expect(error.logMessage).toContain('The value <11 characters> of the type "STRING" cannot be cast to "BIGINT"');
  });
});
