/**
 * Issue 11 part 4 on the emulators: 1,000 records of which 200 divide by zero, through the real
 * Kinesis-trigger handler in batches of up to 1,000 records. Every bad record is dead-lettered
 * with its reason (they used to be found one search at a time, up to 64 per batch; beyond that
 * the batch failed every retry and the shard was blocked) and the sink holds exactly the answer
 * over the 800 good records.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, sum } from '../../lib/plan/functions.js';
import { deploy } from '../support/aws-pipeline.js';
import { answerInMemory } from '../support/data-error-runs.js';

const SCHEMA = 'k string, amount long, qty long';
const unitPrice = (df: DataFrame): DataFrame => df.groupBy(col('k')).agg(sum(col('amount').divide(col('qty'))).as('unit'), count('*').as('n'));

interface Event { k: string; amount: number; qty: number }

const answerOver = async (events: readonly Event[]): Promise<string[]> =>
  canonical(await answerInMemory(SCHEMA, unitPrice, events.map((e) => [e.k, e.amount, e.qty])));

const canonical = (rows: Record<string, unknown>[]): string[] => rows.map((r) => JSON.stringify([r.k, r.unit, r.n])).sort();

let emulators: EmulatorSet;
beforeAll(async () => {
  emulators = await startEmulators();
});
afterAll(async () => {
  await emulators?.stop();
});

describe('200 records raising DIVIDE_BY_ZERO among 1,000 (DynamoDB Local, kinesis-mock)', () => {
  it('all 200 are dead-lettered with the reason; the sink equals the in-memory answer over the other 800', async () => {
    const d = await deploy(emulators, defineQuery({
      name: 'many-bad', source: { schema: SCHEMA, partitionKey: 'k' }, transform: unitPrice, outputMode: 'update', sink: { kind: 'dynamodb', keyColumns: ['k'] },
    }), 1);
    const events = Array.from({ length: 1000 }, (_, i): Event => ({ k: `k${i % 7}`, amount: 3 * (i + 1), qty: i % 5 === 3 ? 0 : 1 + (i % 3) }));
    await d.put(events.map((e) => ({ data: JSON.stringify(e), partitionKey: e.k })));
    // Finite retries, as deployed: a batch that kept failing would be given up and its rows lost.
    await d.drain({ batchSize: 1000, maximumRetryAttempts: 2 });

    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    const lettered = letters.map((l) => JSON.parse(Buffer.from(l.dataBase64, 'base64').toString()) as Event);
    expect(lettered.map((e) => e.amount).sort((a, b) => a - b)).toEqual(events.filter((e) => e.qty === 0).map((e) => e.amount));
    expect(letters.every((l) => /^DIVIDE_BY_ZERO: \[DIVIDE_BY_ZERO\] Division by zero/.test(l.reason))).toBe(true);

    const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
    expect(canonical(table)).toEqual(await answerOver(events.filter((e) => e.qty !== 0)));
    expect(d.results.map((r) => r.result.error?.message).filter(Boolean)).toEqual([]);
    // Some batch held more than 64 bad records: the case that used to block the shard.
    const batches = d.results.flatMap((r) => r.result.progress);
    expect(Math.max(...batches.map((p) => p.numDeadLetteredRows))).toBeGreaterThan(64);
    expect(batches.reduce((n, p) => n + p.numInputRows + p.numDeadLetteredRows, 0)).toBe(1000);
  });
});
