/**
 * A stateful query not keyed by its declared partition key, on a created stream of one shard, runs
 * in one stage; raising `shardCount` later gives it a repartition stage. With one internal stream
 * the state moves to it at the split (test/aws/stage-migration.integration.test.ts); with more it
 * does not follow (the split children are refused, RESHARD_STAGE_CHANGED:
 * test/aws/stage-layout-reshard.integration.test.ts). Synth says which at the first deploy.
 */
import { Annotations, Match } from 'aws-cdk-lib/assertions';
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import { describe, expect, it } from 'vitest';
import { SluiceQuery, type SluiceQueryProps } from '../../cdk/sluice-query.js';
import { example, fixture, testStack } from './support.js';

function warnings(props: SluiceQueryProps): string[] {
  const stack = testStack();
  new SluiceQuery(stack, 'Query', props);
  return Annotations.fromStack(stack).findWarning('*', Match.anyValue()).map((w) => String(w.entry.data));
}

describe('synth warns when a state lives in one shard only because the stream has one', () => {
  it('per product on one shard (the stream is partitioned by store): the state moves at a split deployed for more shards; the ways out', () => {
    const [warning, ...more] = warnings({ queryModule: example('hourly-sales-per-product.ts') });
    expect(more).toEqual([]);
    expect(warning).toMatch(/query 'hourly-sales-per-product' runs in one stage only because its stream has one shard/);
    expect(warning).toMatch(/at the split the state moves to it/);
    expect(warning).toMatch(/split made outside a deploy is refused \(RESHARD_WITH_STATE\)/);
    expect(warning).not.toMatch(/new query name/);
    expect(warning).toMatch(/`stream`, without expectedShardCount\) or streamMode ON_DEMAND/);
  });

  it('a deduplication then a count (two internal streams on more shards): the warning names the refusal and a new query name', () => {
    const [warning, ...more] = warnings({ queryModule: fixture('two-stateful-operators.ts') });
    expect(more).toEqual([]);
    expect(warning).toMatch(/RESHARD_STAGE_CHANGED.*new query name/);
  });

  it('with a given stream declared to have one shard: leave expectedShardCount unset', () => {
    const stack = testStack();
    const stream = new kinesis.Stream(stack, 'Given', { shardCount: 1 });
    new SluiceQuery(stack, 'Query', { queryModule: example('hourly-sales-per-product.ts'), stream, expectedShardCount: 1 });
    const found = Annotations.fromStack(stack).findWarning('*', Match.anyValue()).map((w) => String(w.entry.data));
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/leave expectedShardCount unset/);
  });

  it('no warning when the state follows the partition key, or the query already has its stage', () => {
    expect(warnings({ queryModule: example('hourly-sales-live.ts') })).toEqual([]);
    expect(warnings({ queryModule: example('hourly-sales-per-product.ts'), shardCount: 2 })).toEqual([]);
  });
});
