/**
 * A shuffle before each stateful operator that needs one, and none where the join's routing already
 * serves (memory backends): a second join on keys unrelated to the first's gets its own hop routed by
 * them; an aggregate keyed by the join key shares the join's stage; an aggregate feeding a join
 * (Spark 4 runs it in append mode: spark-diff `agg-then-join-stream`) runs the aggregate behind hop 1
 * and the join behind hop 2. Whatever the shard counts, the answer is the in-memory engine's.
 */
import { describe, expect, it } from 'vitest';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { explainQuery } from '../../lib/query/validate-query.js';
import { inMemoryJoin, joinEvents } from '../support/join-queries.js';
import {
  aggregateThenJoin, aggregatesJoinedOnWindow, inMemoryThree, joinThenCountByAmount, joinThenCountByJoinKey, joinThenJoinOnOtherKey, shipmentsByAmount,
} from '../support/chain-queries.js';
import { runThroughHops } from '../support/run-through-hops.js';

const shape = (def: Parameters<typeof compileQuery>[0]) => {
  const query = compileQuery(def, { allowRepartition: true });
  return {
    stages: query.stages.filter((s) => s.reads === 'internal-stream').length + 1,
    hops: query.hops.map((h) => h.routingColumns),
  };
};

describe('join → join on unrelated keys', () => {
  const events = joinEvents(240, 7);
  const three = { ...events, shipments: shipmentsByAmount(events.orders, 5) };

  it('the second join gets its own hop, routed by its own keys; the third stream is forwarded by stage 2', () => {
    expect(shape(joinThenJoinOnOtherKey('jj-other-shape'))).toEqual({ stages: 3, hops: [['order_id = ref', '(forwarded)'], ['amount = zone']] });
    const query = compileQuery(joinThenJoinOnOtherKey('jj-other-routes'), { allowRepartition: true });
    // orders and payments by their join key; shipments by its own key of the second join (zone).
    expect(query.sourceStages.map((s) => [s.sourceName, s.outputHop!.routingOrdinals])).toEqual([['orders', [0]], ['payments', [0]], ['shipments', [1]]]);
    const text = explainQuery(joinThenJoinOnOtherKey('jj-other-explain'), { allowRepartition: true });
    expect(text).toMatch(/Stage 1 \(each shard of shipments\).*\(its zone\) to the internal stream.*; stage 2 forwards them unchanged to the join behind internal stream 2\./);
    expect(text).toMatch(/Stage 2 \(each internal shard = a state partition\): inner Join by \[order_id = ref\], rows routed by \[amount = zone\] to internal stream 2\./);
    expect(text).toMatch(/Stage 3 \(each shard of internal stream 2 = a state partition\): inner Join by \[amount = zone\], output mode append/);
  });

  for (const how of ['inner', 'left_outer'] as const) {
    it(`${how} then inner on amount = zone: same answer on 1, 2 and 4 shards per stream as in memory`, async () => {
      const def = joinThenJoinOnOtherKey(`jj-other-${how}`, how);
      const expected = await inMemoryThree(def, three);
      expect(expected.length).toBeGreaterThan(20);
      for (const shards of [1, 2, 4]) {
        expect({ shards, rows: (await runThroughHops(def, three, shards, 3, shards === 2 ? 3 : 0)).rows }).toEqual({ shards, rows: expected });
      }
    });
  }
});

describe('an operator right after a join', () => {
  const events = joinEvents(540, 7);

  it('keyed by the join key of a side never padded with NULL: in the join\'s stage, no hop', () => {
    expect(shape(joinThenCountByJoinKey('by-key-inner'))).toEqual({ stages: 2, hops: [['order_id = ref']] });
    expect(shape(joinThenCountByJoinKey('by-key-left', 'left_outer'))).toEqual({ stages: 2, hops: [['order_id = ref']] });
    expect(explainQuery(joinThenCountByJoinKey('by-key-explain'), { allowRepartition: true }))
      .toMatch(/Stage 2 .*: inner Join by \[order_id = ref\], then Aggregate by \[window, order_id\], output mode append, sink s3-files/);
  });

  it('a full outer join pads both keys, and other keys route elsewhere: its own hop', () => {
    expect(shape(joinThenCountByJoinKey('by-key-full', 'full_outer'))).toEqual({ stages: 3, hops: [['order_id = ref'], ['order_id']] });
    expect(shape(joinThenCountByAmount('by-amount'))).toEqual({ stages: 3, hops: [['order_id = ref'], ['amount']] });
  });

  for (const [name, def] of [
    ['inner join → count by order (one stage)', joinThenCountByJoinKey('by-key-run')],
    ['left outer join → count by order (one stage)', joinThenCountByJoinKey('by-key-run-left', 'left_outer')],
    ['inner join → count by amount (own hop)', joinThenCountByAmount('by-amount-run')],
  ] as const) {
    it(`${name}: same answer on 1, 2 and 4 shards per stream as in memory`, async () => {
      const expected = await inMemoryJoin(def, events);
      expect(expected.length).toBeGreaterThan(20);
      for (const shards of [1, 2, 4]) {
        expect({ shards, rows: (await runThroughHops(def, events, shards, 3)).rows }).toEqual({ shards, rows: expected });
      }
    });
  }
});

describe('an aggregate feeding a join', () => {
  const events = joinEvents(540, 9);

  it('the aggregate behind hop 1 (by its keys, orders forwarded), the join behind hop 2 (by its keys)', () => {
    expect(shape(aggregateThenJoin('agg-join-shape'))).toEqual({ stages: 3, hops: [['ref', '(forwarded)'], ['ref = order_id']] });
  });

  it('same answer on 1, 2 and 4 shards per stream as in memory', async () => {
    const def = aggregateThenJoin('agg-join-run');
    const expected = await inMemoryJoin(def, events);
    expect(expected.length).toBeGreaterThan(20);
    for (const shards of [1, 2, 4]) {
      expect({ shards, rows: (await runThroughHops(def, events, shards, 3, shards === 2 ? 3 : 0)).rows }).toEqual({ shards, rows: expected });
    }
  });
});

describe('two aggregates joined on their window (Spark\'s documented chain)', () => {
  const events = joinEvents(540, 9);

  it('each aggregate in stage 2 (a window alone routes nowhere: one partition), the join in stage 3 routed by the window', async () => {
    expect(shape(aggregatesJoinedOnWindow('aggs-join-shape'))).toEqual({ stages: 3, hops: [['(one partition)', '(one partition)'], ['ow = pw']] });
    const def = aggregatesJoinedOnWindow('aggs-join-run');
    const expected = await inMemoryJoin(def, events);
    expect(expected.length).toBeGreaterThan(10);
    for (const shards of [1, 2, 4]) {
      expect({ shards, rows: (await runThroughHops(def, events, shards, 3)).rows }).toEqual({ shards, rows: expected });
    }
  });
});
