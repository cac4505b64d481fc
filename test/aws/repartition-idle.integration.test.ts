/**
 * The scheduled function tells every state partition when a source shard is idle. A shard that had
 * committed no batch yet (a new child of a split, a shard no key hashed to so far) was announced
 * as idle at batch 0, so stage 2 took that shard's real batch 0, when its first records came, as a
 * duplicate and dropped its rows (`npm run chaos -- --reshard`: a row missing from an hourly count).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, sum } from '../../lib/plan/functions.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { deploy } from '../support/aws-pipeline.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

it('a source shard confirmed idle before its first batch: its first records still count (repartition stage)', async () => {
  const query = defineQuery({
    name: 'idle-before-first-batch',
    source: { schema: 'store_id string, amount long' },
    transform: (df) => df.groupBy(col('store_id')).agg(sum('amount').as('revenue'), count('*').as('orders')),
    outputMode: 'update',
    sink: { kind: 'dynamodb' },
  });
  const d = await deploy(emulators, query, 1, { repartitionShards: 2, expectedShardCount: undefined });
  // Nothing in the stream yet: the shard is caught up; the second tick, past the idle timeout,
  // confirms it idle and tells both state partitions.
  const now = Date.now();
  await d.tick(now);
  await d.tick(now + 120_000);
  const sales = ['north', 'south', 'east', 'west', 'north', 'east'].map((store, i) => ({ store_id: store, amount: 10 + i }));
  await d.put(sales.map((s, i) => ({ data: JSON.stringify(s), partitionKey: `k${i}` })));
  await d.drain();
  const rows = (await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!))
    .map((r) => [r.store_id, Number(r.orders), Number(r.revenue)])
    .sort((a, b) => String(a[0]).localeCompare(String(b[0])));
  expect(rows).toEqual([['east', 2, 27], ['north', 2, 24], ['south', 1, 11], ['west', 1, 13]]);
}, 120_000);
