/**
 * The query `sluice dev` runs when no module is given: seed 003's hourly sales per store over
 * Kinesis events `{ "store_id": "north", "amount": 12.25, "ts": "2024-05-01T14:40:00Z" }`, with a
 * 15-minute watermark. The producer uses `store_id` as the partition key, so each store's state
 * lives on one shard and the query runs on any number of shards.
 *
 * The output mode picks the sink: update → DynamoDB upserts (the default), append → S3 files
 * (each hour written once, after the watermark closes it), complete → S3 snapshot.
 */
import type { DataFrame } from '../../api/data-frame.js';
import type { OutputMode } from '../../core/output-mode.js';
import { col, count, sum, window } from '../../plan/functions.js';
import { defineQuery, type KinesisSourceSpec, type SinkSpec, type StreamingQueryDefinition } from '../../query/query-definition.js';

// The queries of the repository's examples/ (which the example CDK stack deploys), shipped with the
// package so that `npx sluice dev` has a pipeline to run before the user writes one.
export const SALES_SOURCE: KinesisSourceSpec = {
  format: 'json',
  schema: 'store_id string, amount double, ts timestamp',
  partitionKey: 'store_id',
};

/** One row per (hour, store): the sales total and the number of orders. */
export function hourlySalesPerStore(events: DataFrame): DataFrame {
  return hourlySalesBy(events, 'store_id');
}

function hourlySalesBy(events: DataFrame, key: string): DataFrame {
  return events
    .withWatermark('ts', '15 minutes')
    .groupBy(window(col('ts'), '1 hour'), col(key))
    .agg(sum('amount').as('sales'), count().as('orders'));
}

/** The sink each output mode is shown with. */
export function defaultSinkFor(mode: OutputMode): SinkSpec {
  switch (mode) {
    case 'append': return { kind: 's3-files', prefix: 'hourly-sales/files/' };
    case 'complete': return { kind: 's3-snapshot', prefix: 'hourly-sales/snapshot/' };
    default: return { kind: 'dynamodb' };
  }
}

export function hourlySalesQuery(mode: OutputMode = 'update', name = `hourly-sales-${mode}`): StreamingQueryDefinition {
  return defineQuery({ name, source: SALES_SOURCE, transform: hourlySalesPerStore, outputMode: mode, sink: defaultSinkFor(mode) });
}

export default hourlySalesQuery('update');

/** The same sales events with their product: schema of `hourlySalesPerProductQuery`. */
export const SALES_WITH_PRODUCT_SOURCE: KinesisSourceSpec = {
  ...SALES_SOURCE,
  schema: 'store_id string, product string, amount double, ts timestamp',
};

/**
 * Hourly sales per product, update mode → DynamoDB. The stream is partitioned by store, so on
 * several shards this query's state is not co-partitioned: it runs with a repartition stage.
 */
export function hourlySalesPerProductQuery(name = 'hourly-sales-per-product'): StreamingQueryDefinition {
  return defineQuery({
    name, source: SALES_WITH_PRODUCT_SOURCE, transform: (events) => hourlySalesBy(events, 'product'), outputMode: 'update', sink: { kind: 'dynamodb' },
  });
}
