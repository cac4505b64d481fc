/**
 * Issue 11 on the emulators: 450 records of which 150 overflow a long sum (each only with the
 * records before it, so the per-record screen cannot find them: a search does, one at a time),
 * through the real Kinesis-trigger handler. The search used to stop at 64 per batch, and each
 * retry started it over, so the batch failed until the event source mapping gave up and its
 * records were lost. Now every culprit is dead-lettered with its reason and the sink holds the
 * answer over the rest; with a deadline, each invocation stops cleanly before it and the retry
 * resumes the search from the checkpoint (DynamoDB Local) instead of redoing it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Context, KinesisStreamEvent } from 'aws-lambda';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { defineQuery } from '../../lib/query/query-definition.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { createKinesisTriggerHandler } from '../../lib/aws/kinesis-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { LocalEventSourceMapping } from '../../lib/local/event-source-mapping.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, sum } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { runShardInvocation, type ShardInvocationResult } from '../../lib/query/shard-invocation.js';
import { deploy } from '../support/aws-pipeline.js';
import { answerInMemory, countingRuns } from '../support/data-error-runs.js';

const SCHEMA = 'k string, amount long';
const totals = (df: DataFrame): DataFrame => df.groupBy(col('k')).agg(sum(col('amount')).as('total'), count('*').as('n'));
const definition = defineQuery({
  name: 'many-overflows', source: { schema: SCHEMA, partitionKey: 'k' }, transform: totals, outputMode: 'update', sink: { kind: 'dynamodb', keyColumns: ['k'] },
});

interface Event { k: string; amount: bigint }
const B = 2n ** 62n;
/** Per key: +2^62, +2^62, -(2^62 - 1): the second of each three takes the running sum to 2^63, past int64. */
const events: Event[] = [];
for (let t = 0; t < 50; t++) for (const k of ['a', 'b', 'c']) events.push({ k, amount: B }, { k, amount: B }, { k, amount: -(B - 1n) });
const json = (e: Event): string => `{"k":"${e.k}","amount":${e.amount}}`;
const overflowing = events.filter((_, i) => i % 3 === 1);

const answerOver = async (rest: readonly Event[]): Promise<string[]> => canonical(await answerInMemory(SCHEMA, totals, rest.map((e) => [e.k, e.amount])));
const canonical = (rows: Record<string, unknown>[]): string[] => rows.map((r) => JSON.stringify([r.k, String(r.total), Number(r.n)])).sort();
const decoded = (dataBase64: string): string => Buffer.from(dataBase64, 'base64').toString();

let emulators: EmulatorSet;
beforeAll(async () => {
  emulators = await startEmulators();
});
afterAll(async () => {
  await emulators?.stop();
});

describe('150 records overflowing a long sum among 450, in one batch (DynamoDB Local, kinesis-mock)', () => {
  it('all 150 are dead-lettered with ARITHMETIC_OVERFLOW; the sink equals the in-memory answer over the other 300', async () => {
    const d = await deploy(emulators, definition, 1);
    await d.put(events.map((e) => ({ data: json(e), partitionKey: e.k })));
    // Finite retries, as deployed: a batch that kept failing would be given up and its rows lost.
    await d.drain({ batchSize: 1000, maximumRetryAttempts: 2 });

    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    expect(letters.map((l) => decoded(l.dataBase64)).sort()).toEqual(overflowing.map(json).sort());
    expect(letters.every((l) => /^ARITHMETIC_OVERFLOW: \[ARITHMETIC_OVERFLOW\] long overflow/.test(l.reason))).toBe(true);
    const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
    expect(canonical(table)).toEqual(await answerOver(events.filter((_, i) => i % 3 !== 1)));
    expect(d.results.map((r) => r.result.error?.message).filter(Boolean)).toEqual([]);
    const batches = d.results.flatMap((r) => r.result.progress);
    expect(Math.max(...batches.map((p) => p.numDeadLetteredRows))).toBe(150);
    expect(batches.reduce((n, p) => n + p.numInputRows + p.numDeadLetteredRows, 0)).toBe(450);
  });

  it('with a deadline, each invocation stops before it and the retry resumes the search: committed after a bounded number of invocations, no culprit searched twice', async () => {
    // The search's runs in one go (in memory: the same records, the same runs).
    let sequence = 1n;
    const asRecords = events.map((e) => ({ sequenceNumber: String(sequence++ * 1000n), partitionKey: e.k, dataBase64: Buffer.from(json(e)).toString('base64'), approximateArrivalTimestampMs: 0 }));
    const inOne = await countingRuns(() => runShardInvocation(compileQuery(definition, { expectedShardCount: 1 }),
      { shardId: 's', records: asRecords }, { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() }));
    expect(inOne.value.firstUncommittedSequenceNumber).toBeNull();

    const d = await deploy(emulators, definition, 1);
    await d.put(events.map((e) => ({ data: json(e), partitionKey: e.k })));
    const results: ShardInvocationResult[] = [];
    const handler = createKinesisTriggerHandler(definition, {
      config: d.config, clientOptions: emulators.clientOptions, observability: createQuietObservability(definition.name),
      onInvocation: (_shardId, result) => { results.push(result); },
    });
    // Lambda's context, with a deadline that leaves room for `runsPerInvocation` runs of the batch:
    // the loop looks at the remaining time once per batch, the search once per run.
    const runsPerInvocation = 300;
    const mapping = new LocalEventSourceMapping({
      kinesis: d.clients.kinesis, streamName: d.config.streamName, batchSize: 1000, maximumRetryAttempts: 10, bisectBatchOnFunctionError: true, pollIntervalMs: 50,
      handler: (event: KinesisStreamEvent, context: Context) => {
        let looks = 0;
        return handler(event, { ...context, getRemainingTimeInMillis: () => (looks++ < runsPerInvocation ? 600_000 : 0) });
      },
    });
    const { runs } = await countingRuns(async () => {
      await mapping.drain({ idleMs: 600 });
      await mapping.stop();
    });

    expect(mapping.stats.failedBatches).toBe(0);
    expect(results.every((r) => r.error === undefined)).toBe(true);
    const stopped = results.filter((r) => r.stoppedBy === 'deadline');
    expect(stopped.length).toBeGreaterThanOrEqual(2);
    expect(stopped.every((r) => r.committed === null && r.firstUncommittedSequenceNumber !== null)).toBe(true);
    // Bounded: the runs in one go spread over invocations, and at most one more run per resume.
    expect(mapping.stats.invocations).toBeLessThanOrEqual(Math.ceil(inOne.runs / (runsPerInvocation - 2)) + 1);
    expect(runs).toBeLessThanOrEqual(inOne.runs + 2 * mapping.stats.invocations);

    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    expect(letters.map((l) => decoded(l.dataBase64)).sort()).toEqual(overflowing.map(json).sort());
    expect(letters.every((l) => /^ARITHMETIC_OVERFLOW: /.test(l.reason))).toBe(true);
    const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
    expect(canonical(table)).toEqual(await answerOver(events.filter((_, i) => i % 3 !== 1)));
    // The batch committed: its blame entry was deleted.
    const blame = await d.clients.dynamodb.send(new ScanCommand({
      TableName: d.config.checkpointTable, FilterExpression: 'begins_with(sk, :b)', ExpressionAttributeValues: { ':b': { S: 'blame#' } },
    }));
    expect(blame.Items ?? []).toEqual([]);
  });
});
