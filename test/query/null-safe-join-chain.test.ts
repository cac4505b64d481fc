/**
 * Chained stream-stream joins whose second join compares a NULL-safe key (`order_id <=> sid`),
 * through the hops on memory backends. The first join (payments ⟕ orders) pads unmatched payments
 * with a NULL `order_id`; under `<=>` these match the shipments with a NULL `sid`. Spark shuffles
 * before each join by its own keys, so they meet; the staged run must give the one-partition
 * (in-memory engine's) answer on any number of internal shards.
 */
import { describe, expect, it } from 'vitest';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { inMemoryNullKeyJoins, nullSafeEvents, nullSafeOuterJoins } from '../support/null-key-join.js';
import { runThroughHops } from '../support/run-through-hops.js';

describe('chained joins with a NULL-safe key on a column an outer join pads (memory backends)', () => {
  const events = nullSafeEvents(120, 5);

  for (const second of ['inner', 'left_outer'] as const) {
    it(`left outer join → ${second} join on order_id <=> sid: the in-memory answer on 1, 2 and 4 internal shards`, async () => {
      const def = nullSafeOuterJoins(`null-safe-${second}`, second);
      const expected = await inMemoryNullKeyJoins(def, events);
      // The padded payments do meet NULL-sid shipments in the answer (else the test proves nothing).
      const paddedMatches = expected.filter((r) => r.includes('"order_id":null') && r.includes('"zone":9'));
      expect(paddedMatches.length).toBeGreaterThan(3);
      for (const stateShards of [1, 2, 4]) {
        const { rows } = await runThroughHops(def, events, 2, stateShards);
        expect({ stateShards, missing: expected.filter((r) => !rows.includes(r)).length, rows }).toEqual({ stateShards, missing: 0, rows: expected });
      }
    });
  }

  it('routes the second join by its own key (a hop of its own), not by the first join\'s class', () => {
    const query = compileQuery(nullSafeOuterJoins('null-safe-plan'), { allowRepartition: true });
    expect(query.hops.map((h) => h.routingColumns)).toEqual([['ref = order_id', '(forwarded)'], ['order_id = sid']]);
  });
});
