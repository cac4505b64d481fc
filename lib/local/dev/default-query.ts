/**
 * The query `sluice dev` runs when no module is given: seed 003's hourly sales per store over
 * Kinesis events `{ "store_id": "north", "amount": 12.25, "ts": "2024-05-01T14:40:00Z" }`, with a
 * 15-minute watermark. The producer uses `store_id` as the partition key, so each store's state
 * lives on one shard and the query runs on any number of shards.
 *
 * The output mode picks the sink: update → DynamoDB upserts (the default), append → S3 files
 * (each hour written once, after the watermark closes it), complete → S3 snapshot.
 */
import { defineQuery, type KinesisSourceSpec, type SinkSpec, type StreamingQueryDefinition } from '../../query/query-definition.js';
import type { OutputMode } from '../../core/output-mode.js';
import { hourlySalesPerStore, SALES_EVENTS } from '../../../examples/hourly-sales.js';
import perProduct, { SALES_EVENTS_WITH_PRODUCT } from '../../../examples/hourly-sales-per-product.js';

// The same definitions the example CDK stack deploys (examples/), so `sluice dev` runs them as deployed.
export const SALES_SOURCE: KinesisSourceSpec = SALES_EVENTS;
export { hourlySalesPerStore };

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
export const SALES_WITH_PRODUCT_SOURCE: KinesisSourceSpec = SALES_EVENTS_WITH_PRODUCT;

/**
 * Hourly sales per product, update mode → DynamoDB. The stream is partitioned by store, so on
 * several shards this query's state is not co-partitioned: it runs with a repartition stage.
 */
export function hourlySalesPerProductQuery(name = 'hourly-sales-per-product'): StreamingQueryDefinition {
  return defineQuery({ ...perProduct, name });
}
