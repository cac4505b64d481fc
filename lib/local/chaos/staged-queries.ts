/**
 * The chaos harness's queries of several stages (issue 12): a chain of two aggregates over the
 * sales stream, and a join of the sales stream with a second stream of payments followed by a
 * windowed aggregate. Each runs as stages over internal streams, so the harness faults every hop.
 *
 * The sales records get an `id` (the join key) here, and the payments are drawn from them: the
 * harness's other queries ignore the extra field.
 */
import { interval } from '../../plan/column.js';
import { col, count, sum, window, window_time } from '../../plan/functions.js';
import { defineQuery, type MultiSourceQueryDefinition, type StreamingQueryDefinition } from '../../query/query-definition.js';
import { SALES_WITH_PRODUCT_SOURCE } from '../dev/default-query.js';
import { createPrng, randomInt, randomPartitionKey, type SampleRecord } from '../sample-events.js';

/** The sales stream as the join reads it: the id is the join key. */
export const SALES_WITH_ID_SCHEMA = 'id string, store_id string, product string, amount double, ts timestamp';
export const PAYMENTS_SCHEMA = 'ref string, paid double, pts timestamp';

/**
 * Per 30 minutes and product, sales and orders; then per hour, how many (window, product) rows and
 * their totals: aggregate → aggregate in append mode (Spark 4's chained stateful operators). The
 * stream is partitioned by store: both aggregates need a hop (3 stages on several shards).
 */
export function chainedAggregatesQuery(name = 'chaos-chain'): StreamingQueryDefinition {
  return defineQuery({
    name, source: SALES_WITH_PRODUCT_SOURCE, outputMode: 'append', sink: { kind: 'dynamodb' },
    transform: (events) => events.withWatermark('ts', '15 minutes')
      .groupBy(window(col('ts'), '30 minutes'), col('product')).agg(sum('amount').as('sales'), count().as('orders'))
      .groupBy(window(window_time(col('window')), '1 hour'))
      .agg(count('*').as('product_windows'), sum(col('sales')).as('sales'), sum(col('orders')).as('orders')),
  });
}

/**
 * sales ⋈ payments (a payment within 30 minutes of its sale), then per hour of the sale: paid
 * sales and their total. Two source streams (one source stage each), the join's stage routed by
 * the sale id, the aggregate's by the window.
 */
export function joinThenAggregateQuery(name = 'chaos-join'): MultiSourceQueryDefinition {
  return defineQuery({
    name, outputMode: 'append', sink: { kind: 's3-files', prefix: 'paid-sales/' },
    sources: {
      sales: { ...SALES_WITH_PRODUCT_SOURCE, schema: SALES_WITH_ID_SCHEMA },
      payments: { format: 'json', schema: PAYMENTS_SCHEMA },
    },
    transform: ({ sales, payments }) => sales!.withWatermark('ts', '15 minutes')
      .join(payments!.withWatermark('pts', '15 minutes'),
        col('id').eq(col('ref')).and(col('pts').between(col('ts'), col('ts').plus(interval('30 minutes')))))
      .groupBy(window(col('ts'), '1 hour')).agg(count('*').as('paid_sales'), sum(col('paid')).as('paid')),
  });
}

/** Sales records with an `id` each (`s<position>`); malformed ones stay as they are. */
export function withSaleIds(records: readonly SampleRecord[]): SampleRecord[] {
  return records.map((r, i) => {
    if (r.kind === 'malformed') return r;
    return { ...r, data: JSON.stringify({ id: `s${i}`, ...(JSON.parse(r.data) as object) }) };
  });
}

/**
 * Payments for about 70% of the on-time sales of wave 1, 0–20 minutes after the sale, and a few
 * for sales that do not exist; in (almost) event-time order (at most 10 minutes of disorder, under
 * the 15-minute watermark delay, so none is late on any shard), random partition keys. All in
 * wave 1. Amounts are the sales' (multiples of 0.25: sums exact in any order).
 */
export function generatePayments(sales: readonly SampleRecord[], seed: number): SampleRecord[] {
  const rnd = createPrng(seed * 613 + 5);
  const payments: { data: string; order: number; pts: number }[] = [];
  sales.forEach((r, i) => {
    if (r.kind !== 'event' || r.wave !== 1) return;
    const sale = JSON.parse(r.data) as { id: string; amount: number; ts: string };
    const draw = rnd();
    if (draw >= 0.8) return;
    const pts = Date.parse(sale.ts) + randomInt(rnd, 0, 20) * 60_000;
    const known = draw < 0.7;
    const data = JSON.stringify({ ref: known ? sale.id : `unknown-${i}`, paid: known ? sale.amount : 1, pts: new Date(pts).toISOString().replace('.000Z', 'Z') });
    payments.push({ data, pts, order: pts + Math.floor(rnd() * 600_001) });
  });
  payments.sort((a, b) => a.order - b.order || a.pts - b.pts);
  return payments.map((p) => ({ data: p.data, partitionKey: randomPartitionKey(rnd), wave: 1, kind: 'event' }));
}
