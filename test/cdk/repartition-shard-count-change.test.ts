/**
 * Changing `repartitionShardCount` on a deployed query: the next deploy updates the internal
 * stream in place (CloudFormation's AWS::Kinesis::Stream takes a new ShardCount without
 * replacement, by UpdateShardCount with uniform scaling), and nothing else in the template
 * changes: same stream (no Name is set, so no replacement), same tables, same functions and
 * configuration. The runtime then treats the new shards as any reshard (each child starts from its
 * parents' state): test/aws/repartition-shard-count-change.integration.test.ts.
 */
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { SluiceQuery } from '../../cdk/sluice-query.js';
import { example, testStack } from './support.js';

interface Resource { Type: string; Properties?: Record<string, unknown> }

function synth(repartitionShardCount: number): { resources: Record<string, Resource>; internal: string } {
  const stack = testStack();
  const query = new SluiceQuery(stack, 'PerProduct', { queryModule: example('hourly-sales-per-product.ts'), shardCount: 2, repartitionShardCount });
  const template = Template.fromStack(stack).toJSON() as { Resources: Record<string, Resource> };
  return { resources: template.Resources, internal: stack.getLogicalId(query.repartitionStream!.node.defaultChild as never) };
}

/** The template without what differs per synth anyway (asset hashes of unbundled functions). */
const comparable = (r: Record<string, Resource>): string => JSON.stringify(r).replace(/[0-9a-f]{64}(\.zip)?/g, '<asset>');

describe('changing repartitionShardCount of a deployed query', () => {
  it('updates only the internal stream\'s ShardCount, in place', () => {
    const before = synth(2);
    const after = synth(4);
    expect(after.internal).toBe(before.internal);
    expect(before.resources[before.internal]!.Properties).toMatchObject({ ShardCount: 2 });
    expect(after.resources[after.internal]!.Properties).toMatchObject({ ShardCount: 4 });
    // A Name would make CloudFormation replace the stream on some changes; the internal stream has none.
    expect(after.resources[after.internal]!.Properties!.Name).toBeUndefined();
    const patched = structuredClone(before.resources);
    (patched[before.internal]!.Properties as Record<string, unknown>).ShardCount = 4;
    expect(comparable(after.resources)).toBe(comparable(patched));
  });
});
