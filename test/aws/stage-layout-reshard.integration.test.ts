/**
 * The likeliest way to meet an unsplittable state: a construct-made stream of one shard runs a
 * count per hour (not keyed by the partition key) in one stage; the user raises `shardCount` to 2
 * and deploys. CloudFormation splits the shard (UpdateShardCount), and the functions now compile
 * the query for two shards: a stateless stage 1 and a stage 2 holding the count. The old shard's
 * count stays in its partition. Before, the split children (no metadata of their own) ran the new
 * stage 1 and stage 2 counted from zero: the sink's hour went from 6 orders to 4 (the answer is
 * 10). When all the state runs in stage 2 of the new layout, it moves there
 * (stage-migration.integration.test.ts). Here it cannot: a deduplication then a count per hour
 * need two internal streams, so the state would be split between two stages. Each child is refused
 * (RESHARD_STAGE_CHANGED, not retryable) and the sink keeps 6.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { reshardStream } from '../../lib/local/kinesis-admin.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { deploy } from '../support/aws-pipeline.js';
import { RefusedShardStore } from '../../lib/aws/refused-shards.js';
import { distinctOrdersPerHour, orders } from '../support/orders-per-hour.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const perHour = distinctOrdersPerHour('distinct-orders-per-hour-layout');

const ordersOfTheHour = async (d: Awaited<ReturnType<typeof deploy>>): Promise<number[]> =>
  (await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!)).map((r) => Number(r.orders));

describe('a one-shard query redeployed for two shards (two repartition stages added) behind a split', () => {
  it('refuses the split children instead of restarting the count from empty', async () => {
    // Deployed as the redeploy configures it (two expected shards, the internal stream); the first
    // phase runs the query as the first deploy compiled it, for one shard: in one stage.
    const d = await deploy(emulators, perHour, 1, { repartitionShards: 1, expectedShardCount: 2, hops: 2 });
    const firstDeploy = compileQuery(perHour, { expectedShardCount: 1 });
    expect(firstDeploy.hops).toHaveLength(0);
    await d.put(orders(0, 6));
    await d.tick(Date.now(), 'drain', firstDeploy as never);
    expect(await ordersOfTheHour(d)).toEqual([6]);

    // The redeploy: shardCount 2 (the functions compile for two shards) and the split it causes (UpdateShardCount 1 → 2 is one SplitShard).
    await reshardStream(d.clients.kinesis, d.config.streamName, [{ split: 'first-open' }]);
    await d.put(orders(6, 4));
    // The new functions' scheduled drain (the same guard as the event source mapping's path).
    for (let i = 0; i < 3; i++) await d.tick(Date.now(), 'drain');

    const children = ['shardId-000000000001', 'shardId-000000000002'];
    expect(d.results.filter((r) => children.includes(r.shardId) && r.result.progress.length > 0)).toEqual([]);
    const refused = await new RefusedShardStore({ client: d.clients.dynamodb, checkpointTable: d.config.checkpointTable, namespace: perHour.name }).list();
    expect(refused.map((r) => [r.partitionId, r.code])).toEqual(children.map((c) => [c, 'RESHARD_STAGE_CHANGED']));
    expect(await ordersOfTheHour(d)).toEqual([6]);
  }, 240_000);
});
