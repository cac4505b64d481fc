/**
 * A windowed count not keyed by the partition key (orders per hour): on one shard it runs in one
 * stage, on more it needs a repartition stage. The reshard emulator tests share it.
 */
import { col, count, window } from '../../lib/plan/functions.js';
import { defineQuery, type QueryDefinition } from '../../lib/query/query-definition.js';

export const ordersPerHour = (name: string): QueryDefinition => defineQuery({
  name,
  source: { schema: 'order_id string, ts timestamp' },
  transform: (df) => df.withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '1 hour')).agg(count('*').as('orders')),
  outputMode: 'update',
  sink: { kind: 'dynamodb' },
});

/**
 * Distinct orders per hour: a deduplication then a count by window. On more than one shard it
 * needs two internal streams (each operator its own stage), so a one-stage state cannot move
 * into one stage 2 at a split: the refusal the reshard tests keep seeing.
 */
export const distinctOrdersPerHour = (name: string): QueryDefinition => defineQuery({
  name,
  source: { schema: 'order_id string, ts timestamp' },
  transform: (df) => df.withWatermark('ts', '10 minutes').dropDuplicates(['order_id', 'ts']).groupBy(window(col('ts'), '1 hour')).agg(count('*').as('orders')),
  outputMode: 'update',
  sink: { kind: 'dynamodb' },
});

/** `n` orders from `from` on, one a minute from 10:10, each its own partition key. */
export const orders = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({
  data: JSON.stringify({ order_id: `o${from + i}`, ts: `2024-05-01T10:${String(10 + from + i).padStart(2, '0')}:00Z` }),
  partitionKey: `o${from + i}`,
}));
