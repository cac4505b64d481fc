/**
 * Issue 11 part 4: numbers are exact or refused, as in Spark 4 (ANSI mode). Each attack of the
 * issue, end to end through a shard invocation (decoder, arithmetic, aggregation buffers, state
 * encoding, the sinks' encodings).
 */
import { describe, expect, it } from 'vitest';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { col, count, sum } from '../../lib/plan/functions.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { stringifyExternalRow } from '../../lib/sinks/external-row.js';
import { createRecordDecoder } from '../../lib/sources/record-decoder.js';
import { toSchema } from '../../lib/api/session.js';
import { decodeStateJson, encodeStateJson } from '../../lib/aws/dynamodb-state-store.js';
import { SluiceSession } from '../../lib/api/session.js';
import { addData, checkNewAnswer, testStream } from '../../lib/testing/test-stream.js';
import { decodeRepartitionRecord, encodeRepartitionRecord, REPARTITION_RECORD_VERSION, type RepartitionRecord } from '../../lib/sources/repartition-records.js';

const totals = (format: 'json' | 'csv' = 'json', schema = 'k string, amount long'): StreamingQueryDefinition => defineQuery({
  name: 'totals',
  source: { schema, format, partitionKey: 'k' },
  transform: (events) => events.groupBy(col('k')).agg(sum('amount').as('total'), count('amount').as('n')),
  outputMode: 'update',
  sink: { kind: 'dynamodb', keyColumns: ['k'] },
});

let sequence = 7000n;
const records = (...lines: string[]): ShardRecord[] => lines.map((line) => ({
  sequenceNumber: String(sequence++ * 1_000_000_000n), partitionKey: line.startsWith('{') ? String(JSON.parse(line).k) : line.split(',')[0]!,
  dataBase64: Buffer.from(line).toString('base64'), approximateArrivalTimestampMs: 0,
}));

async function run(definition: StreamingQueryDefinition, batches: ShardRecord[][]) {
  const b = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
  const query = compileQuery(definition, { expectedShardCount: 1 });
  const results = [];
  for (const batch of batches) results.push(await runShardInvocation(query, { shardId: 's', records: batch }, b));
  const schema = toSchema('k string, total long, n long');
  const lastRow = b.sink.allRows().at(-1);
  return { ...b, results, lastRow, json: lastRow ? stringifyExternalRow(lastRow, schema) : null };
}

describe('longs are exact 64-bit values end to end', () => {
  it('sum of long past 2^53: 9007199254740991 + 1 + 1 is 9007199254740993 (across batches, through state)', async () => {
    const r = await run(totals(), [
      records('{"k":"a","amount":9007199254740991}'),
      records('{"k":"a","amount":1}'),
      records('{"k":"a","amount":1}'),
    ]);
    expect(r.results.map((x) => x.error)).toEqual([undefined, undefined, undefined]);
    expect(r.lastRow).toEqual(['a', 9007199254740993n, 3]);
    // As Spark writes a long in JSON: bare digits.
    expect(r.json).toBe('{"k":"a","total":9007199254740993,"n":3}');
  });

  it('decodes longs beyond 2^53 exactly from JSON and CSV, and adds them exactly', async () => {
    const json = await run(totals(), [records('{"k":"a","amount":9223372036854775000}', '{"k":"a","amount":800}')]);
    expect(json.lastRow).toEqual(['a', 9223372036854775800n, 2]);
    const csv = await run(totals('csv'), [records('a,-9223372036854775000', 'a,-808')]);
    expect(csv.lastRow).toEqual(['a', -9223372036854775808n, 2]);
  });

  it('sum of long past the int64 range raises ARITHMETIC_OVERFLOW (Spark 4, ANSI on); the record that overflows is dead-lettered and the shard moves on', async () => {
    const lines = ['{"k":"a","amount":9223372036854775807}', '{"k":"b","amount":5}', '{"k":"a","amount":1}', '{"k":"b","amount":6}', '{"k":"a","amount":-7}'];
    const r = await run(totals(), [records(...lines), records('{"k":"a","amount":8}', '{"k":"b","amount":1}')]);
    expect(r.results.map((x) => x.error)).toEqual([undefined, undefined]);
    expect(r.deadLetters.records.map((d) => [Buffer.from(d.dataBase64, 'base64').toString(), d.reason])).toEqual([
      [lines[2], expect.stringMatching(/^ARITHMETIC_OVERFLOW: .*long overflow in sum/)],
      ['{"k":"a","amount":8}', expect.stringMatching(/^ARITHMETIC_OVERFLOW/)],
    ]);
    // a keeps every record but the two that overflowed; b is untouched by a's overflow.
    const byKey = Object.fromEntries(r.sink.allRows().map((row) => [row[0], row.slice(1)]));
    expect(byKey).toEqual({ a: [9223372036854775800n, 2], b: [12, 3] });
    expect(r.results.every((x) => x.firstUncommittedSequenceNumber === null)).toBe(true);
  });

  it('a long beyond int64 is a dead letter, in JSON and in CSV', async () => {
    const json = await run(totals(), [records('{"k":"a","amount":9223372036854775808}', '{"k":"a","amount":1}')]);
    expect(json.deadLetters.records.map((d) => d.reason)).toEqual([expect.stringMatching(/'amount' is out of range for long/)]);
    expect(json.lastRow).toEqual(['a', 1, 1]);
    const csv = await run(totals('csv'), [records('a,9223372036854775808', 'a,1')]);
    expect(csv.deadLetters.records.map((d) => d.reason)).toEqual([expect.stringMatching(/amount.*out of range for long/)]);
  });
});

