/**
 * A stage behind a hop can run several stateful operators (one co-partitioned with the one below
 * it). On a reshard of its internal stream each routes its entries by where the values its rows
 * were routed by sit among its own keys, which need not be where the stage's first operator holds
 * them: a deduplication by store, then a count per window and store, holds the store first, then
 * second (after the window). Routing the count by the dedup's positions hashed the window.
 */
import { describe, expect, it } from 'vitest';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { col, count, window } from '../../lib/plan/functions.js';
import { encodeKey } from '../../lib/execution/values.js';
import { repartitionRoutingKey, repartitionStateRouting, stateStoresOf } from '../../lib/state/state-routing.js';

const dedupThenWindowedCount = defineQuery({
  name: 'dedup-then-count', source: { schema: 'order_id string, store_id string, amount long, ts timestamp' },
  outputMode: 'append', sink: { kind: 's3-files' },
  transform: (df) => df.withWatermark('ts', '10 minutes').dropDuplicatesWithinWatermark(['store_id'])
    .groupBy(window(col('ts'), '10 minutes'), col('store_id')).agg(count('*').as('n')),
});

describe('state routing of a stage with several stateful operators', () => {
  it('a deduplication then a windowed count by the same key: each routes by the key, where its rows went', () => {
    const q = compileQuery(dedupThenWindowedCount, { allowRepartition: true, expectedShardCount: 2 });
    const stage = q.stages.find((s) => s.reads === 'internal-stream')!;
    const hop = stage.inputHop!;
    expect(hop.routingColumns).toEqual(['store_id']);
    const routing = repartitionStateRouting(stage.plan, hop.routingKeyPositions, hop.stateUnroutable, hop.stateKeyPositions);
    const row = hop.output.map((a) => (a.name === 'store_id' ? 'north' : null));
    const expected = repartitionRoutingKey(hop.routingOrdinals.map((o) => row[o]));
    expect(expected).toBe('["north"]');
    const operators = stateStoresOf(stage.plan);
    expect(operators.map((o) => o.node.kind)).toEqual(['Aggregate', 'Deduplicate']);
    const aggregate = routing.find((r) => r.id.operatorId === operators[0]!.operatorId)!;
    const dedup = routing.find((r) => r.id.operatorId === operators[1]!.operatorId)!;
    const windowValue = { start: 1_700_000_000_000_000, end: 1_700_000_600_000_000 };
    expect(aggregate.routingKey!('ignored', [[windowValue, 'north'], [3]])).toBe(expected);
    expect(dedup.routingKey!(encodeKey(['north']), 1_700_000_000_000)).toBe(expected);
  });
});
