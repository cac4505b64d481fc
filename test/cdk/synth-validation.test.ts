/**
 * What `cdk synth` refuses: queries the engine's analyzer refuses (with its message, code and
 * hint, plus the construct path), and props that cannot work. All of it fails in the construct's
 * constructor, before any asset is bundled. A query whose state is not co-partitioned with the
 * stream is refused only with `repartition: false`; by default it gets a repartition stage.
 */
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { describe, expect, it } from 'vitest';
import { SluiceQuery, type SluiceQueryProps } from '../../cdk/sluice-query.js';
import { example, fixture, testStack } from './support.js';

function synthError(props: SluiceQueryProps, id = 'Query'): Error & { code?: string; hint?: string } {
  const stack = testStack();
  try {
    new SluiceQuery(stack, id, props);
  } catch (error) {
    return error as Error & { code?: string };
  }
  throw new Error('expected the construct to refuse these props');
}

describe('synth refuses what the engine refuses', () => {
  it('update mode with the S3 files sink: the engine\'s message, and the hint to use the DynamoDB sink', () => {
    const error = synthError({ queryModule: fixture('update-to-s3-files.ts') });
    expect(error.name).toBe('AnalysisError');
    expect(error.code).toBe('SINK_DOES_NOT_SUPPORT_OUTPUT_MODE');
    expect(error.message).toContain('Data source s3-files does not support update output mode');
    expect(error.message).toMatch(/How to fix: .*use sink \{ kind: 'dynamodb' \}/);
    expect(error.message).toContain('SluiceQuery Test/Query');
    expect(error.message).toContain('update-to-s3-files.ts');
    // The stack trace carries the same message, so `cdk synth` prints it.
    expect(error.stack!.split('SluiceQuery Test/Query').length - 1).toBe(1);
  });

  it('repartition: false, a stateful query without a declared partition key on a 4-shard stream: STATE_NOT_CO_PARTITIONED', () => {
    const error = synthError({ queryModule: fixture('stateful-without-partition-key.ts'), shardCount: 4, repartition: false });
    expect(error.name).toBe('AnalysisError');
    expect(error.code).toBe('STATE_NOT_CO_PARTITIONED');
    expect(error.message).toContain('SluiceQuery Test/Query: query \'orders-per-store\'');
    expect(error.message).toContain('with repartition: false');
    expect(error.message).toContain('keys its state by [store_id], but the stream\'s partition key is not declared');
    expect(error.message).toContain("source: { partitionKey: '<column>' }");
    // Without repartition: false the same query deploys with a repartition stage.
    const query = new SluiceQuery(testStack(), 'Query', { queryModule: fixture('stateful-without-partition-key.ts'), shardCount: 4 });
    expect(query.needsRepartition).toBe(true);
    expect(query.repartitionStream).toBeDefined();
  });

  it('repartition: false, a query partitioned by a column that is not a state key: STATE_NOT_CO_PARTITIONED', () => {
    const error = synthError({ queryModule: example('hourly-sales-per-product.ts'), shardCount: 2, repartition: false });
    expect(error.code).toBe('STATE_NOT_CO_PARTITIONED');
    expect(error.message).toContain('keys its state by [window, product], but the stream is partitioned by \'store_id\', which is not among these keys');
  });

  it('on a given stream of unknown shard count: refused with repartition: false, a repartition stage by default, one stage on one shard', () => {
    const stack = testStack();
    const stream = kinesis.Stream.fromStreamArn(stack, 'Given', 'arn:aws:kinesis:eu-west-1:123456789012:stream/orders');
    const statefulWithoutKey = fixture('stateful-without-partition-key.ts');
    expect(() => new SluiceQuery(stack, 'Refused', { queryModule: statefulWithoutKey, stream, repartition: false }))
      .toThrow(/partition key is not declared/);
    expect(new SluiceQuery(stack, 'Unknown', { queryModule: statefulWithoutKey, stream }).needsRepartition).toBe(true);
    const oneShard = new SluiceQuery(stack, 'OneShard', { queryModule: statefulWithoutKey, stream, expectedShardCount: 1, repartition: false });
    expect(oneShard.needsRepartition).toBe(false);
    expect(oneShard.repartitionStream).toBeUndefined();
    // A created stream has one shard by default: one stage.
    expect(new SluiceQuery(testStack(), 'Created', { queryModule: statefulWithoutKey }).needsRepartition).toBe(false);
  });

  it('a query the repartition stage cannot split (two stateful operators): REPARTITION_UNSUPPORTED on several shards, fine on one', () => {
    const error = synthError({ queryModule: fixture('two-stateful-operators.ts'), shardCount: 2 });
    expect(error.name).toBe('AnalysisError');
    expect(error.code).toBe('REPARTITION_UNSUPPORTED');
    expect(error.message).toContain('cannot be split into a repartition stage: it has 2 stateful operators');
    expect(() => new SluiceQuery(testStack(), 'OneShard', { queryModule: fixture('two-stateful-operators.ts') })).not.toThrow();
  });

  it('an append-mode aggregation without a watermark: Spark\'s message and error class', () => {
    const error = synthError({ queryModule: fixture('append-without-watermark.ts') });
    expect(error.name).toBe('AnalysisError');
    expect(error.message).toContain('Append output mode not supported when there are streaming aggregations');
    expect((error as { errorClass?: string }).errorClass).toMatch(/^STREAMING_OUTPUT_MODE/);
  });

  it('a module without a default export, and a module that does not exist', () => {
    expect(synthError({ queryModule: fixture('no-default-export.ts') }).message).toMatch(/no default export/);
    expect(synthError({ queryModule: fixture('missing.ts') }).message).toMatch(/queryModule '.*missing\.ts' does not exist/);
  });
});

