/**
 * Two-stream join queries (orders, payments) for the hop tests, their events and the in-memory
 * engine's answer, shared by the memory-backend and the emulator tests.
 */
import { defineQuery, type MultiSourceQueryDefinition, type SinkSpec } from '../../lib/query/query-definition.js';
import { SluiceSession } from '../../lib/api/session.js';
import { interval } from '../../lib/plan/column.js';
import { col } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import type { JoinType } from '../../lib/plan/logical-plan.js';

export const ORDERS_SCHEMA = 'order_id string, amount long, ts timestamp';
export const PAYMENTS_SCHEMA = 'ref string, paid long, pts timestamp';

export interface Order { order_id: string; amount: number; ts: string }
export interface Payment { ref: string; paid: number; pts: string }

export type JoinShape = Extract<JoinType, 'inner' | 'left_outer' | 'right_outer' | 'full_outer' | 'left_semi'>;

/** A seeded PRNG so every run is reproducible. */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => { s = (s * 1664525 + 1013904223) >>> 0; return s / 2 ** 32; };
}

/**
 * Orders every 20 s; about 70% paid 0–20 minutes later, plus payments for unknown orders. Each
 * stream in event-time order, so no row is late and every answer is determined by the data.
 */
export function joinEvents(n: number, seed: number): { orders: Order[]; payments: Payment[] } {
  const rand = prng(seed);
  const base = Date.UTC(2024, 4, 1, 14, 0);
  const orders = Array.from({ length: n }, (_, i) => ({ order_id: `o${i}`, amount: 1 + Math.floor(rand() * 90), ts: new Date(base + i * 20_000).toISOString() }));
  const payments: Payment[] = [];
  orders.forEach((o, i) => {
    const r = rand();
    if (r < 0.7) payments.push({ ref: o.order_id, paid: o.amount, pts: new Date(Date.parse(o.ts) + Math.floor(rand() * 20 * 60_000)).toISOString() });
    else if (r < 0.8) payments.push({ ref: `x${i}`, paid: 1, pts: new Date(Date.parse(o.ts) + 60_000).toISOString() });
  });
  payments.sort((a, b) => Date.parse(a.pts) - Date.parse(b.pts));
  return { orders, payments };
}

/** orders ⋈ payments on order_id = ref, a payment within 30 minutes of its order; both sides watermarked. */
export function joinQuery(name: string, how: JoinShape, sink: SinkSpec = { kind: 's3-files' }, conf?: Record<string, string>): MultiSourceQueryDefinition {
  return defineQuery({
    name,
    sources: {
      orders: { schema: ORDERS_SCHEMA },
      payments: { schema: PAYMENTS_SCHEMA },
    },
    transform: ({ orders, payments }) => orders!.withWatermark('ts', '10 minutes')
      .join(
        payments!.filter(col('paid').gt(0)).withWatermark('pts', '10 minutes'),
        col('order_id').eq(col('ref')).and(col('pts').between(col('ts'), col('ts').plus(interval('30 minutes')))),
        how,
      ),
    outputMode: 'append',
    sink,
    ...(conf ? { conf } : {}),
  });
}

/** The answer of the in-memory engine: all events in, every batch run (a no-data batch closes what the watermark allows). */
export async function inMemoryJoin(def: MultiSourceQueryDefinition, events: { orders: Order[]; payments: Payment[] }): Promise<string[]> {
  const session = new SluiceSession(def.conf ?? {});
  const orders = session.memoryStream(ORDERS_SCHEMA);
  const payments = session.memoryStream(PAYMENTS_SCHEMA);
  const result = def.transform({ orders: orders.df, payments: payments.df }, session);
  const sink = new MemorySink();
  const q = await result.writeStream.outputMode(def.outputMode).sink(sink).start();
  orders.stream.addData(events.orders.map((o) => [o.order_id, o.amount, parseTimestamp(o.ts)]));
  payments.stream.addData(events.payments.map((p) => [p.ref, p.paid, parseTimestamp(p.pts)]));
  await q.processAllAvailable();
  await q.stop();
  const schema = result.plan.output.map((a) => ({ name: a.name, type: a.type }));
  return sink.allRows().map((r) => canonicalRow(toExternalRow(r, schema as never) as Record<string, unknown>)).sort();
}

/** One result row as comparable text (keys sorted, numbers as numbers). */
export function canonicalRow(row: Record<string, unknown>): string {
  const sorted = Object.keys(row).sort().map((k) => [k, typeof row[k] === 'bigint' ? Number(row[k]) : row[k]]);
  return JSON.stringify(Object.fromEntries(sorted));
}

/** The events in three phases cut by event time, so that nothing in a later phase is late (reshard tests run a reshard between phases). */
export function joinPhases(events: { orders: Order[]; payments: Payment[] }): { orders: Order[]; payments: Payment[] }[] {
  const first = Date.parse(events.orders[0]!.ts);
  const span = Date.parse(events.orders[events.orders.length - 1]!.ts) - first;
  const cuts = [first + span / 3, first + (2 * span) / 3, Number.POSITIVE_INFINITY];
  const phaseOf = (t: number): number => cuts.findIndex((c) => t < c);
  return cuts.map((_, i) => ({
    orders: events.orders.filter((o) => phaseOf(Date.parse(o.ts)) === i),
    payments: events.payments.filter((p) => phaseOf(Date.parse(p.pts)) === i),
  }));
}
