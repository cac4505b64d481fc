/**
 * Seed 003 as a deployable pipeline: hourly sales per store over Kinesis events
 * `{ "store_id": "north", "amount": 12.5, "ts": "2024-05-01T14:40:00Z" }`, with a 15-minute
 * watermark. The producer uses `store_id` as the Kinesis partition key, so every store's state
 * lives on one shard and the query runs on any number of shards.
 *
 * The same transformation is deployed three ways (one module per deployment, each default-exporting
 * its definition): `hourly-sales-archive.ts` (append → S3 files), `hourly-sales-live.ts`
 * (update → DynamoDB) and `hourly-sales-snapshot.ts` (complete → S3 snapshot).
 */
import {
  col, count, defineQuery, sum, window,
  type DataFrame, type KinesisSourceSpec, type OutputMode, type SinkSpec, type StreamingQueryDefinition,
} from 'sluice';

export const SALES_EVENTS: KinesisSourceSpec = {
  format: 'json',
  schema: 'store_id string, amount double, ts timestamp',
  partitionKey: 'store_id',
};

/** One row per (hour, store): the sales total and the number of orders. */
export function hourlySalesPerStore(events: DataFrame): DataFrame {
  return events
    .withWatermark('ts', '15 minutes')
    .groupBy(window(col('ts'), '1 hour'), col('store_id'))
    .agg(sum('amount').as('sales'), count().as('orders'));
}

export function hourlySalesQuery(name: string, outputMode: OutputMode, sink: SinkSpec): StreamingQueryDefinition {
  return defineQuery({ name, source: SALES_EVENTS, transform: hourlySalesPerStore, outputMode, sink });
}
