/** The construct for a query over several streams: a stream per source, one event source mapping each, the mapping in the environment. */
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { SluiceQuery } from '../../cdk/sluice-query.js';
import { RUNTIME_ENV } from '../../lib/runtime/runtime-config.js';
import { example, fixture, testStack } from './support.js';

describe('SluiceQuery over several source streams', () => {
  it('maps every source to its stream, feeds both to the Kinesis-trigger function and adds the repartition stage', () => {
    const stack = testStack();
    const orders = new kinesis.Stream(stack, 'Orders', { shardCount: 2 });
    const payments = new kinesis.Stream(stack, 'Payments', { shardCount: 4 });
    const query = new SluiceQuery(stack, 'Join', { queryModule: fixture('orders-payments-join.ts'), streams: { orders, payments } });
    expect(query.needsRepartition).toBe(true);
    expect(query.stream).toBe(orders);
    expect(query.extraEventSources).toHaveLength(1);
    const template = Template.fromStack(stack);
    const mappings = Object.values(template.findResources('AWS::Lambda::EventSourceMapping'))
      .filter((m) => !JSON.stringify((m as { Properties: { EventSourceArn: unknown } }).Properties.EventSourceArn).includes('OnFailureQueue'));
    // orders and payments to the Kinesis-trigger function, the internal stream to the repartition function (the on-failure function's queue mapping aside).
    expect(mappings).toHaveLength(3);
    const fn = Object.values(template.findResources('AWS::Lambda::Function'))
      .map((r) => (r as { Properties: { Environment?: { Variables?: Record<string, unknown> } } }).Properties.Environment?.Variables ?? {})
      .find((v) => v[RUNTIME_ENV.sourceStreams] !== undefined);
    expect(JSON.stringify(fn![RUNTIME_ENV.sourceStreams])).toMatch(/\\"orders\\":.*\\"payments\\":/);
  });

  it('join → aggregate: an internal stream per hop (two), each with its mapping to the repartition function', () => {
    const stack = testStack();
    const orders = new kinesis.Stream(stack, 'Orders', { shardCount: 2 });
    const payments = new kinesis.Stream(stack, 'Payments', { shardCount: 2 });
    const query = new SluiceQuery(stack, 'JoinAgg', { queryModule: fixture('join-then-aggregate.ts'), streams: { orders, payments } });
    expect(query.laterRepartitionStreams.length).toBe(1);
    const template = Template.fromStack(stack);
    // orders, payments and the two internal streams.
    template.resourceCountIs('AWS::Kinesis::Stream', 4);
    const kinesisMappings = Object.values(template.findResources('AWS::Lambda::EventSourceMapping'))
      .filter((m) => !JSON.stringify((m as { Properties: { EventSourceArn: unknown } }).Properties.EventSourceArn).includes('OnFailureQueue'));
    // orders, payments and the two internal streams (the on-failure function's queue mapping aside).
    expect(kinesisMappings).toHaveLength(4);
  });

  it('a declared source without a stream fails synth, naming it and the prop to set', () => {
    const stack = testStack();
    const orders = new kinesis.Stream(stack, 'Orders', { shardCount: 1 });
    expect(() => new SluiceQuery(stack, 'Join', { queryModule: fixture('orders-payments-join.ts'), streams: { orders } }))
      .toThrow(/SluiceQuery Test\/Join: query 'orders-payments' declares source 'payments' with no stream: give streams: \{ orders: <kinesis.IStream>, payments: <kinesis.IStream> \}/);
  });

  it('streams on a one-stream query, or stream on a query over several, is refused', () => {
    const stack = testStack();
    const s = new kinesis.Stream(stack, 'S', { shardCount: 1 });
    expect(() => new SluiceQuery(stack, 'One', { queryModule: example('hourly-sales-live.ts'), streams: { orders: s } })).toThrow(/streams applies to a query over several streams/);
    expect(() => new SluiceQuery(stack, 'Two', { queryModule: fixture('orders-payments-join.ts'), streams: { orders: s, payments: s }, shardCount: 2 }))
      .toThrow(/shardCount applies to a one-stream query/);
  });
});
