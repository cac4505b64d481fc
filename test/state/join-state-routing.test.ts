/**
 * A stream-stream join's state through the hop follows its join keys on a reshard of the internal
 * stream: both of a side's stores (the key's count and its indexed rows) route an entry by the
 * join-key values the hop routes rows by, so a key's count and rows go to the same child, the
 * child its rows now go to. Joins chained in one stage stay unsplittable.
 */
import { describe, expect, it } from 'vitest';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { encodeKey } from '../../lib/execution/values.js';
import { decodeKey, repartitionRoutingKey, repartitionStateRouting } from '../../lib/state/state-routing.js';
import { joinQuery } from '../support/join-queries.js';
import { joinThenJoin } from '../support/chain-queries.js';

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

  it('joins chained in one stage are not split (a merge still unions them)', () => {
    const q = compileQuery(joinThenJoin('routing-chain', 'inner'), { allowRepartition: true });
    const routing = repartitionStateRouting(q.stateStage!.plan, q.stateStage!.inputHop!.routingKeyPositions);
    expect(routing.length).toBeGreaterThan(4);
    expect(routing.every((r) => r.routingKey === null)).toBe(true);
  });
});
