/**
 * Chains of stateful operators over two streams on memory backends: a join then an aggregate
 * (stage 2 joins, hop 2 routes its output by the aggregate's keys, stage 3 aggregates), and an
 * aggregate or a deduplication over a union of the streams. Whatever the shard counts and however
 * records are duplicated, the answer is the in-memory engine's.
 */
import { describe, expect, it } from 'vitest';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { explainQuery } from '../../lib/query/validate-query.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { col } from '../../lib/plan/functions.js';
import { interval } from '../../lib/plan/column.js';
import { inMemoryJoin, joinEvents, ORDERS_SCHEMA, PAYMENTS_SCHEMA } from '../support/join-queries.js';
import { SluiceSession } from '../../lib/api/session.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import {
  inMemoryThree, joinThenCountPerOrder, joinThenJoin, joinThenWindowedSum, shipmentsFor, unionThenDedup, unionThenWindowedCount,
} from '../support/chain-queries.js';
import { runThroughHops } from '../support/run-through-hops.js';

describe('join → aggregate and stateful operators over a union, through the hops (memory backends)', () => {
  const events = joinEvents(240, 7);
  // Three hours of orders: the join's output watermark trails its input by the 30-minute bound, so more windows close.
  const longer = joinEvents(540, 7);

  it('plans the join behind hop 1 and the aggregate behind hop 2, which carries the join stage\'s watermark', () => {
    const query = compileQuery(joinThenWindowedSum('shape'), { allowRepartition: true });
    expect(query.hops.map((h) => [h.index, h.carries, h.routingColumns])).toEqual([[0, 'max-event-time', ['order_id = ref']], [1, 'watermark', []]]);
    expect(query.stages.map((s) => [s.kind, s.index, s.inputHop?.index ?? null, s.outputHop?.index ?? null, s.writes]))
      .toEqual([['source', 0, null, 0, 'internal-stream'], ['source', 0, null, 0, 'internal-stream'],
        ['state', 1, 0, 1, 'internal-stream'], ['state', 2, 1, null, 'sink']]);
    expect(query.stageReadingHop(1).outputMode).toBe('append');
  });

  for (const how of ['inner', 'left_outer'] as const) {
    it(`${how} join → windowed sum (append): same answer on 1, 2 and 4 shards per stream as in memory`, async () => {
      const def = joinThenWindowedSum(`join-${how}-sum`, how);
      const expected = await inMemoryJoin(def, longer);
      expect(expected.length).toBeGreaterThan(3);
      for (const shards of [1, 2, 4]) {
        expect({ shards, rows: (await runThroughHops(def, longer, shards, Math.max(1, shards - 1))).rows }).toEqual({ shards, rows: expected });
      }
    });
  }

  it('join → count per amount (update), duplicated internal records applied once', async () => {
    const def = joinThenCountPerOrder('join-count');
    const expected = latestPerKey(await inMemoryJoin(def, events));
    expect(expected.length).toBeGreaterThan(3);
    expect(latestPerKey((await runThroughHops(def, events, 3, 2, 2)).rows)).toEqual(expected);
  });

  for (const [name, def] of [['aggregate', unionThenWindowedCount('union-count')], ['deduplication', unionThenDedup('union-dedup')]] as const) {
    it(`${name} over a union of the two streams: same answer on 1, 2 and 4 shards per stream as in memory`, async () => {
      const expected = await inMemoryJoin(def, events);
      expect(expected.length).toBeGreaterThan(3);
      for (const shards of [1, 2, 4]) {
        expect({ shards, rows: (await runThroughHops(def, events, shards, 2)).rows }).toEqual({ shards, rows: expected });
      }
    });
  }

  it('explain shows the join stage, hop 2 with the watermark it carries, and the aggregate stage', () => {
    const text = explainQuery(joinThenWindowedSum('explain'), { allowRepartition: true });
    expect(text).toMatch(/Stage 2 .*inner Join by \[order_id = ref\].*rows routed by nothing .* to internal stream 2/);
    expect(text).toMatch(/repartition boundary 2: .*stage 2's output watermark travels with its rows/);
    expect(text).toMatch(/Stage 3 \(each shard of internal stream 2 = a state partition\): Aggregate by \[window\], output mode append, sink s3-files/);
  });

  it('progress shows each operator\'s two watermarks; the aggregate above the time-interval join trails it by the join\'s bound', async () => {
    const session = new SluiceSession();
    const orders = session.memoryStream(ORDERS_SCHEMA);
    const payments = session.memoryStream(PAYMENTS_SCHEMA);
    const def = joinThenWindowedSum('progress');
    const q = await def.transform({ orders: orders.df, payments: payments.df }, session).writeStream.outputMode('append').sink(new MemorySink()).start();
    // Two batches, so that the late-rows watermark (the previous batch's) is past 0 too.
    const halves = <T>(rows: readonly T[]): T[][] => [rows.slice(0, rows.length / 2), rows.slice(rows.length / 2)];
    const [orderHalves, paymentHalves] = [halves(longer.orders), halves(longer.payments)];
    for (const i of [0, 1]) {
      orders.stream.addData(orderHalves[i]!.map((o) => [o.order_id, o.amount, parseTimestamp(o.ts)]));
      payments.stream.addData(paymentHalves[i]!.map((p) => [p.ref, p.paid, parseTimestamp(p.pts)]));
      await q.processAllAvailable();
    }
    await q.stop();
    const last = q.recentProgress.filter((p) => p.eventTime.watermark !== undefined && Date.parse(p.eventTime.watermark) > 0).at(-1)!;
    const watermarksOf = (name: string) => {
      const o = last.stateOperators.find((op) => op.operatorName === name)!;
      return { late: Date.parse(o.eventTimeWatermarkForLateEvents!), eviction: Date.parse(o.eventTimeWatermarkForEviction!) };
    };
    const join = watermarksOf('symmetricHashJoin');
    const aggregate = watermarksOf('stateStoreSave');
    expect(join.eviction).toBe(Date.parse(last.eventTime.watermark!));
    // Spark's time-interval join holds its output until the 30-minute bound has passed (and 1 ms).
    expect(join.eviction - aggregate.eviction).toBe(30 * 60_000 + 1);
    const previous = q.recentProgress[q.recentProgress.indexOf(last) - 1]!;
    expect(join.late).toBe(previous.batchWatermarkMs);
    expect(previous.batchWatermarkMs).toBeGreaterThan(0);
    expect(join.late - aggregate.late).toBe(30 * 60_000 + 1);
  });

  it('staged, the aggregate\'s eviction watermark (stage 3) never passes the join stage\'s minus the join\'s bound', async () => {
    const run = await runThroughHops(joinThenWindowedSum('staged-progress'), longer, 2, 2);
    const evictions = (stage: number, operatorName: string) => run.progress.get(stage)!
      .map((p) => p.stateOperators.find((o) => o.operatorName === operatorName)?.eventTimeWatermarkForEviction).filter((w): w is string => w !== undefined).map((w) => Date.parse(w));
    const joinMax = Math.max(...evictions(1, 'symmetricHashJoin'));
    const aggregate = evictions(2, 'stateStoreSave');
    expect(Math.max(...aggregate)).toBeGreaterThan(0);
    expect(Math.max(...aggregate)).toBeLessThanOrEqual(joinMax - 30 * 60_000 - 1);
  });

  it('explain shows each operator\'s watermarks: the aggregate\'s trail the global one by the join\'s bound', () => {
    const text = explainQuery(joinThenWindowedSum('explain-watermarks'), { allowRepartition: true });
    const lines = text.split('\n');
    const after = (pattern: RegExp) => lines[lines.findIndex((l) => pattern.test(l)) + 1]!;
    expect(after(/^ {2}1\. Stream-stream Inner join/)).toMatch(/late rows are those behind batch N-1's global watermark \(eventTimeWatermarkForLateEvents\)/);
    expect(after(/^ {2}2\. Aggregation/)).toMatch(/behind batch N-1's global watermark minus 1800001 milliseconds \(the time bound of the join below it\).*eventTimeWatermarkForEviction/);
  });

  describe('join → join', () => {
    const three = { ...events, shipments: shipmentsFor(events.orders, 5) };

    it('on one key: both joins in stage 2, every stream routed by the key class', () => {
      const query = compileQuery(joinThenJoin('jj-shape'), { allowRepartition: true });
      expect(query.hops).toHaveLength(1);
      expect(query.hops[0]!.routingColumns).toEqual(['order_id = ref = sid']);
      expect(query.sourceStages.map((s) => [s.sourceName, s.outputHop!.routingOrdinals])).toEqual([['orders', [0]], ['payments', [0]], ['shipments', [0]]]);
      expect(explainQuery(joinThenJoin('jj-explain'), { allowRepartition: true }))
        .toMatch(/Stage 2 .*: inner Join by \[order_id = ref\], then inner Join by \[order_id = sid\], output mode append/);
    });

    for (const how of ['inner', 'left_outer'] as const) {
      it(`${how} then inner on one key: same answer on 1, 2 and 4 shards per stream as in memory`, async () => {
        const def = joinThenJoin(`jj-${how}`, how);
        const expected = await inMemoryThree(def, three);
        expect(expected.length).toBeGreaterThan(20);
        for (const shards of [1, 2, 4]) {
          expect({ shards, rows: (await runThroughHops(def, three, shards, 3, shards === 2 ? 3 : 0)).rows }).toEqual({ shards, rows: expected });
        }
      });
    }

    it('on a computed key no stream carries: the first join by its key, the second behind its own hop on one state partition, still the in-memory answer', async () => {
      const def = joinThenJoin('jj-zone', 'inner', 'zone');
      expect(compileQuery(def, { allowRepartition: true }).hops.map((h) => h.routingColumns)).toEqual([['order_id = ref', '(forwarded)'], []]);
      const expected = await inMemoryThree(def, three);
      expect(expected.length).toBeGreaterThan(20);
      expect((await runThroughHops(def, three, 2, 2)).rows).toEqual(expected);
    });

    it('a deduplication feeding a join: the deduplication behind hop 1, the join behind hop 2', () => {
      const def = defineQuery({
        name: 'dedup-join', sources: { a: { schema: 'id string, ts timestamp' }, b: { schema: 'bid string, bts timestamp' } },
        outputMode: 'append', sink: { kind: 's3-files' },
        transform: ({ a, b }) => a!.withWatermark('ts', '1 minute').dropDuplicatesWithinWatermark(['id'])
          .join(b!.withWatermark('bts', '1 minute'), col('id').eq(col('bid')).and(col('bts').between(col('ts'), col('ts').plus(interval('5 minutes'))))),
      });
      expect(compileQuery(def, { allowRepartition: true }).hops.map((h) => h.routingColumns)).toEqual([['id', '(forwarded)'], ['id = bid']]);
    });

    it('a join side that needs two stages of its own (join → deduplication → join) is refused before it runs, naming the operator', () => {
      const def = defineQuery({
        name: 'join-dedup-join', outputMode: 'append', sink: { kind: 's3-files' },
        sources: { orders: { schema: ORDERS_SCHEMA }, payments: { schema: PAYMENTS_SCHEMA }, shipments: { schema: 'sid string, zone long, sts timestamp' } },
        transform: ({ orders, payments, shipments }) => orders!.withWatermark('ts', '10 minutes')
          .join(payments!.withWatermark('pts', '10 minutes'), col('order_id').eq(col('ref')).and(col('pts').between(col('ts'), col('ts').plus(interval('30 minutes')))))
          .dropDuplicatesWithinWatermark(['amount'])
          .join(shipments!.withWatermark('sts', '10 minutes'), col('amount').eq(col('zone')).and(col('sts').between(col('ts'), col('ts').plus(interval('60 minutes'))))),
      });
      expect(() => compileQuery(def, { allowRepartition: true })).toThrow(/Deduplicate and the stream-stream join it feeds or reads would share a stage/);
    });
  });
});

/** Update-mode rows as the sink keeps them: the last row per key (every column but the last). */
function latestPerKey(rows: readonly string[]): string[] {
  const latest = new Map<string, string>();
  for (const r of rows) {
    const o = JSON.parse(r) as Record<string, unknown>;
    latest.set(String(o.amount), r);
  }
  return [...latest.values()].sort();
}
