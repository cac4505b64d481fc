/**
 * Each run's fault plans per function: the scheduled function of a query of any number of hops
 * gets faults where every tick is sure to pass; a reshard is planned on every internal stream
 * whose stage can be divided (a join's too), and never where the engine refuses the split.
 */
import { describe, expect, it } from 'vitest';
import { compileQuery } from '../../../lib/query/compiled-query.js';
import { FAULT_POINT } from '../../../lib/local/chaos/faults.js';
import { planRunFaults, undivisibleStages } from '../../../lib/local/chaos/run-plan.js';
import { chainedAggregatesQuery, joinThenAggregateQuery } from '../../../lib/local/chaos/staged-queries.js';
import { joinThenJoinOnOtherKey } from '../../support/chain-queries.js';

const compiled = (q: Parameters<typeof compileQuery>[0]) => compileQuery(q, { expectedShardCount: 2, allowRepartition: true });

describe('run plans', () => {
  it('every stage-2 state can be divided on its internal streams: a join feeding an aggregate, chained aggregates, a join feeding a join on another key', () => {
    expect(undivisibleStages(compiled(joinThenAggregateQuery('j')))).toEqual([]);
    expect(undivisibleStages(compiled(chainedAggregatesQuery('c')))).toEqual([]);
    expect(undivisibleStages(compiled(joinThenJoinOnOtherKey('jj')))).toEqual([]);
  });

  it('reshard-mid-run on the join\'s internal streams, not where the split is refused; the scheduled function of two hops gets faults at points every tick meets', () => {
    const stage = { invocation: 40, response: 40, 'dynamodb-request': 300, 'offset-write': 20 };
    const certain = { 'dynamodb-request': 12, 'kinesis-request': 6 };
    const ids = ['j/sales', 'j/payments', 'j/stage-2', 'j/stage-3', 'jj/stage-2', 'jj/stage-3', 'c/scheduled'];
    const counts = new Map(ids.map((id) => [id, id.endsWith('/scheduled') ? { ...stage, 'commit-write': 4 } : stage]));
    const plans = planRunFaults({
      seed: 1, run: 1, counts, certainCounts: new Map([['c/scheduled', certain]]), extraFaults: 2, reshard: true, expirePlanned: false,
      noReshard: new Set(['jj/stage-2']),
    });
    for (const id of ['j/sales', 'j/stage-2', 'j/stage-3', 'jj/stage-3']) expect(plans.get(id)!.some((f) => f.kind === 'reshard-mid-run'), id).toBe(true);
    expect(plans.get('jj/stage-2')!.some((f) => f.kind === 'reshard-mid-run')).toBe(false);
    const scheduled = plans.get('c/scheduled')!;
    expect(scheduled.length).toBeGreaterThan(0);
    // Only at points every tick meets, within what they meet (not the commit-write its busy ticks met).
    for (const f of scheduled) {
      const point = FAULT_POINT[f.kind] as keyof typeof certain;
      expect(Object.keys(certain)).toContain(point);
      expect(f.at).toBeLessThan(certain[point]);
    }
    // The same seed, the same plans.
    expect(planRunFaults({
      seed: 1, run: 1, counts, certainCounts: new Map([['c/scheduled', certain]]), extraFaults: 2, reshard: true, expirePlanned: false, noReshard: new Set(['jj/stage-2']),
    })).toEqual(plans);
  });
});
