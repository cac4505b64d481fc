/**
 * What `cdk synth` refuses: queries the engine's analyzer refuses (with its message, code and
 * hint, plus the construct path), and props that cannot work. All of it fails in the construct's
 * constructor, before any asset is bundled. A query whose state is not co-partitioned with the
 * stream is refused only with `repartition: false`; by default it gets a repartition stage.
 */
import { CfnParameter, Duration, type Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { describe, expect, it } from 'vitest';
import { SluiceQuery, type SluiceQueryProps } from '../../cdk/sluice-query.js';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT, example, fixture, testStack } from './support.js';

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

  it('two chained stateful operators on several shards: one internal stream per hop, each read by the repartition function', () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'Chained', { queryModule: fixture('two-stateful-operators.ts'), shardCount: 2 });
    expect(query.needsRepartition).toBe(true);
    expect(query.laterRepartitionStreams.length).toBe(1);
    const template = Template.fromStack(stack);
    template.resourceCountIs('AWS::Kinesis::Stream', 3);
    // The source stream's mapping, then one per internal stream on the repartition function; and the on-failure function's queue mapping.
    template.resourceCountIs('AWS::Lambda::EventSourceMapping', 4);
    const env = Object.values(template.findResources('AWS::Lambda::Function'))
      .map((f) => (f as { Properties: { Environment?: { Variables?: Record<string, unknown> } } }).Properties.Environment?.Variables ?? {});
    expect(env.some((v) => v.SLUICE_REPARTITION_STREAMS !== undefined)).toBe(true);
    expect(() => new SluiceQuery(testStack(), 'OneShard', { queryModule: fixture('two-stateful-operators.ts') })).not.toThrow();
  });

  it('a plan that still cannot be staged (a self-join of one stream on several shards): REPARTITION_UNSUPPORTED naming the join and the fix', () => {
    const error = synthError({ queryModule: fixture('self-join.ts'), shardCount: 2 });
    expect(error.name).toBe('AnalysisError');
    expect(error.code).toBe('REPARTITION_UNSUPPORTED');
    expect(error.message).toContain('cannot be split into a repartition stage: stream \'kinesis\' is read twice (a self-join)');
    expect(error.message).toMatch(/How to fix: declare the two event kinds as two source streams \(definition.sources\)/);
    expect(() => new SluiceQuery(testStack(), 'OneShard', { queryModule: fixture('self-join.ts') })).not.toThrow();
  });

  it('the query\'s trigger: processingTime sets the source mapping\'s batching window; availableNow turns it off and the schedule drains', () => {
    const minute = testStack();
    new SluiceQuery(minute, 'Minute', { queryModule: fixture('trigger-one-minute.ts'), shardCount: 2 });
    Template.fromStack(minute).hasResourceProperties('AWS::Lambda::EventSourceMapping', { MaximumBatchingWindowInSeconds: 60 });
    const error = synthError({ queryModule: fixture('trigger-one-minute.ts'), maxBatchingWindow: Duration.seconds(5) });
    expect(error.message).toContain('maxBatchingWindow and the query\'s trigger processingTime both set');
    const drain = testStack();
    new SluiceQuery(drain, 'Drain', { queryModule: fixture('trigger-available-now.ts'), shardCount: 2 });
    const template = Template.fromStack(drain);
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { Enabled: false });
    template.hasResourceProperties('AWS::Events::Rule', { Targets: [{ Input: JSON.stringify({ mode: 'drain' }) }] });
  });

  it('an append-mode aggregation without a watermark: Spark\'s message and error class', () => {
    const error = synthError({ queryModule: fixture('append-without-watermark.ts') });
    expect(error.name).toBe('AnalysisError');
    expect(error.message).toContain('Append output mode not supported when there are streaming aggregations');
    expect((error as { errorClass?: string }).errorClass).toMatch(/^STREAMING_OUTPUT_MODE/);
  });

  it('a module without a default export, and a module that does not exist', () => {
    expect(synthError({ queryModule: fixture('no-default-export.ts') }).message).toMatch(/no default export/);
    expect(synthError({ queryModule: fixture('missing.ts') }).message).toMatch(/queryModule: query module '.*missing\.ts' not found \(resolved to .*\)/);
  });

  it('a module that throws while loading: the construct path, the file, the cause', () => {
    const error = synthError({ queryModule: fixture('throws-on-load.ts') });
    expect(error.code).toBe('QUERY_MODULE_LOAD_FAILED');
    expect(error.message).toMatch(/^SluiceQuery Test\/Query: queryModule: query module .*throws-on-load\.ts failed to load: the query configuration file is missing/);
  });

  it('a module that does not compile: the file and esbuild\'s message with its line', () => {
    const dir = mkdtempSync(join(PROJECT_ROOT, 'test', 'cdk', 'fixtures', 'tmp-'));
    try {
      writeFileSync(join(dir, 'broken.ts'), "import { defineQuery } from 'sluice';\nexport default defineQuery({ name: 'x', ");
      const error = synthError({ queryModule: join(dir, 'broken.ts') });
      expect(error.code).toBe('QUERY_MODULE_LOAD_FAILED');
      expect(error.message).toMatch(/broken\.ts failed to load: .*broken\.ts:2:\d+: Expected/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a module whose default export is not a query: what was found and what to export', () => {
    const error = synthError({ queryModule: fixture('default-export-not-a-query.ts') });
    expect(error.code).toBe('NOT_A_QUERY_MODULE');
    expect(error.message).toContain('has a default export that is a function (hourlySalesQuery); call it and export its result, not a query definition');
    expect(error.message).toContain('export default defineQuery({ name, source, transform, outputMode, sink })');
  });

  it('a module in no project (no lockfile above it): says so and names depsLockFilePath', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-no-project-'));
    try {
      writeFileSync(join(dir, 'query.ts'), 'export default {};\n');
      const error = synthError({ queryModule: join(dir, 'query.ts') });
      expect(error.message).toMatch(/^SluiceQuery Test\/Query: no lockfile \(package-lock\.json, .*\) in .*sluice-no-project-.* or any directory above it/);
      expect(error.message).toContain('set depsLockFilePath');
      // A lockfile given for another project: the module is not under it.
      expect(synthError({ queryModule: join(dir, 'query.ts'), depsLockFilePath: join(PROJECT_ROOT, 'package-lock.json') }).message)
        .toMatch(/queryModule .*sluice-no-project-.*query\.ts is not under projectRoot/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
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
    refuse('J', { memorySize: 64 }, /memorySize must be an integer from 128 to 10240, got 64/);
  });

  it('numeric props given as deploy-time tokens (CfnParameter): passed through when CloudFormation can take them, refused with the prop named when synth needs the number', () => {
    const stack = testStack();
    const number = (id: string) => new CfnParameter(stack, id, { type: 'Number', default: 100 }).valueAsNumber;
    const query = new SluiceQuery(stack, 'Tokens', { queryModule: live, batchSize: number('BatchSize'), snapshotEveryBatches: number('Snapshots') });
    const template = Template.fromStack(stack);
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { BatchSize: { Ref: 'BatchSize' } });
    expect(stack.resolve(query.environment.SLUICE_STATE_SNAPSHOT_EVERY)).toEqual({ Ref: 'Snapshots' });
    const refused = (props: Partial<SluiceQueryProps>) => {
      try {
        new SluiceQuery(testStack(), 'Query', { queryModule: live, ...props });
      } catch (error) {
        return (error as Error).message;
      }
      throw new Error('expected the construct to refuse these props');
    };
    const other = testStack();
    expect(refused({ shardCount: new CfnParameter(other, 'Shards', { type: 'Number' }).valueAsNumber }))
      .toMatch(/^SluiceQuery Test\/Query: shardCount is a deploy-time value \(token \$\{Token\[.*Shards.*\]\}\), but it must be known at synth time: .*Give a positive integer/);
    expect(refused({ memorySize: new CfnParameter(other, 'Memory', { type: 'Number' }).valueAsNumber }))
      .toMatch(/memorySize is a deploy-time value .* it sizes V8's young generation/);
    expect(refused({ batchSize: 20_000 })).toContain('batchSize must be an integer from 1 to 10000, got 20000.');
  });

  it('Duration props given as deploy-time tokens: refused with the prop named where synth converts them, passed through where CDK takes a token', () => {
    const minutes = (stack: Stack, id: string) => Duration.minutes(new CfnParameter(stack, id, { type: 'Number' }).valueAsNumber);
    const refused = (props: (stack: Stack) => Partial<SluiceQueryProps>): string => {
      const stack = testStack();
      try {
        new SluiceQuery(stack, 'Query', { queryModule: live, ...props(stack) });
      } catch (error) {
        return (error as Error).message;
      }
      throw new Error('expected the construct to refuse these props');
    };
    expect(refused((s) => ({ idleShardTimeout: minutes(s, 'Idle') })))
      .toMatch(/^SluiceQuery Test\/Query: idleShardTimeout is a deploy-time value \(.*\), but it must be known at synth time: the scheduled handler gets it in milliseconds\./);
    expect(refused((s) => ({ iteratorAgeAlarmThreshold: minutes(s, 'Age') }))).toMatch(/iteratorAgeAlarmThreshold is a deploy-time value/);
    expect(refused((s) => ({ streamRetention: Duration.hours(new CfnParameter(s, 'Retention', { type: 'Number' }).valueAsNumber) })))
      .toMatch(/streamRetention is a deploy-time value .*give maxRecordAge too/);
    // With maxRecordAge given, the retention is only the stream's setting: CloudFormation takes the token.
    const stack = testStack();
    new SluiceQuery(stack, 'Query', {
      queryModule: live, maxRecordAge: Duration.hours(1), streamRetention: Duration.hours(new CfnParameter(stack, 'Retention', { type: 'Number' }).valueAsNumber),
    });
    Template.fromStack(stack).hasResourceProperties('AWS::Kinesis::Stream', { RetentionPeriodHours: { Ref: 'Retention' } });
  });

  it('projectRoot and depsLockFilePath: found above the query module by default, overridable, checked', () => {
    const query = new SluiceQuery(testStack(), 'Found', { queryModule: live });
    expect(query.project).toEqual({ projectRoot: PROJECT_ROOT, depsLockFilePath: join(PROJECT_ROOT, 'package-lock.json') });
    const given = new SluiceQuery(testStack(), 'Given', { queryModule: live, depsLockFilePath: join(PROJECT_ROOT, 'package-lock.json') });
    expect(given.project.projectRoot).toBe(PROJECT_ROOT);
    expect(synthError({ queryModule: live, depsLockFilePath: join(PROJECT_ROOT, 'missing.lock') }).message)
      .toMatch(/^SluiceQuery Test\/Query: depsLockFilePath .*missing\.lock does not exist/);
    expect(synthError({ queryModule: live, projectRoot: join(PROJECT_ROOT, 'lib') }).message)
      .toMatch(/queryModule .*hourly-sales-live\.ts is not under projectRoot .*\/lib/);
    // A lockfile above the given root is not the project's: NodejsFunction bundles from the root.
    expect(synthError({ queryModule: live, projectRoot: join(PROJECT_ROOT, 'examples') }).message)
      .toMatch(/^SluiceQuery Test\/Query: no lockfile \(package-lock\.json, .*\) in projectRoot .*\/examples\. .*set depsLockFilePath/);
    expect(synthError({ queryModule: live, projectRoot: join(PROJECT_ROOT, 'lib'), depsLockFilePath: join(PROJECT_ROOT, 'package-lock.json') }).message)
      .toMatch(/depsLockFilePath .*package-lock\.json is not under projectRoot .*\/lib/);
  });
});
