/**
 * A stream-stream join's state through the hop follows its join keys on a reshard of the internal
 * stream: both of a side's stores (the key's count and its indexed rows) route an entry by the
 * join-key values the hop routes rows by, so a key's count and rows go to the same child, the
 * child its rows now go to. Each stateful operator of stage 2 routes by where the routed values sit
 * among its own keys: the joins of a chain, the join of a split's side, an aggregate above a join.
 */
import { describe, expect, it } from 'vitest';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { encodeKey } from '../../lib/execution/values.js';
import { decodeKey, repartitionRoutingKey, repartitionStateRouting, stateStoresOf } from '../../lib/state/state-routing.js';
import { joinQuery } from '../support/join-queries.js';
import { joinThenCountByJoinKey, joinThenJoin, joinThenJoinOnOtherKey } from '../support/chain-queries.js';

describe('join state routing through the hop', () => {
  it('routes both stores of both sides by the join key', () => {
    const q = compileQuery(joinQuery('routing', 'left_outer'), { allowRepartition: true });
    const stage = q.stateStage!;
    expect(stage.inputHop!.routingKeyPositions).toEqual([0]);
    const routing = repartitionStateRouting(stage.plan, stage.inputHop!.routingKeyPositions);
    expect(routing.map((r) => r.id.storeName).sort()).toEqual(['left-keyToNumValues', 'left-keyWithIndexToValue', 'right-keyToNumValues', 'right-keyWithIndexToValue']);
    const key = encodeKey(['o17']);
    const expected = repartitionRoutingKey(['o17']);
    for (const r of routing) {
      const entryKey = r.id.storeName.endsWith('keyWithIndexToValue') ? `${key}#3` : key;
      expect(r.routingKey!(entryKey, r.id.storeName.endsWith('keyWithIndexToValue') ? { row: [], matched: false } : { key: ['o17'], count: 4 })).toBe(expected);
    }
  });

  it('a long join key beyond 2^53 routes its state as the hop routes its rows (exact digits, not the nearest double)', () => {
    const q = compileQuery(joinQuery('routing-long', 'inner'), { allowRepartition: true });
    const routing = repartitionStateRouting(q.stateStage!.plan, q.stateStage!.inputHop!.routingKeyPositions);
    for (const value of [2n ** 53n + 1n, -(2n ** 62n) - 3n, 9_223_372_036_854_775_807n]) {
      const key = encodeKey([value]);
      const expected = repartitionRoutingKey([value]);
      expect(expected).toBe(`[${value}]`);
      for (const r of routing) {
        const rows = r.id.storeName.endsWith('keyWithIndexToValue');
        expect(r.routingKey!(rows ? `${key}#0` : key, rows ? { row: [], matched: false } : { key: [value], count: 1 })).toBe(expected);
      }
      // A key of several columns (encodeKey's JSON form) keeps its long exactly too.
      expect(decodeKey(encodeKey([value, 'x']))).toEqual([value, 'x']);
    }
  });

  /** Stage 2's routing as the reshard guard builds it (the hop's per-operator positions). */
  const stage2Routing = (q: ReturnType<typeof compileQuery>) => {
    const stage = q.stages.find((s) => s.index === 1)!;
    const hop = stage.inputHop!;
    return { stage, routing: repartitionStateRouting(stage.plan, hop.routingKeyPositions, hop.stateUnroutable, hop.stateKeyPositions) };
  };

  /** The string the repartition sink hashes for a row of `source` whose columns are `values`. */
  const rowRoutingKey = (q: ReturnType<typeof compileQuery>, source: string, values: Record<string, unknown>): string => {
    const input = q.hop!.inputs.find((i) => i.sourceId === source)!;
    const row = input.cutOutput.map((a) => values[a.name] ?? null);
    return repartitionRoutingKey(input.routingOrdinals.map((o) => row[o]));
  };

  const joinEntry = (storeName: string, keyValues: unknown[]): [string, unknown] => (storeName.endsWith('keyWithIndexToValue')
    ? [`${encodeKey(keyValues)}#0`, { row: [], matched: false }]
    : [encodeKey(keyValues), { key: keyValues, count: 1 }]);

  it('joins chained in one stage: each join\'s state routes by its key of the class the rows are routed by', () => {
    const q = compileQuery(joinThenJoin('routing-chain', 'inner'), { allowRepartition: true });
    const { routing } = stage2Routing(q);
    expect(routing.length).toBe(8);
    const expected = rowRoutingKey(q, 'orders', { order_id: 'o17' });
    expect(rowRoutingKey(q, 'shipments', { sid: 'o17' })).toBe(expected);
    for (const r of routing) expect(r.routingKey!(...joinEntry(r.id.storeName, ['o17']))).toBe(expected);
  });

  it('a join feeding a join on another key: stage 2\'s join state routes by its own key, as its rows are (the forwarded side by the other)', () => {
    const q = compileQuery(joinThenJoinOnOtherKey('routing-split'), { allowRepartition: true });
    const { stage, routing } = stage2Routing(q);
    expect(stage.inputHop!.stateUnroutable).toBeUndefined();
    expect(routing.length).toBe(4);
    const expected = rowRoutingKey(q, 'payments', { ref: 'o17' });
    expect(rowRoutingKey(q, 'orders', { order_id: 'o17' })).toBe(expected);
    for (const r of routing) expect(r.routingKey!(...joinEntry(r.id.storeName, ['o17']))).toBe(expected);
  });

  it('an aggregate co-partitioned above a join routes by the join key among its keys, not by its first key (the window)', () => {
    const q = compileQuery(joinThenCountByJoinKey('routing-agg'), { allowRepartition: true });
    const { stage, routing } = stage2Routing(q);
    const aggregate = stateStoresOf(stage.plan).find((o) => o.node.kind === 'Aggregate')!;
    const store = routing.find((r) => r.id.operatorId === aggregate.operatorId)!;
    const window = { start: 1_700_000_000_000_000, end: 1_700_000_600_000_000 };
    expect(store.routingKey!('ignored', [[window, 'o17'], [1, 10]])).toBe(rowRoutingKey(q, 'orders', { order_id: 'o17' }));
  });
});
