/**
 * Update mode → DynamoDB: hourly sales per product, over the same sales stream as the per-store
 * queries. The producer partitions the stream by `store_id`, so the events of one product arrive
 * on every shard: the state (keyed by hour and product) is not co-partitioned with the stream.
 * Deployed on a stream with several shards, the query runs with a repartition stage: stage 1 on
 * each source shard routes rows by `product` to an internal stream, stage 2 on each internal shard
 * keeps the hourly totals of its products and upserts them (`explainQuery` shows the cut).
 *
 * Events carry a `product` field next to the per-store fields; the per-store queries ignore it, and
 * an event without one counts under a NULL product.
 */
import { col, count, defineQuery, sum, window, type KinesisSourceSpec } from 'sluice';
import { SALES_EVENTS } from './hourly-sales.js';

export const SALES_EVENTS_WITH_PRODUCT: KinesisSourceSpec = {
  ...SALES_EVENTS,
  schema: 'store_id string, product string, amount double, ts timestamp',
};

export default defineQuery({
  name: 'hourly-sales-per-product',
  source: SALES_EVENTS_WITH_PRODUCT,
  transform: (events) => events
    .withWatermark('ts', '15 minutes')
    .groupBy(window(col('ts'), '1 hour'), col('product'))
    .agg(sum('amount').as('sales'), count().as('orders')),
  outputMode: 'update',
  sink: { kind: 'dynamodb' },
});