describe('a number that does not fit its column is a dead letter in every format', () => {
  it('"amount": 1e400 (Infinity to JSON.parse) is dead-lettered and the sum stays a number', async () => {
    const r = await run(totals('json', 'k string, amount double'), [records('{"k":"a","amount":1e400}', '{"k":"a","amount":2.5}')]);
    expect(r.deadLetters.records.map((d) => d.reason)).toEqual([expect.stringMatching(/'amount' is out of range for double/)]);
    expect(r.lastRow).toEqual(['a', 2.5, 1]);
    const csv = await run(totals('csv', 'k string, amount double'), [records('a,1e400', 'a,2.5')]);
    expect(csv.deadLetters.records.map((d) => d.reason)).toEqual([expect.stringMatching(/amount.*out of range for double/)]);
  });

  it('CSV int: 2147483647 is accepted, 2147483648 and -2147483649 are refused (the bound was off by one)', () => {
    const decode = createRecordDecoder({ format: 'csv' }, toSchema('i int'));
    const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
    expect(decode(bytes('2147483647'))).toEqual({ ok: true, row: [2147483647] });
    expect(decode(bytes('-2147483648'))).toEqual({ ok: true, row: [-2147483648] });
    expect(decode(bytes('2147483648'))).toEqual({ ok: false, reason: expect.stringMatching(/out of range for int/) });
    expect(decode(bytes('-2147483649'))).toEqual({ ok: false, reason: expect.stringMatching(/out of range for int/) });
  });
});

describe('longs beyond 2^53 survive the state store and the repartition hop', () => {
  it('DynamoDB state payloads keep a bigint exactly', () => {
    const entries: [string, unknown][] = [['a', [9007199254740993n, 3]], ['b', [-(2n ** 63n), null]]];
    const text = encodeStateJson({ e: entries }, entries.map((e) => e[1]));
    expect(decodeStateJson(text)).toEqual({ e: entries });
  });

  it('repartition records keep a bigint exactly', () => {
    const record = { v: REPARTITION_RECORD_VERSION, kind: 'rows', rows: [['a', 9223372036854775807n]] } as unknown as RepartitionRecord;
    expect(decodeRepartitionRecord(encodeRepartitionRecord(record))).toEqual(record);
  });
});

describe('long arithmetic in expressions (testStream)', () => {
  it('is exact past 2^53 and raises ARITHMETIC_OVERFLOW past int64; int arithmetic past int32 too', async () => {
    const { stream, df } = new SluiceSession().memoryStream('v long, i int');
    await testStream(df.select(col('v').plus(1).as('next'), col('v').multiply(2).as('twice')))(
      addData(stream, [9007199254740992, 1]),
      checkNewAnswer([9007199254740993n, 18014398509481984]),
    );
    const overflow = testStream(df.select(col('v').plus(1)))(addData(stream, [9223372036854775807n, 1]), checkNewAnswer());
    await expect(overflow).rejects.toThrow(/ARITHMETIC_OVERFLOW/);
    const { stream: s2, df: d2 } = new SluiceSession().memoryStream('i int');
    await expect(testStream(d2.select(col('i').plus(1)))(addData(s2, [2147483647]), checkNewAnswer())).rejects.toThrow(/ARITHMETIC_OVERFLOW.*int overflow/);
  });
});
