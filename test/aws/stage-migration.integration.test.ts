/**
 * A query that ran in one stage on a one-shard stream (its state not keyed by the partition key)
 * meets a split while its functions now compile a repartition stage (shardCount raised, or an
 * on-demand stream scaling up): the one-stage state moves to stage 2 (lib/checkpoint/stage-migration.ts)
 * and the query goes on. The sink equals the in-memory answer over every record, never resharded.
 * Before, the split children were refused (RESHARD_STAGE_CHANGED) and the sink stayed at the first
 * phase's values.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { reshardStream } from '../../lib/local/kinesis-admin.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { SluiceSession } from '../../lib/api/session.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import { deploy, type InvocationWrapper } from '../support/aws-pipeline.js';
import { shardIdOf } from '../../lib/aws/kinesis-trigger-handler.js';
import { DynamoDbCheckpoint } from '../../lib/aws/dynamodb-checkpoint.js';
import type { KinesisStreamBatchResponse, KinesisStreamEvent } from 'aws-lambda';
import { canonicalSales, hourlySales, inMemoryHourlySales, SALES_SCHEMA, type Sale } from '../support/hourly-sales.js';
import { orders, ordersPerHour } from '../support/orders-per-hour.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const children = ['shardId-000000000001', 'shardId-000000000002'];
const parent = 'shardId-000000000000';

async function until(condition: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('a one-stage stateful query whose stream splits under functions compiled with a repartition stage', () => {
  it('a count per hour (one stage-2 partition): the count goes on from the one-stage state (drain path)', async () => {
    const perHour = ordersPerHour('orders-per-hour-migrate');
    const d = await deploy(emulators, perHour, 1, { repartitionShards: 1, expectedShardCount: 2 });
    const firstDeploy = compileQuery(perHour, { expectedShardCount: 1 });
    expect(firstDeploy.hops).toHaveLength(0);
    await d.put(orders(0, 6));
    await d.tick(Date.now(), 'drain', firstDeploy as never);
    const sink = async (): Promise<number[]> => (await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!)).map((r) => Number(r.orders));
    expect(await sink()).toEqual([6]);

    await reshardStream(d.clients.kinesis, d.config.streamName, [{ split: 'first-open' }]);
    await d.put(orders(6, 4));
    for (let i = 0; i < 3; i++) await d.tick(Date.now(), 'drain');

    // The children ran (stage 1), and stage 2 counted on from the parent's 6: 10, as never resharded.
    expect(d.results.some((r) => children.includes(r.shardId) && r.result.progress.length > 0)).toBe(true);
    expect(d.results.filter((r) => r.result.error).map((r) => r.result.error!.message)).toEqual([]);
    expect(await sink()).toEqual([10]);
  }, 240_000);

  it('records left uncommitted on the one-stage shard when the new functions arrive: they run in one stage, once, then the state moves (mapping behind at the deploy)', async () => {
    const perHour = ordersPerHour('orders-per-hour-behind');
    // The shards whose delivery the stage-1 function answered with a retry (Lambda retries them).
    const retried = new Set<string>();
    const asFunction: InvocationWrapper = async (role, invoke, event) => {
      const out = await invoke();
      const failures = role === 'kinesisTrigger' ? (out as KinesisStreamBatchResponse).batchItemFailures ?? [] : [];
      if (failures.length > 0) for (const record of (event as KinesisStreamEvent).Records) retried.add(shardIdOf(record));
      return out;
    };
    const d = await deploy(emulators, perHour, 1, { repartitionShards: 1, expectedShardCount: 2, asFunction });
    const firstDeploy = compileQuery(perHour, { expectedShardCount: 1 });
    const sink = async (): Promise<number[]> => (await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!)).map((r) => Number(r.orders));
    await d.put(orders(0, 6));
    await d.tick(Date.now(), 'drain', firstDeploy as never);
    expect(await sink()).toEqual([6]);

    // The mapping is behind: three orders on the one-stage shard are not committed when it splits and the two-stage functions arrive.
    await d.put(orders(6, 3));
    await reshardStream(d.clients.kinesis, d.config.streamName, [{ split: 'first-open' }]);
    await d.put(orders(9, 4));
    const draining = d.drain();
    // The stage-1 function gets the parent's records and cannot run them (no state or sink of its own): Lambda retries them.
    await until(() => retried.has(parent));
    expect(await sink()).toEqual([6]);
    // The scheduled function runs them through the one-stage plan, then stage 2 takes the state; the mapping goes on.
    await d.tick(Date.now(), 'tick');
    await draining;

    // Every order counted once, in the one hour: 13, as never resharded (orders 0..12 at 10:10..10:22, none late).
    expect(await sink()).toEqual([13]);
    expect(d.results.some((r) => children.includes(r.shardId) && r.result.progress.length > 0)).toBe(true);
    expect(d.results.filter((r) => r.result.error).map((r) => r.result.error!.message)).toEqual([]);
  }, 300_000);

  it('split children an older version refused after writing the one-stage metadata: they run stage 1 once the state has moved', async () => {
    const perHour = ordersPerHour('orders-per-hour-refused-before');
    const d = await deploy(emulators, perHour, 1, { repartitionShards: 1, expectedShardCount: 2 });
    const firstDeploy = compileQuery(perHour, { expectedShardCount: 1 });
    await d.put(orders(0, 6));
    await d.tick(Date.now(), 'drain', firstDeploy as never);
    await reshardStream(d.clients.kinesis, d.config.streamName, [{ split: 'first-open' }]);
    // What an older version's refused seed (RESHARD_WITH_STATE) left on each child: the parent's metadata, no commit.
    const checkpointOf = (shardId: string) => new DynamoDbCheckpoint({
      client: d.clients.dynamodb, checkpointTable: d.config.checkpointTable, stateTable: d.config.stateTable,
      queryName: perHour.name, partitionId: firstDeploy.sourceStage.checkpointPartition(shardId),
    });
    const metadata = await checkpointOf(parent).readQueryMetadata();
    expect(metadata?.fingerprint.statefulOperators.length).toBeGreaterThan(0);
    for (const child of children) await checkpointOf(child).writeQueryMetadata(metadata!);
    await d.put(orders(6, 4));
    for (let i = 0; i < 3; i++) await d.tick(Date.now(), 'drain');

    expect(d.results.filter((r) => r.result.error).map((r) => r.result.error!.message)).toEqual([]);
    expect(await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!).then((rows) => rows.map((r) => Number(r.orders)))).toEqual([10]);
  }, 240_000);

  it('a count per store and hour over two stage-2 partitions: each starts from its keys of the one-stage state (mapping path)', async () => {
    const definition = defineQuery({
      name: 'hourly-sales-migrate', source: { schema: SALES_SCHEMA }, transform: hourlySales, outputMode: 'update', sink: { kind: 'dynamodb' },
    });
    const stores = ['s1', 's2', 's3', 's4', 's5', 's6'];
    const sale = (i: number, ts: string): Sale => ({ store_id: stores[i % stores.length]!, amount: i + 1, ts: `2024-05-01T${ts}:00Z` });
    // In time order, ending at 11:40: the parent's watermark is 11:25, and the 10:00 hour is closed.
    const before = [...Array.from({ length: 18 }, (_, i) => sale(i, `10:${String(5 + i * 3).padStart(2, '0')}`)), sale(0, '11:40')];
    // After the split: sales of the open 11:00 hour, and one of the closed 10:00 hour (late: dropped, as never resharded).
    const after = [...Array.from({ length: 14 }, (_, i) => sale(i + 3, `11:${String(30 + i).padStart(2, '0')}`)), sale(1, '10:50')];
    const records = (sales: readonly Sale[], from: number) => sales.map((s, i) => ({ data: JSON.stringify(s), partitionKey: `k${from + i}` }));
    const expected = await inMemoryInTwoBatches(before, after);
    // The late sale matters: without the parent's watermark it would count.
    expect(expected).not.toEqual(await inMemoryHourlySales([...before, ...after]));

    const d = await deploy(emulators, definition, 1, { repartitionShards: 2, expectedShardCount: 2 });
    const firstDeploy = compileQuery(definition, { expectedShardCount: 1 });
    expect(firstDeploy.hops).toHaveLength(0);
    await d.put(records(before, 0));
    // The first deploy's functions (one stage, no repartition function): its scheduled drain.
    await d.tick(Date.now(), 'drain', firstDeploy as never);
    // The scheduled tick's no-data batch: the watermark passes 11:00 (Spark runs it when state would be evicted).
    await d.tick(Date.now(), 'tick', firstDeploy as never);
    const read = async (): Promise<string[]> => canonicalSales(await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!));
    expect(await read()).toEqual(await inMemoryHourlySales(before));
    expect(d.results.filter((r) => r.result.error)).toEqual([]);

    await reshardStream(d.clients.kinesis, d.config.streamName, [{ split: 'first-open' }]);
    await d.put(records(after, before.length));
    // The scheduled function's tick: the children wait, stage 2's partitions take the state; then the mappings run the records.
    await d.tick(Date.now(), 'tick');
    await d.drain();

    expect(d.results.some((r) => children.includes(r.shardId) && r.result.progress.length > 0)).toBe(true);
    expect(await read()).toEqual(expected);
  }, 300_000);
});

/** The engine in memory, update mode, the sales before and after the split as two triggers: the last row of each group. */
async function inMemoryInTwoBatches(before: readonly Sale[], after: readonly Sale[]): Promise<string[]> {
  const { stream, df } = new SluiceSession().memoryStream(SALES_SCHEMA);
  const result = hourlySales(df);
  const sink = new MemorySink();
  const q = await result.writeStream.outputMode('update').sink(sink).start();
  for (const sales of [before, after]) {
    stream.addData(sales.map((s) => [s.store_id, s.amount, parseTimestamp(s.ts)]));
    await q.processAllAvailable();
  }
  await q.stop();
  const schema = result.plan.output.map((a) => ({ name: a.name, type: a.type }));
  const last = new Map<string, Record<string, unknown>>();
  for (const row of sink.allRows().map((r) => toExternalRow(r, schema))) last.set(JSON.stringify([row.window, row.store_id]), row);
  return canonicalSales([...last.values()]);
}
