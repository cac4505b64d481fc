/** `sluice cost` per stage: where a hop's costs go, and how they follow the internal stream's shards. */
import { describe, expect, it } from 'vitest';
import { estimateMonthlyCost, estimateMultiSourceCost } from '../../lib/aws/cost-estimate.js';
import { hourlySalesQuery } from '../../lib/local/dev/default-query.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { joinQuery } from '../support/join-queries.js';

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
    expect(e.notEstimated).toEqual(['stage 2 state writes (inner Join)', 'stage 2 sink writes']);
  });
});