describe('synth refuses props that cannot work', () => {
  const live = example('hourly-sales-live.ts');
  const archive = example('hourly-sales-archive.ts');

  it('parallelizationFactor 2, saying why and how to scale instead', () => {
    const error = synthError({ queryModule: live, parallelizationFactor: 2 });
    expect(error.message).toContain('SluiceQuery Test/Query: parallelizationFactor 2 is not supported; only 1 is.');
    expect(error.message).toContain('exactly one writer');
    expect(error.message).toContain('add shards');
    expect(error.message).toContain('partitionKey');
  });

  it('conflicting or misplaced sink and stream settings', () => {
    const stack = testStack();
    const bucket = new s3.Bucket(stack, 'Bucket');
    const table = new dynamodb.Table(stack, 'Table', { partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING } });
    const stream = kinesis.Stream.fromStreamArn(stack, 'Given', 'arn:aws:kinesis:eu-west-1:123456789012:stream/sales');
    const refuse = (id: string, props: Omit<SluiceQueryProps, 'queryModule'> & { queryModule?: string }, pattern: RegExp) =>
      expect(() => new SluiceQuery(stack, id, { queryModule: live, ...props })).toThrow(pattern);
    refuse('A', { sinkBucket: bucket }, /sinkBucket and sinkPrefix are for the s3-files and s3-snapshot sinks/);
    refuse('B', { queryModule: archive, sinkTable: table }, /sinkTable is for the dynamodb sink/);
    refuse('C', { queryModule: archive, sinkPrefix: 'elsewhere/' }, /sinkPrefix 'elsewhere\/' differs from the query's sink.prefix 'hourly-sales\/archive\/'/);
    refuse('D', { stream, shardCount: 2 }, /shardCount \(2\) applies only to a stream the construct creates/);
    refuse('E', { shardCount: 2, expectedShardCount: 4 }, /expectedShardCount \(4\) differs from the shardCount .* \(2\)/);
    refuse('F', { batchSize: 0 }, /batchSize must be an integer from 1 to 10000, got 0/);
    refuse('G', { snapshotEveryBatches: 0.5 }, /snapshotEveryBatches must be a positive integer, got 0.5/);
    refuse('H', { repartitionShardCount: 0 }, /repartitionShardCount must be a positive integer, got 0/);
    refuse('I', { repartitionShardCount: 2, repartition: false }, /repartitionShardCount \(2\) sets the internal stream of a repartition stage, but repartition is false/);
  });
});
