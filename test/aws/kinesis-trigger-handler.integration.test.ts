/**
 * The whole AWS path against the emulators: Kinesis → local event source mapping → the real
 * Lambda handler → DynamoDB checkpoint/state → S3 / DynamoDB sinks, compared with the engine run
 * in memory on the same events.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { readS3Files, readS3Snapshots, scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { deploy } from '../support/aws-pipeline.js';
import { canonicalSales, hourlySales, inMemoryHourlySales, SALES_SCHEMA, type Sale } from '../support/hourly-sales.js';
import { listAllShards, splitShardEvenly, waitForStreamActive } from '../../lib/local/kinesis-admin.js';
import { createQuietObservability } from '../../lib/aws/observability.js';

function query(outputMode: 'append' | 'update' | 'complete', sink: StreamingQueryDefinition['sink']): StreamingQueryDefinition {
  return defineQuery({
    name: `hourly-sales-${outputMode}`,
    source: { schema: SALES_SCHEMA, partitionKey: 'store_id' },
    transform: hourlySales,
    outputMode,
    sink,
  });
}

const stores = ['north', 'south', 'east', 'west', 'central'];
/** Sales in event-time order over 14:00–17:30, so nothing is late and every mode agrees. */
const sales: Sale[] = Array.from({ length: 60 }, (_, i) => ({
  store_id: stores[(i * 7) % stores.length]!,
  amount: 1 + ((i * 13) % 29),
  ts: new Date(Date.UTC(2024, 4, 1, 14, 0) + i * 3.5 * 60_000).toISOString(),
}));

/** The engine in memory over all events at once, as complete mode: the reference answer. */
const inMemoryAnswer = (): Promise<string[]> => inMemoryHourlySales(sales);
const canonical = canonicalSales;

const asRecords = (events: Sale[]) => events.map((e) => ({ data: JSON.stringify(e), partitionKey: e.store_id }));

let emulators: EmulatorSet;
let expected: string[];

beforeAll(async () => {
  emulators = await startEmulators();
  expected = await inMemoryAnswer();
});
afterAll(async () => {
  await emulators?.stop();
});

