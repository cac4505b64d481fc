/**
 * A UDF in a deployed query, through the real Kinesis-trigger handler on the emulators (Kinesis,
 * DynamoDB Local, s3rver): the UDF rides in the query definition; the record whose value makes it
 * throw is dead-lettered to S3 with FAILED_EXECUTE_UDF, and the sink holds the answer over the rest.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, sum } from '../../lib/plan/functions.js';
import { udf } from '../../lib/plan/udf.js';
import { deploy } from '../support/aws-pipeline.js';

const hex = udf((code: string) => {
  const n = Number.parseInt(code, 16);
  if (Number.isNaN(n)) throw new Error('not a hex code');
  return n;
}, 'long').withName('hex');

const query = defineQuery({
  name: 'hex-totals',
  source: { schema: 'k string, code string', partitionKey: 'k' },
  transform: (df) => df.groupBy(col('k')).agg(sum(hex(col('code'))).as('total'), count('*').as('n')),
  outputMode: 'update',
  sink: { kind: 'dynamodb' },
});

let emulators: EmulatorSet;
beforeAll(async () => {
  emulators = await startEmulators();
});
afterAll(async () => {
  await emulators?.stop();
});

describe('a UDF in a deployed query (emulators)', () => {
  it('runs in the handler; the record that makes it throw is dead-lettered with the reason, the shard moves on', async () => {
    const d = await deploy(emulators, query, 1);
    const events = [{ k: 'a', code: 'ff' }, { k: 'a', code: 'zz' }, { k: 'b', code: '10' }, { k: 'a', code: '1' }];
    await d.put(events.map((e) => ({ data: JSON.stringify(e), partitionKey: e.k })));
    await d.drain({ maximumRetryAttempts: 3 });
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    expect(letters.map((l) => JSON.parse(Buffer.from(l.dataBase64, 'base64').toString()) as unknown)).toEqual([{ k: 'a', code: 'zz' }]);
    expect(letters[0]!.reason).toMatch(/^FAILED_EXECUTE_UDF: \[FAILED_EXECUTE_UDF\] User defined function \(`hex`: \(string\) => long\) failed due to: Error: not a hex code\. SQLSTATE: 39000/);
    const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
    expect(Object.fromEntries(table.map((r) => [r.k, [r.total, r.n]]))).toEqual({ a: [256, 2], b: [16, 1] });
    expect(d.results.every((r) => r.result.error === undefined)).toBe(true);
  });
});
