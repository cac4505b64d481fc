/**
 * Issue 11 on the emulators: a data error no record of its batch can be blamed for. An append
 * query divides by a window's sum; the window whose sum is 0 is emitted by a later batch, from
 * state alone. Each retry failed the same way and the shard was blocked for good; now the raising
 * row is dead-lettered (its values and the reason) and left out, and the shard moves on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, lit, sum, window } from '../../lib/plan/functions.js';
import { deploy } from '../support/aws-pipeline.js';

const ratio = (df: DataFrame): DataFrame => df.withWatermark('ts', '10 seconds')
  .groupBy(window(col('ts'), '10 seconds'), col('k')).agg(sum(col('amount')).as('s'), count('*').as('n'))
  .select(col('window.start').as('start'), col('k'), lit(100).divide(col('s')).as('r'), col('n'));
const at = (s: number): string => new Date(Date.UTC(2024, 4, 1, 12) + s * 1000).toISOString();

let emulators: EmulatorSet;
beforeAll(async () => {
  emulators = await startEmulators();
});
afterAll(async () => {
  await emulators?.stop();
});

describe('a division by a window\'s sum that is 0, emitted from state (DynamoDB Local, kinesis-mock)', () => {
  it('the raising row is dead-lettered and left out; the other window is written and later records commit', async () => {
    const d = await deploy(emulators, defineQuery({
      name: 'ratio', source: { schema: 'k string, amount long, ts timestamp', partitionKey: 'k' }, transform: ratio, outputMode: 'append',
      sink: { kind: 'dynamodb', keyColumns: ['start', 'k'] },
    }), 1);
    const put = (events: object[]) => d.put(events.map((e) => ({ data: JSON.stringify(e), partitionKey: (e as { k: string }).k })));
    await put([{ k: 'a', amount: 5, ts: at(1) }, { k: 'a', amount: -5, ts: at(2) }, { k: 'b', amount: 4, ts: at(3) }]);
    await d.drain({ maximumRetryAttempts: 2 });
    // The watermark passes 12:00:10: both windows of 12:00:00 are emitted, from state alone.
    await put([{ k: 'a', amount: 1, ts: at(60) }, { k: 'b', amount: 2, ts: at(61) }]);
    await d.drain({ maximumRetryAttempts: 2 });
    await put([{ k: 'a', amount: 1, ts: at(120) }]);
    await d.drain({ maximumRetryAttempts: 2 });

    expect(d.results.map((r) => r.result.error?.message).filter(Boolean)).toEqual([]);
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    expect(letters).toHaveLength(1);
    expect(letters[0]!.reason).toMatch(/^DIVIDE_BY_ZERO: \[DIVIDE_BY_ZERO\] Division by zero[\s\S]*a row above a stateful operator, left out of batch/);
    expect(JSON.parse(Buffer.from(letters[0]!.dataBase64, 'base64').toString())).toMatchObject({ k: 'a', s: 0, n: 2 });
    const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
    expect(table.map((r) => [r.k, r.r, r.n]).sort()).toEqual([['a', 100, 1], ['b', 25, 1], ['b', 50, 1]]);
  });
});
