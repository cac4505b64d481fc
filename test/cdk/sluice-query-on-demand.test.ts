/**
 * On-demand streams reshard by themselves; stateful queries follow them (a child shard starts from
 * its parents' state), so the construct creates and accepts them.
 */
import { Template } from 'aws-cdk-lib/assertions';
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import { describe, expect, it } from 'vitest';
import { SluiceQuery } from '../../cdk/sluice-query.js';
import { example, testStack } from './support.js';

describe('SluiceQuery on an on-demand stream', () => {
  it('creates an on-demand stream for a stateful query co-partitioned by its declared key: one stage, shard count unknown', () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts'), streamMode: kinesis.StreamMode.ON_DEMAND });
    const template = Template.fromStack(stack);
    template.resourceCountIs('AWS::Kinesis::Stream', 1);
    template.hasResourceProperties('AWS::Kinesis::Stream', { StreamModeDetails: { StreamMode: 'ON_DEMAND' } });
    expect(query.expectedShardCount).toBeUndefined();
    expect(query.repartitionStream).toBeUndefined();
  });

  it('gives a stateful query keyed by other columns a repartition stage on an on-demand stream', () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'PerProduct', { queryModule: example('hourly-sales-per-product.ts'), streamMode: kinesis.StreamMode.ON_DEMAND });
    expect(query.repartitionStream).toBeDefined();
  });

  it('accepts a given on-demand stream for a stateful query', () => {
    const stack = testStack();
    const stream = new kinesis.Stream(stack, 'Given', { streamMode: kinesis.StreamMode.ON_DEMAND });
    expect(() => new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts'), stream })).not.toThrow();
  });

  it('refuses a shard count for an on-demand stream, and a stream mode for a given stream', () => {
    expect(() => new SluiceQuery(testStack(), 'Live', {
      queryModule: example('hourly-sales-live.ts'), streamMode: kinesis.StreamMode.ON_DEMAND, shardCount: 2,
    })).toThrow(/do not apply to an on-demand stream/);
    const stack = testStack();
    const stream = new kinesis.Stream(stack, 'Given', { streamMode: kinesis.StreamMode.ON_DEMAND });
    expect(() => new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts'), stream, streamMode: kinesis.StreamMode.ON_DEMAND }))
      .toThrow(/streamMode applies only to a stream the construct creates/);
  });
});
