/**
 * Multi-stage queries over the orders and payments streams for the chain tests (memory backends
 * and emulators): a join then a windowed aggregate (Spark 4's chained stateful operators in append
 * mode), and stateful operators over a union of the two streams.
 */
import { defineQuery, type MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import { interval } from '../../lib/plan/column.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { ORDERS_SCHEMA, PAYMENTS_SCHEMA, type JoinShape } from './join-queries.js';

const sources = { orders: { schema: ORDERS_SCHEMA }, payments: { schema: PAYMENTS_SCHEMA } };

/** orders ⋈ payments (within 30 minutes), then per 10-minute window of the order: paid orders and their total. */
export function joinThenWindowedSum(name: string, how: JoinShape = 'inner'): MultiSourceQueryDefinition {
  return defineQuery({
    name, sources, outputMode: 'append', sink: { kind: 's3-files' },
    transform: ({ orders, payments }) => orders!.withWatermark('ts', '10 minutes')
      .join(
        payments!.filter(col('paid').gt(0)).withWatermark('pts', '10 minutes'),
        col('order_id').eq(col('ref')).and(col('pts').between(col('ts'), col('ts').plus(interval('30 minutes')))),
        how,
      )
      .groupBy(window(col('ts'), '10 minutes')).agg(count('*').as('orders'), sum(col('paid')).as('paid')),
  });
}

/** The join, then a count per order id of its payments (a stateful operator keyed by another column). */
export function joinThenCountPerOrder(name: string): MultiSourceQueryDefinition {
  return defineQuery({
    name, sources, outputMode: 'update', sink: { kind: 'dynamodb' },
    transform: ({ orders, payments }) => orders!.withWatermark('ts', '10 minutes')
      .join(payments!.withWatermark('pts', '10 minutes'),
        col('order_id').eq(col('ref')).and(col('pts').between(col('ts'), col('ts').plus(interval('30 minutes')))))
      .groupBy(col('amount')).agg(count('*').as('payments')),
  });
}

/** Both streams as one of ids and times, then a count per 10-minute window (an aggregate over a union). */
export function unionThenWindowedCount(name: string): MultiSourceQueryDefinition {
  return defineQuery({
    name, sources, outputMode: 'append', sink: { kind: 's3-files' },
    transform: ({ orders, payments }) => orders!.select(col('order_id').as('id'), col('ts'))
      .union(payments!.select(col('ref').as('id'), col('pts').as('ts')))
      .withWatermark('ts', '10 minutes')
      .groupBy(window(col('ts'), '10 minutes')).agg(count('*').as('events')),
  });
}

/** Both streams' ids, each once within the watermark (a deduplication over a union); which copy wins depends on arrival, so only the id is kept. */
export function unionThenDedup(name: string): MultiSourceQueryDefinition {
  return defineQuery({
    name, sources, outputMode: 'append', sink: { kind: 's3-files' },
    transform: ({ orders, payments }) => orders!.select(col('order_id').as('id'), col('ts'))
      .union(payments!.select(col('ref').as('id'), col('pts').as('ts')))
      .withWatermark('ts', '10 minutes')
      .dropDuplicatesWithinWatermark(['id'])
      .select('id'),
  });
}
