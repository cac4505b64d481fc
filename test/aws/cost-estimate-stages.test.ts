/** `sluice cost` per stage: where a hop's costs go, and how they follow the internal stream's shards. */
import { describe, expect, it } from 'vitest';
import { estimateMonthlyCost } from '../../lib/aws/cost-estimate.js';
import { estimateMultiSourceCost, estimateQueryCost } from '../../lib/aws/multi-source-cost.js';
import { hourlySalesQuery } from '../../lib/local/dev/default-query.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { col, count, window } from '../../lib/plan/functions.js';
import { joinQuery } from '../support/join-queries.js';
import { joinThenCountByAmount } from '../support/chain-queries.js';

const base = hourlySalesQuery('update', 'cost-stages');
const unkeyed = defineQuery({ ...base, source: { ...base.source, partitionKey: undefined } });
const quantity = (e: { lines: readonly { component: string; quantity: number }[] }, component: string): number =>
  e.lines.find((l) => l.component === component)!.quantity;

describe('sluice cost per stage', () => {
  it('a co-partitioned query has one stage; without a partition key its state and sink move to stage 2 behind a hop', async () => {
    const input = { recordsPerSecond: 400, shards: 2, batchSize: 100 };
    const keyed = await estimateMonthlyCost(base, input);
    expect(keyed.hops).toEqual([]);
    expect(new Set(keyed.lines.map((l) => l.stage))).toEqual(new Set([1]));

    const staged = await estimateMonthlyCost(unkeyed, input);
    expect(staged.hops).toHaveLength(1);
    expect(quantity(staged, 'DynamoDB state writes')).toBe(0);
    expect(quantity(staged, 'DynamoDB sink writes')).toBe(0);
    expect(quantity(staged, 'stage 2 DynamoDB state writes')).toBeGreaterThan(0);
    expect(quantity(staged, 'stage 2 DynamoDB sink writes')).toBeGreaterThan(0);
    // 200 records/s per shard in batches of 100: 4 batches/s, one record to each of 2 internal shards.
    expect(staged.hops[0]!.recordsPerSecond).toBe(8);
    expect(quantity(staged, 'stage 2 Kinesis PUT payload units')).toBe(8 * 730 * 3600);
    expect(quantity(staged, 'stage 2 Kinesis shard-hours')).toBe(2 * 730);
    // 4 internal records/s per internal shard: one invocation per 1 s window each.
    expect(staged.hops[0]!.invocationsPerMonth).toBe(2 * 730 * 3600);
    expect(staged.hops[0]!.perBatch.records).toBe(4);

    // Four internal shards: twice the records crossing and twice the shard-hours.
    const wider = await estimateMonthlyCost(unkeyed, { ...input, internalShards: 4 });
    expect(wider.hops[0]!.recordsPerSecond).toBe(16);
    expect(quantity(wider, 'stage 2 Kinesis shard-hours')).toBe(4 * 730);
  });

  it('a join over two streams: each source its own lines at its own rate, the join stage behind the hop', async () => {
    const e = await estimateMultiSourceCost(joinQuery('cost-join-stages', 'inner'), { sourceRates: { orders: 300, payments: 100 }, shards: 1, batchSize: 100 });
    expect(quantity(e, 'orders: Kinesis PUT payload units')).toBe(300 * 730 * 3600);
    expect(quantity(e, 'payments: Kinesis PUT payload units')).toBe(100 * 730 * 3600);
    expect(quantity(e, 'orders: Lambda requests')).toBe(3 * quantity(e, 'payments: Lambda requests'));
    expect(e.hops).toHaveLength(1);
    expect(e.lines.filter((l) => l.stage === 2).length).toBeGreaterThan(0);
    expect(e.notEstimated).toBeUndefined();
    expect(quantity(e, 'stage 2 DynamoDB state writes')).toBeGreaterThan(0);
    expect(e.assumptions!.join(' ')).toMatch(/80% of the rows of payments match a row of orders/);
  });

  it('a join\'s output and sink writes follow the match rate; its state holds both sides', async () => {
    const sink = { kind: 'dynamodb' as const, keyColumns: ['order_id'] };
    const at = (matchRate: number) => estimateMultiSourceCost(joinQuery('cost-join-match', 'inner', sink), {
      sourceRates: { orders: 200, payments: 100 }, shards: 1, batchSize: 100, matchRate,
    });
    const [all, half, none] = await Promise.all([at(1), at(0.5), at(0)]);
    const joined = (e: typeof all): number => e.stages!.find((s) => s.stage === 2)!.outputRows;
    // Every payment has paid > 0 (bar every 1000th): its matched share is the join's output.
    expect(joined(all)).toBeCloseTo(100, -1);
    expect(joined(half)).toBeCloseTo(50, -1);
    expect(joined(none)).toBe(0);
    expect(quantity(half, 'stage 2 DynamoDB sink writes')).toBeCloseTo(joined(half) * 730 * 3600, -3);
    // Unmatched rows are buffered too: the state is written whatever the match rate.
    expect(quantity(none, 'stage 2 DynamoDB state writes')).toBeGreaterThan(0.5 * quantity(all, 'stage 2 DynamoDB state writes'));
  });

  it('each hop\'s rate is what crosses it: hop 2 carries the join\'s batches, not stage 1\'s', async () => {
    const e = await estimateMultiSourceCost(joinThenCountByAmount('cost-join-count'), {
      sourceRates: { orders: 400, payments: 300 }, shards: 2, internalShards: 2, batchSize: 100,
    });
    expect(e.hops.map((h) => h.hop)).toEqual([1, 2]);
    const stage = (n: number) => e.stages!.find((s) => s.stage === n)!;
    const sourceBatches = e.stages!.filter((s) => s.stage === 1).reduce((a, s) => a + s.batches, 0);
    // Stage 1: 4 shard-streams of 200 and 150 records/s in batches of 100, one record per batch to each internal shard.
    expect(e.hops[0]!.recordsPerSecond).toBeCloseTo(sourceBatches * 2, 6);
    // Hop 2: each of the join's batches sends one record to each of the 2 shards of the next stream.
    expect(e.hops[1]!.recordsPerSecond).toBeCloseTo(stage(2).batches * 2, 6);
    expect(e.hops[1]!.recordsPerSecond).not.toBeCloseTo(e.hops[0]!.recordsPerSecond, 0);
    expect(e.hops[1]!.invocationsPerMonth).toBeCloseTo(stage(3).invocations * 730 * 3600, -3);
  });

  it('a single stream\'s chain of hops (dedup → count by window): hop 2 carries stage 2\'s batches; stage 1 keeps its unprefixed lines', async () => {
    const dedupThenCount = defineQuery({
      name: 'cost-dedup-count',
      source: { format: 'json', schema: 'user_id string, event_type string, ts timestamp' },
      transform: (events) => events.withWatermark('ts', '10 minutes').dropDuplicates(['user_id', 'ts'])
        .groupBy(window(col('ts'), '15 minutes')).agg(count('*').as('events')),
      outputMode: 'append', sink: { kind: 's3-files' },
    });
    const e = await estimateQueryCost(dedupThenCount, { sourceRates: { any: 400 }, shards: 2, internalShards: 3, batchSize: 100 });
    expect(e.hops.map((h) => h.hop)).toEqual([1, 2]);
    expect(quantity(e, 'Kinesis PUT payload units')).toBe(400 * 730 * 3600);
    const stage = (n: number) => e.stages!.find((s) => s.stage === n)!;
    // 200 records/s per shard in batches of 100: 4 batches/s, each one record to each of 3 internal shards.
    expect(e.hops[0]!.recordsPerSecond).toBeCloseTo(stage(1).batches * 3, 6);
    expect(stage(1).batches).toBeCloseTo(4, 6);
    expect(e.hops[1]!.recordsPerSecond).toBeCloseTo(stage(2).batches * 3, 6);
    expect(quantity(e, 'stage 3 Kinesis PUT payload units')).toBeCloseTo(e.hops[1]!.recordsPerSecond * 730 * 3600, -3);
  });
  it('one hop: stage 2 groups only the rows routed to its internal shard, so rows of a group collapse as the deployed stage collapses them', async () => {
    // `unkeyed`: (hour, store) is not co-partitioned with the stream; the records hold 50 stores (value-0…49).
    const input = { shards: 2, internalShards: 2, batchSize: 25, keys: 50, snapshotEvery: 3 };
    const sinkWritesPerRecord = (e: Awaited<ReturnType<typeof estimateQueryCost>>, rate: number) => quantity(e, 'stage 2 DynamoDB sink writes') / (rate * 730 * 3600);
    // 500 records/s: each internal shard is invoked once a second with its 25 stores' rows: 50 writes a second.
    const fast = await estimateQueryCost(unkeyed, { ...input, sourceRates: { sales: 500 } });
    expect(fast.hops).toHaveLength(1);
    expect(sinkWritesPerRecord(fast, 500)).toBeCloseTo(50 / 500, 6);
    // 50 records/s: every row is a store of its own within the second, one write each.
    expect(sinkWritesPerRecord(await estimateQueryCost(unkeyed, { ...input, sourceRates: { sales: 50 } }), 50)).toBeCloseTo(1, 6);
  });
});
