/**
 * "Change the repartition shard count later" as an operation: the construct's
 * `repartitionShardCount` goes 2 → 4 → 2 on a deployed left outer join of two streams. Each change
 * reaches the internal stream as CloudFormation applies a new ShardCount (UpdateShardCount, uniform
 * scaling; the count is read from the synthesized template, and test/cdk's
 * repartition-shard-count-change test shows nothing else changes). The new shards start from their
 * parents' join state restricted to their hash ranges (or the union), after the parents' last
 * records are committed; the sink holds the in-memory engine's rows, as without the change.
 */
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SluiceQuery } from '../../cdk/sluice-query.js';
import { readS3Files } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { listAllShards, updateShardCount } from '../../lib/local/kinesis-admin.js';
import type { MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import joinFixture from '../cdk/fixtures/orders-payments-join.js';
import { fixture, testStack } from '../cdk/support.js';
import { deploy } from '../support/aws-pipeline.js';
import { canonicalRow, inMemoryJoin, joinEvents, joinPhases, prng } from '../support/join-queries.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

/** The internal stream's ShardCount in the template the construct synthesizes for `repartitionShardCount`. */
function internalShardCount(repartitionShardCount: number): number {
  const stack = testStack();
  const orders = new kinesis.Stream(stack, 'Orders', { shardCount: 2 });
  const payments = new kinesis.Stream(stack, 'Payments', { shardCount: 2 });
  const query = new SluiceQuery(stack, 'Join', { queryModule: fixture('orders-payments-join.ts'), streams: { orders, payments }, repartitionShardCount });
  const internal = stack.getLogicalId(query.repartitionStream!.node.defaultChild as never);
  const resources = (Template.fromStack(stack).toJSON() as { Resources: Record<string, { Properties: { ShardCount: number } }> }).Resources;
  return resources[internal]!.Properties.ShardCount;
}

describe('changing repartitionShardCount of a deployed join', () => {
  it('2 → 4 → 2 shards between phases: the in-memory answer', async () => {
    const query = { ...(joinFixture as MultiSourceQueryDefinition), name: 'shard-count-change' };
    const events = joinEvents(240, 41);
    const expected = await inMemoryJoin(query, events);
    expect(expected.length).toBeGreaterThan(100);
    const counts = [2, 4, 2].map(internalShardCount);
    expect(counts).toEqual([2, 4, 2]);
    const d = await deploy(emulators, query, 2, { repartitionShards: counts[0]!, expectedShardCount: undefined });
    const rand = prng(29);
    const key = () => `k${Math.floor(rand() * 1e6)}`;
    const phases = joinPhases(events);
    for (let i = 0; i < phases.length; i++) {
      await d.put(phases[i]!.orders.map((e) => ({ data: JSON.stringify(e), partitionKey: key() })), 'orders');
      await d.put(phases[i]!.payments.map((e) => ({ data: JSON.stringify(e), partitionKey: key() })), 'payments');
      await d.drain({ batchSize: 20 });
      // The next deploy's change, as CloudFormation applies it to the internal stream.
      if (counts[i + 1] !== undefined) await updateShardCount(d.clients.kinesis, d.config.repartitionStreamName!, counts[i + 1]!);
    }
    await d.drain({ batchSize: 20 });
    for (let tick = 0; tick < 3; tick++) await d.tick(Date.now() + 3_600_000);
    const rows = (await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)).map((r) => canonicalRow(r)).sort();
    expect(rows).toEqual(expected);
    const shards = await listAllShards(d.clients.kinesis, d.config.repartitionStreamName!);
    expect(shards.filter((s) => s.SequenceNumberRange?.EndingSequenceNumber === undefined)).toHaveLength(2);
    // Shards created by the changes committed batches of the join.
    const original = new Set(['shardId-000000000000', 'shardId-000000000001']);
    expect(d.results.some((r) => r.result.stage.index === 1 && !original.has(r.shardId) && r.result.progress.length > 0)).toBe(true);
  }, Number(process.env.RESHARD_TEST_TIMEOUT_MS ?? 600_000));
});
