/**
 * Multi-stage queries over the orders and payments (and shipments) streams for the chain tests
 * (memory backends and emulators): a join then a windowed aggregate (Spark 4's chained stateful
 * operators in append mode), stateful operators over a union of the two streams, and join → join.
 */
import { defineQuery, type MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import { interval } from '../../lib/plan/column.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { SluiceSession } from '../../lib/api/session.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import { canonicalRow, ORDERS_SCHEMA, PAYMENTS_SCHEMA, prng, type JoinShape, type Order, type Payment } from './join-queries.js';

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

export const SHIPMENTS_SCHEMA = 'sid string, zone long, sts timestamp';
export interface Shipment { sid: string; zone: number; sts: string }

/** Shipments for about 60% of the orders, 0–50 minutes after them, in event-time order. */
export function shipmentsFor(orders: readonly Order[], seed: number): Shipment[] {
  const rand = prng(seed);
  return orders.filter(() => rand() < 0.6)
    .map((o) => ({ sid: o.order_id, zone: (o.amount + Math.floor(rand() * 2)) % 3, sts: new Date(Date.parse(o.ts) + Math.floor(rand() * 50 * 60_000)).toISOString() }))
    .sort((a, b) => Date.parse(a.sts) - Date.parse(b.sts));
}

/**
 * orders ⋈ payments ⋈ shipments: join → join. On one key (`order_id = ref`, then `order_id = sid`)
 * both joins share stage 2 routed by it; `shipmentKey: 'zone'` joins the third stream on a computed
 * key instead (amount % 3 = zone), which no stream can be routed by: one state partition.
 */
export function joinThenJoin(name: string, how: JoinShape = 'inner', shipmentKey: 'order' | 'zone' = 'order'): MultiSourceQueryDefinition {
  return defineQuery({
    name, outputMode: 'append', sink: { kind: 's3-files' },
    sources: { ...sources, shipments: { schema: SHIPMENTS_SCHEMA } },
    transform: ({ orders, payments, shipments }) => {
      const paid = orders!.withWatermark('ts', '10 minutes')
        .join(payments!.withWatermark('pts', '10 minutes'),
          col('order_id').eq(col('ref')).and(col('pts').between(col('ts'), col('ts').plus(interval('30 minutes')))), how);
      const shipped = shipments!.withWatermark('sts', '10 minutes');
      const time = col('sts').between(col('ts'), col('ts').plus(interval('60 minutes')));
      return shipmentKey === 'order'
        ? paid.join(shipped, col('order_id').eq(col('sid')).and(time))
        : paid.join(shipped, col('amount').mod(3).eq(col('zone')).and(time));
    },
  });
}

/** The in-memory engine's answer for a query over orders, payments and shipments. */
export async function inMemoryThree(def: MultiSourceQueryDefinition, events: { orders: Order[]; payments: Payment[]; shipments: Shipment[] }): Promise<string[]> {
  const session = new SluiceSession(def.conf ?? {});
  const orders = session.memoryStream(ORDERS_SCHEMA);
  const payments = session.memoryStream(PAYMENTS_SCHEMA);
  const shipments = session.memoryStream(SHIPMENTS_SCHEMA);
  const result = def.transform({ orders: orders.df, payments: payments.df, shipments: shipments.df }, session);
  const sink = new MemorySink();
  const q = await result.writeStream.outputMode(def.outputMode).sink(sink).start();
  orders.stream.addData(events.orders.map((o) => [o.order_id, o.amount, parseTimestamp(o.ts)]));
  payments.stream.addData(events.payments.map((p) => [p.ref, p.paid, parseTimestamp(p.pts)]));
  shipments.stream.addData(events.shipments.map((s) => [s.sid, s.zone, parseTimestamp(s.sts)]));
  await q.processAllAvailable();
  await q.stop();
  const schema = result.plan.output.map((a) => ({ name: a.name, type: a.type }));
  return sink.allRows().map((r) => canonicalRow(toExternalRow(r, schema as never) as Record<string, unknown>)).sort();
}

/** Shipments for about 60% of the orders, 0–50 minutes after them, each in the zone of its order's amount (sometimes the next one). */
export function shipmentsByAmount(orders: readonly Order[], seed: number): Shipment[] {
  const rand = prng(seed);
  return orders.filter(() => rand() < 0.6)
    .map((o) => ({ sid: `s-${o.order_id}`, zone: o.amount + (rand() < 0.7 ? 0 : 1), sts: new Date(Date.parse(o.ts) + Math.floor(rand() * 50 * 60_000)).toISOString() }))
    .sort((a, b) => Date.parse(a.sts) - Date.parse(b.sts));
}

/**
 * orders ⋈ payments on order_id, then ⋈ shipments on `amount = zone`: keys unrelated to the first
 * join's, so the second join gets its own hop routed by amount (Spark's shuffle before it).
 */
export function joinThenJoinOnOtherKey(name: string, how: JoinShape = 'inner'): MultiSourceQueryDefinition {
  return defineQuery({
    name, outputMode: 'append', sink: { kind: 's3-files' },
    sources: { ...sources, shipments: { schema: SHIPMENTS_SCHEMA } },
    transform: ({ orders, payments, shipments }) => orders!.withWatermark('ts', '10 minutes')
      .join(payments!.withWatermark('pts', '10 minutes'),
        col('order_id').eq(col('ref')).and(col('pts').between(col('ts'), col('ts').plus(interval('30 minutes')))), how)
      .join(shipments!.withWatermark('sts', '10 minutes'),
        col('amount').eq(col('zone')).and(col('sts').between(col('ts'), col('ts').plus(interval('60 minutes'))))),
  });
}

/** The join, then per order and 10-minute window its payments: keyed by the join key, so it shares the join's stage. */
export function joinThenCountByJoinKey(name: string, how: JoinShape = 'inner'): MultiSourceQueryDefinition {
  return defineQuery({
    name, sources, outputMode: 'append', sink: { kind: 's3-files' },
    transform: ({ orders, payments }) => orders!.withWatermark('ts', '10 minutes')
      .join(payments!.withWatermark('pts', '10 minutes'),
        col('order_id').eq(col('ref')).and(col('pts').between(col('ts'), col('ts').plus(interval('30 minutes')))), how)
      .groupBy(window(col('ts'), '10 minutes'), col('order_id')).agg(count('*').as('payments'), sum(col('paid')).as('paid')),
  });
}

/** The join, then per amount and 10-minute window: keys unrelated to the join's, so it gets its own hop. */
export function joinThenCountByAmount(name: string): MultiSourceQueryDefinition {
  return defineQuery({
    name, sources, outputMode: 'append', sink: { kind: 's3-files' },
    transform: ({ orders, payments }) => orders!.withWatermark('ts', '10 minutes')
      .join(payments!.withWatermark('pts', '10 minutes'),
        col('order_id').eq(col('ref')).and(col('pts').between(col('ts'), col('ts').plus(interval('30 minutes')))))
      .groupBy(window(col('ts'), '10 minutes'), col('amount')).agg(count('*').as('orders')),
  });
}

/**
 * A windowed aggregate feeding a join (Spark 4's chained stateful operators in append mode; checked
 * against PySpark 4.0.1 by spark-diff `agg-then-join-stream`): payments summed per reference and
 * 10-minute window, then joined with the orders on the reference.
 */
export function aggregateThenJoin(name: string): MultiSourceQueryDefinition {
  return defineQuery({
    name, sources, outputMode: 'append', sink: { kind: 's3-files' },
    transform: ({ orders, payments }) => {
      const paid = payments!.withWatermark('pts', '10 minutes')
        .groupBy(window(col('pts'), '10 minutes').as('pw'), col('ref')).agg(count('*').as('payments'), sum(col('paid')).as('paid'));
      return paid.join(orders!.withWatermark('ts', '10 minutes'), col('ref').eq(col('order_id')));
    },
  });
}

/**
 * Spark's documented chain: two windowed aggregates joined on their window (spark-diff
 * `agg-join-agg-window` checks the shape against PySpark 4.0.1): orders and payments counted per
 * 10-minute window, each in stage 2 by its own window, joined in stage 3 routed by the window.
 */
export function aggregatesJoinedOnWindow(name: string): MultiSourceQueryDefinition {
  return defineQuery({
    name, sources, outputMode: 'append', sink: { kind: 's3-files' },
    transform: ({ orders, payments }) => {
      const ordered = orders!.withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '10 minutes').as('ow')).agg(count('*').as('orders'));
      const paid = payments!.withWatermark('pts', '10 minutes').groupBy(window(col('pts'), '10 minutes').as('pw')).agg(sum(col('paid')).as('paid'));
      return ordered.join(paid, col('ow').eq(col('pw')));
    },
  });
}
