/**
 * Outer joins whose preserved side holds NULL join keys, for the reshard tests (emulators) and
 * their in-memory answer. payments ⟕ orders ⟕ shipments: both joins share stage 2, routed by the
 * class `order_id = ref = sid`. A payment with a NULL `ref` is a NULL key on the first join's
 * preserved side; a payment no order matches comes out of the first join with `order_id` NULL, a
 * NULL key on the second join's preserved side that sits on the shard its `ref` was routed to. So
 * after a split both children buffer such rows, and a merge of the children must keep all of them.
 */
import { defineQuery, type MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import { Column, interval } from '../../lib/plan/column.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { ORDERS_SCHEMA, PAYMENTS_SCHEMA, prng, type Order } from './join-queries.js';
import { SHIPMENTS_SCHEMA, inMemoryThree, type Shipment } from './chain-queries.js';

export interface NullablePayment { ref: string | null; paid: number; pts: string }
export interface NullKeyEvents { orders: Order[]; payments: NullablePayment[]; shipments: Shipment[] }

/**
 * An order a minute; about 55% paid 0–20 minutes later, 15% a payment for an unknown order, 15% a
 * payment with no `ref` (NULL); shipments for about half of the orders, 0–15 minutes after their
 * payment (or order). Each stream in event-time order, so nothing is late.
 */
export function nullKeyEvents(n: number, seed: number): NullKeyEvents {
  const rand = prng(seed);
  const base = Date.UTC(2024, 4, 1, 14, 0);
  const at = (ms: number): string => new Date(ms).toISOString();
  const orders = Array.from({ length: n }, (_, i) => ({ order_id: `o${i}`, amount: 1 + Math.floor(rand() * 90), ts: at(base + i * 60_000) }));
  const payments: NullablePayment[] = [];
  const shipments: Shipment[] = [];
  orders.forEach((o, i) => {
    const t = Date.parse(o.ts);
    const r = rand();
    const pts = t + Math.floor(rand() * 20 * 60_000);
    if (r < 0.55) payments.push({ ref: o.order_id, paid: o.amount, pts: at(pts) });
    else if (r < 0.7) payments.push({ ref: `x${i}`, paid: 1, pts: at(t + 30_000) });
    else if (r < 0.85) payments.push({ ref: null, paid: 2, pts: at(t + 45_000) });
    if (rand() < 0.5) shipments.push({ sid: o.order_id, zone: i % 3, sts: at((r < 0.55 ? pts : t) + Math.floor(rand() * 15 * 60_000)) });
  });
  const byTime = <T>(time: (x: T) => string) => (a: T, b: T): number => Date.parse(time(a)) - Date.parse(time(b));
  payments.sort(byTime((p) => p.pts));
  shipments.sort(byTime((s) => s.sts));
  return { orders, payments, shipments };
}

/**
 * Payments ⟕ orders (the payment within 30 minutes after its order), then ⟕ shipments of the order
 * (within 20 minutes of the payment). Payments first: as in Spark, a join evicts a side's rows by
 * its first watermarked column, which must be `pts` (never NULL) for the second join to emit the
 * rows the first padded with NULL orders.
 */
export function nullKeyOuterJoins(name: string): MultiSourceQueryDefinition {
  return defineQuery({
    name, outputMode: 'append', sink: { kind: 's3-files' },
    sources: { orders: { schema: ORDERS_SCHEMA }, payments: { schema: PAYMENTS_SCHEMA }, shipments: { schema: SHIPMENTS_SCHEMA } },
    transform: ({ orders, payments, shipments }) => payments!.withWatermark('pts', '10 minutes')
      .join(orders!.withWatermark('ts', '10 minutes'),
        col('ref').eq(col('order_id')).and(col('ts').between(col('pts').minus(interval('30 minutes')), col('pts'))), 'left_outer')
      .join(shipments!.withWatermark('sts', '10 minutes'),
        col('order_id').eq(col('sid')).and(col('sts').between(col('pts'), col('pts').plus(interval('20 minutes')))), 'left_outer'),
  });
}

/** The in-memory engine's answer over the same events, never resharded. */
export function inMemoryNullKeyJoins(def: MultiSourceQueryDefinition, events: NullKeyEvents): Promise<string[]> {
  // inMemoryThree passes each field through as it is: a NULL ref stays NULL.
  return inMemoryThree(def, events as Parameters<typeof inMemoryThree>[1]);
}

/** The events in three phases cut by order time (each stream's events up to the cut), so nothing in a later phase is late. */
export function nullKeyPhases(events: NullKeyEvents): NullKeyEvents[] {
  const first = Date.parse(events.orders[0]!.ts);
  const span = Date.parse(events.orders[events.orders.length - 1]!.ts) - first;
  const cuts = [first + span / 3, first + (2 * span) / 3, Number.POSITIVE_INFINITY];
  const phaseOf = (iso: string): number => cuts.findIndex((c) => Date.parse(iso) < c);
  return cuts.map((_, i) => ({
    orders: events.orders.filter((o) => phaseOf(o.ts) === i),
    payments: events.payments.filter((p) => phaseOf(p.pts) === i),
    shipments: events.shipments.filter((s) => phaseOf(s.sts) === i),
  }));
}

/**
 * The NULL-key events plus shipments with no `sid` (NULL), about one every four orders, at random
 * times: with a NULL-safe key (`order_id <=> sid`) each of them matches the payments the first join
 * padded with a NULL order (those with no order, or with a NULL `ref`) within the time bound.
 */
export function nullSafeEvents(n: number, seed: number): NullKeyEvents {
  const events = nullKeyEvents(n, seed);
  const rand = prng(seed + 1);
  const first = Date.parse(events.orders[0]!.ts);
  const nullSids = Array.from({ length: Math.ceil(n / 4) }, () => ({
    sid: null as unknown as string, zone: 9, sts: new Date(first + Math.floor(rand() * n * 60_000)).toISOString(),
  }));
  const shipments = [...events.shipments, ...nullSids].sort((a, b) => Date.parse(a.sts) - Date.parse(b.sts));
  return { ...events, shipments };
}

/**
 * As nullKeyOuterJoins, but the second join compares `order_id <=> sid` (NULL-safe): a payment the
 * first join padded with a NULL order matches the shipments with a NULL `sid`. The padded rows'
 * `order_id` is NULL while they are routed by their `ref`, so they meet those shipments only if
 * the second join routes by its own key. The order's `ts` is dropped before the second join:
 * Spark 4 refuses a join side with two event-time columns (spark-diff join-chain-null-safe).
 */
export function nullSafeOuterJoins(name: string, second: 'inner' | 'left_outer' = 'left_outer'): MultiSourceQueryDefinition {
  return defineQuery({
    name, outputMode: 'append', sink: { kind: 's3-files' },
    sources: { orders: { schema: ORDERS_SCHEMA }, payments: { schema: PAYMENTS_SCHEMA }, shipments: { schema: SHIPMENTS_SCHEMA } },
    transform: ({ orders, payments, shipments }) => payments!.withWatermark('pts', '10 minutes')
      .join(orders!.withWatermark('ts', '10 minutes'),
        col('ref').eq(col('order_id')).and(col('ts').between(col('pts').minus(interval('30 minutes')), col('pts'))), 'left_outer')
      .select('ref', 'paid', 'pts', 'order_id', 'amount')
      .join(shipments!.withWatermark('sts', '10 minutes'),
        nullSafeEq('order_id', 'sid').and(col('sts').between(col('pts'), col('pts').plus(interval('20 minutes')))), second),
  });
}

/** `a <=> b` (Spark's eqNullSafe; the Column API has no method for it). */
export function nullSafeEq(a: string, b: string): Column {
  return new Column({ kind: 'call', fn: '<=>', args: [col(a).expr, col(b).expr] });
}

/** As nullSafeOuterJoins, but `ref <=> sid`: the key is the preserved side's, never padded, so the class routing serves. */
export function nullSafeOnPreservedKey(name: string): MultiSourceQueryDefinition {
  return defineQuery({
    name, outputMode: 'append', sink: { kind: 's3-files' },
    sources: { orders: { schema: ORDERS_SCHEMA }, payments: { schema: PAYMENTS_SCHEMA }, shipments: { schema: SHIPMENTS_SCHEMA } },
    transform: ({ orders, payments, shipments }) => payments!.withWatermark('pts', '10 minutes')
      .join(orders!.withWatermark('ts', '10 minutes'),
        col('ref').eq(col('order_id')).and(col('ts').between(col('pts').minus(interval('30 minutes')), col('pts'))), 'left_outer')
      .select('ref', 'paid', 'pts', 'order_id', 'amount')
      .join(shipments!.withWatermark('sts', '10 minutes'),
        nullSafeEq('ref', 'sid').and(col('sts').between(col('pts'), col('pts').plus(interval('20 minutes')))), 'left_outer'),
  });
}

/**
 * Payments ⟕ orders, then per 10-minute window of the payment and `order_id` the payments: the
 * padded payments form the NULL group of each window, whatever `ref` routed them by.
 */
export function paddedKeyCount(name: string): MultiSourceQueryDefinition {
  return defineQuery({
    name, outputMode: 'append', sink: { kind: 's3-files' },
    sources: { orders: { schema: ORDERS_SCHEMA }, payments: { schema: PAYMENTS_SCHEMA } },
    transform: ({ orders, payments }) => payments!.withWatermark('pts', '10 minutes')
      .join(orders!.withWatermark('ts', '10 minutes'),
        col('ref').eq(col('order_id')).and(col('ts').between(col('pts').minus(interval('30 minutes')), col('pts'))), 'left_outer')
      .groupBy(window(col('pts'), '10 minutes'), col('order_id')).agg(count('*').as('payments'), sum(col('paid')).as('paid')),
  });
}
