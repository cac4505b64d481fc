/**
 * NULL keys an outer join pads, above it, through the hops on memory backends. Chained joins whose
 * second join compares a NULL-safe key (`order_id <=> sid`): the first join (payments ⟕ orders)
 * pads unmatched payments with a NULL `order_id`, which under `<=>` match the shipments with a NULL
 * `sid`. Spark shuffles before each join by its own keys, so they meet; the staged run must give
 * the one-partition (in-memory engine's) answer on any number of internal shards. Likewise an
 * aggregate grouped by the padded column: its NULL group must be one group.
 */
import { describe, expect, it } from 'vitest';
import { compileQuery } from '../../lib/query/compiled-query.js';
import {
  inMemoryNullKeyJoins, nullKeyOuterJoins, nullSafeEvents, nullSafeOnPreservedKey, nullSafeOuterJoins, paddedKeyCount,
} from '../support/null-key-join.js';
import { runThroughHops } from '../support/run-through-hops.js';

const routing = (name: string, def: Parameters<typeof compileQuery>[0]): readonly (readonly string[])[] =>
  compileQuery({ ...def, name }, { allowRepartition: true }).hops.map((h) => h.routingColumns);

describe('NULL keys an outer join pads, above it (memory backends)', () => {
  const events = nullSafeEvents(120, 5);
  const streams: Record<string, readonly object[]> = { ...events };

  const cases = [
    ['left outer join → inner join on order_id <=> sid', nullSafeOuterJoins('null-safe-inner', 'inner')],
    ['left outer join → left outer join on order_id <=> sid', nullSafeOuterJoins('null-safe-outer', 'left_outer')],
    ['left outer join → left outer join on ref <=> sid (the preserved side\'s key)', nullSafeOnPreservedKey('null-safe-ref')],
  ] as const;
  for (const [name, def] of cases) {
    it(`${name}: the in-memory answer on 1, 2 and 4 internal shards`, async () => {
      const expected = await inMemoryNullKeyJoins(def, events);
      // NULL-keyed rows do meet NULL-sid shipments in the answer (else the test proves nothing).
      expect(expected.filter((r) => r.includes('"sid":null') && r.includes('"zone":9')).length).toBeGreaterThan(3);
      for (const stateShards of [1, 2, 4]) {
        const { rows } = await runThroughHops(def, streams, 2, stateShards);
        expect({ stateShards, missing: expected.filter((r) => !rows.includes(r)).length, rows }).toEqual({ stateShards, missing: 0, rows: expected });
      }
    });
  }

  it('routes a join comparing a padded column with <=> by its own key; the others by the class the joins equate', () => {
    // The second join behind a hop of its own, routed by order_id/sid (NULL to the NULL key's shard on both sides).
    expect(routing('a', nullSafeOuterJoins('a'))).toEqual([['ref = order_id', '(forwarded)'], ['order_id = sid']]);
    // With `=` a padded NULL never matches; with `<=>` on ref the key is never padded: one stage, one class.
    expect(routing('b', nullKeyOuterJoins('b'))).toEqual([['ref = order_id = sid']]);
    expect(routing('c', nullSafeOnPreservedKey('c'))).toEqual([['ref = order_id = sid']]);
  });

  it('an aggregate grouped by the padded order_id: one NULL group per window on 1, 2 and 4 internal shards', async () => {
    const def = paddedKeyCount('padded-count');
    // Its own hop by order_id (the window is computed): the padded rows' ref does not route their group.
    expect(routing('d', def)).toEqual([['ref = order_id'], ['order_id']]);
    const expected = await inMemoryNullKeyJoins(def, { ...events, shipments: [] });
    expect(expected.filter((r) => r.includes('"order_id":null')).length).toBeGreaterThan(3);
    for (const stateShards of [1, 2, 4]) {
      const { rows } = await runThroughHops(def, { orders: events.orders, payments: events.payments }, 2, stateShards);
      expect({ stateShards, rows }).toEqual({ stateShards, rows: expected });
    }
  });
});