describe('Kinesis → Lambda handler → DynamoDB state → sinks (emulators)', () => {
  it('update mode to the DynamoDB upsert sink on 2 shards ends with the in-memory answer', async () => {
    const d = await deploy(emulators, query('update', { kind: 'dynamodb' }), 2);
    await d.put(asRecords(sales));
    await d.drain();
    const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
    expect(canonical(table)).toEqual(expected);
    const shards = new Set(d.results.map((r) => r.shardId));
    expect(shards.size).toBe(2);
    expect(d.results.every((r) => r.result.error === undefined)).toBe(true);
    const progress = d.results.flatMap((r) => r.result.progress);
    expect(progress.reduce((n, p) => n + p.numInputRows, 0)).toBe(sales.length);
    // Every batch reports what it cost.
    expect(progress.filter((p) => p.numInputRows > 0).every((p) => (p.cost.dynamoDbWriteUnits ?? 0) > 0)).toBe(true);
    // The recovery reads of each invocation count too: the batches' costs add up to the whole spend.
    expect(progress.filter((p) => p.numInputRows > 0).every((p) => (p.cost.dynamoDbReadUnits ?? 0) > 0)).toBe(true);
  });

  it('complete mode to S3 snapshots: the union of the shards\' snapshots is the whole result', async () => {
    const d = await deploy(emulators, query('complete', { kind: 's3-snapshot' }), 2);
    await d.put(asRecords(sales));
    await d.drain();
    expect(canonical(await readS3Snapshots(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix))).toEqual(expected);
  });

  it('append mode to S3 files: each closed window once; idle shards let the last windows close', async () => {
    const d = await deploy(emulators, query('append', { kind: 's3-files' }), 2);
    await d.put(asRecords(sales));
    await d.drain();
    const beforeIdle = canonical(await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix));
    expect(beforeIdle.length).toBeGreaterThan(0);
    expect(beforeIdle.every((row) => expected.includes(row))).toBe(true);
    // A straggler on one shard at 18:30 moves that shard's watermark past 17:00; the other shard
    // holds the minimum back until the scheduled handler confirms it idle.
    const late: Sale = { store_id: 'north', amount: 5, ts: '2024-05-01T18:30:00.000Z' };
    await d.put(asRecords([late]));
    await d.drain();
    const stillHeld = canonical(await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix));
    await d.tick(Date.now() + 10 * 60_000);
    const afterIdle = canonical(await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix));
    const complete17 = expected.filter((r) => !r.includes('T18:00'));
    expect(afterIdle.filter((r) => !r.includes('T18:00'))).toEqual(complete17);
    expect(afterIdle.length).toBeGreaterThanOrEqual(stillHeld.length);
    // Exactly once: no row twice, and a second tick changes nothing.
    expect(new Set(afterIdle).size).toBe(afterIdle.length);
    await d.tick(Date.now() + 20 * 60_000);
    expect(canonical(await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix))).toEqual(afterIdle);
  });

  it('malformed records go to the S3 dead-letter prefix with the reason, and the shard moves on', async () => {
    const d = await deploy(emulators, query('update', { kind: 'dynamodb' }), 1);
    await d.put([
      ...asRecords(sales.slice(0, 5)),
      { data: '{"store_id": "north", "amount": "lots", "ts": "2024-05-01T14:10:00Z"}', partitionKey: 'north' },
      { data: 'not json at all', partitionKey: 'south' },
      { data: JSON.stringify({ store_id: 'east', amount: 3, ts: '2024-05-01T14:20:00Z' }), partitionKey: 'west' },
      ...asRecords(sales.slice(5, 10)),
    ]);
    await d.drain();
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    expect(letters.map((l) => l.reason)).toEqual([
      expect.stringMatching(/amount/),
      expect.stringMatching(/malformed JSON/),
      expect.stringMatching(/partition key 'west' does not match .*store_id/),
    ]);
    expect(Buffer.from(letters[1]!.dataBase64, 'base64').toString()).toBe('not json at all');
    const progress = d.results.flatMap((r) => r.result.progress);
    expect(progress.reduce((n, p) => n + p.numDeadLetteredRows, 0)).toBe(3);
    expect(progress.reduce((n, p) => n + p.numInputRows, 0)).toBe(10);
  });

  it('a crash after the commit but before Lambda gets the response redelivers without duplicates', async () => {
    const d = await deploy(emulators, query('append', { kind: 's3-files' }), 1);
    await d.put(asRecords(sales));
    let crashes = 0;
    await d.drain({
      hooks: { afterInvoke: () => { if (crashes < 3) { crashes++; throw new Error('container died before responding'); } } },
    });
    expect(crashes).toBe(3);
    const rows = canonical(await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix));
    expect(new Set(rows).size).toBe(rows.length);
    expect(rows.every((r) => expected.includes(r))).toBe(true);
    const inputRows = d.results.flatMap((r) => r.result.progress).reduce((n, p) => n + p.numInputRows, 0);
    expect(inputRows).toBe(sales.length);
  });

  it('drain mode (availableNow) reads every shard from its checkpoint with GetRecords until caught up', async () => {
    const d = await deploy(emulators, query('update', { kind: 'dynamodb' }), 2);
    await d.put(asRecords(sales.slice(0, 30)));
    await d.tick(Date.now(), 'drain');
    await d.put(asRecords(sales.slice(30)));
    const summary = await d.tick(Date.now(), 'drain') as { shards: { batches: number; error?: string }[] };
    expect(summary.shards.every((s) => s.error === undefined)).toBe(true);
    expect(canonical(await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!))).toEqual(expected);
    const progress = d.results.flatMap((r) => r.result.progress);
    expect(progress.reduce((n, p) => n + p.numInputRows, 0)).toBe(sales.length);
  });

  it('a scheduled trigger racing the Kinesis trigger on the same shards changes nothing', async () => {
    const d = await deploy(emulators, query('append', { kind: 's3-files' }), 2);
    await d.put(asRecords(sales));
    let ticking = true;
    const ticks = (async () => {
      // Drain ticks read the same records the event source mapping delivers; the checkpoint's
      // conditional writes let exactly one of them commit each batch.
      while (ticking) await d.tick(Date.now(), 'drain');
    })();
    await d.drain();
    ticking = false;
    await ticks;
    const rows = canonical(await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix));
    expect(new Set(rows).size).toBe(rows.length);
    expect(rows.every((r) => expected.includes(r))).toBe(true);
    const progress = d.results.flatMap((r) => r.result.progress);
    expect(progress.reduce((n, p) => n + p.numInputRows, 0)).toBe(sales.length);
  });

  it('splitting a stream under a state that cannot be divided by key is refused loudly, not answered from part of it', async () => {
    // No partition key declared: allowed in one stage only because the stream had one shard.
    const d = await deploy(emulators, { ...query('update', { kind: 'dynamodb' }), source: { schema: 'store_id string, amount long, ts timestamp' } }, 1);
    await d.put(asRecords(sales.slice(0, 10)));
    await d.drain();
    const [parent] = await listAllShards(d.clients.kinesis, d.config.streamName);
    await splitShardEvenly(d.clients.kinesis, d.config.streamName, parent!.ShardId!);
    await waitForStreamActive(d.clients.kinesis, d.config.streamName);
    await d.put(asRecords(sales.slice(10, 20)));
    const errors: string[] = [];
    const quiet = createQuietObservability('reshard');
    const observability = { ...quiet, logger: { ...quiet.logger, error: (_m: string, extra: { error?: Error }) => { errors.push(extra.error?.message ?? ''); }, info: () => {} } };
    const failed: unknown[] = [];
    await d.drain({ maximumRetryAttempts: 1, onFailure: (info) => { failed.push(info); } }, { observability: observability as never });
    expect(errors.some((e) => /Shard shardId-000000000000 was split[\s\S]*cannot be divided[\s\S]*How to fix/.test(e))).toBe(true);
    expect(failed.length).toBeGreaterThan(0);
    // Nothing from the children reached the sink: the answer is the parent's alone, not a wrong one.
    const inputs = d.results.flatMap((r) => r.result.progress).reduce((n, p) => n + p.numInputRows, 0);
    expect(inputs).toBe(10);
  });
});
