/**
 * The example stack (seed 003 written three ways on one stream, and per product through a
 * repartition stage) and the bundles: the generated entries bundle with the local esbuild into
 * handlers that load and answer.
 */
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { handlerEntrySource } from '../../cdk/generated-entry.js';
import { SluiceExampleStack } from '../../cdk/sluice-example-stack.js';
import { SluiceQuery } from '../../cdk/sluice-query.js';
import { RUNTIME_ENV } from '../../lib/runtime/runtime-config.js';
import { acknowledgments, appOutdir, appOutdirInProject, appWithoutBundling, example, nagViolations, testStack } from './support.js';

type Resource = { Properties: Record<string, any> };

describe('SluiceExampleStack: hourly sales per store three ways and per product, one stream', () => {
  let app: App;
  let stack: SluiceExampleStack;
  let template: Template;

  beforeAll(() => {
    app = appWithoutBundling();
    stack = new SluiceExampleStack(app, 'SluiceExampleStack', { env: { account: '123456789012', region: 'eu-west-1' } });
    template = Template.fromStack(stack);
  });

  it('shares one two-shard stream among four event source mappings; the per-product query adds an internal stream', () => {
    template.resourceCountIs('AWS::Kinesis::Stream', 2);
    const arnOf = (stream: { node: { defaultChild?: unknown } }) => ({ 'Fn::GetAtt': [stack.getLogicalId(stream.node.defaultChild as never), 'Arn'] });
    // Kinesis mappings only: each query's on-failure function also has one on its queue.
    const mappings = (Object.values(template.findResources('AWS::Lambda::EventSourceMapping')) as Resource[])
      .filter((m) => /stream/i.test(JSON.stringify(m.Properties.EventSourceArn)));
    expect(mappings).toHaveLength(5);
    const on = (stream: { node: { defaultChild?: unknown } }) => mappings.filter((m) => JSON.stringify(m.Properties.EventSourceArn) === JSON.stringify(arnOf(stream)));
    expect(on(stack.salesStream)).toHaveLength(4);
    for (const q of [stack.archive, stack.live, stack.snapshot, stack.perProduct]) expect(q.expectedShardCount).toBe(2);

    // Per store: co-partitioned with the stream (store_id), one stage. Per product: two stages.
    expect([stack.archive, stack.live, stack.snapshot].map((q) => q.needsRepartition)).toEqual([false, false, false]);
    expect(stack.perProduct.needsRepartition).toBe(true);
    const internal = stack.perProduct.repartitionStream!;
    template.hasResourceProperties('AWS::Kinesis::Stream', { ShardCount: 2, RetentionPeriodHours: 24 });
    expect(on(internal).map((m) => m.Properties.FunctionName)).toEqual([{ Ref: stack.getLogicalId(stack.perProduct.repartitionFunction!.node.defaultChild as never) }]);
  });

  it('expires each query\'s dead letters after 30 days in the shared dead-letter bucket', () => {
    const bucket = template.findResources('AWS::S3::Bucket')[stack.getLogicalId(stack.deadLetterBucket.node.defaultChild as never)] as Resource;
    expect(bucket.Properties.LifecycleConfiguration.Rules).toEqual([stack.archive, stack.live, stack.snapshot, stack.perProduct].map((q) => ({
      Id: `ExpireDeadLetters-${q.queryName}`, Prefix: `dead-letter/${q.queryName}/`, ExpirationInDays: 30, Status: 'Enabled',
    })));
  });

  it('deploys append → S3 files, update → DynamoDB, complete → S3 snapshot, and per product update → DynamoDB', () => {
    expect([stack.archive, stack.live, stack.snapshot, stack.perProduct].map((q) => [q.queryName, q.definition.outputMode, q.definition.sink.kind])).toEqual([
      ['hourly-sales-archive', 'append', 's3-files'],
      ['hourly-sales-live', 'update', 'dynamodb'],
      ['hourly-sales-snapshot', 'complete', 's3-snapshot'],
      ['hourly-sales-per-product', 'update', 'dynamodb'],
    ]);
    // Two state tables per query and the two update queries' sink tables; the results and dead-letter buckets are shared.
    template.resourceCountIs('AWS::DynamoDB::Table', 10);
    template.resourceCountIs('AWS::S3::Bucket', 2);
    expect(stack.archive.sinkBucket).toBe(stack.resultsBucket);
    expect(stack.snapshot.sinkBucket).toBe(stack.resultsBucket);
    expect([stack.archive.sinkPrefix, stack.snapshot.sinkPrefix]).toEqual(['hourly-sales/archive/', 'hourly-sales/snapshot/']);
    // Three functions per query (Kinesis trigger, scheduled, on-failure), and the per-product query's stage-2 function.
    template.resourceCountIs('AWS::Lambda::Function', 13);
    template.resourceCountIs('AWS::Events::Rule', 4);
    template.resourceCountIs('AWS::SQS::Queue', 4);
    template.resourceCountIs('AWS::CloudWatch::Alarm', 4 * 7 + 2);
    for (const output of [
      'SalesStreamName', 'ResultsBucketName', 'DeadLetterBucketName', 'LiveTableName', 'LiveScheduledFunctionName', 'LiveOnFailureQueueUrl',
      'PerProductTableName', 'PerProductRepartitionStreamName', 'PerProductScheduledFunctionName', 'PerProductOnFailureQueueUrl',
    ]) {
      template.hasOutput(output, {});
    }
  });

  it('passes cdk-nag AwsSolutions with every acknowledgment carrying a written reason', () => {
    expect(nagViolations(app)).toEqual([]);
    const acks = acknowledgments(app);
    expect(acks.length).toBeGreaterThan(0);
    for (const a of acks) expect(a.reason.trim().length, `${a.path} ${a.id}`).toBeGreaterThan(40);
    const rules = [...new Set(acks.map((a) => a.id.replace(/^Annotation::/, '').replace(/\[.*$/, '')))].sort();
    expect(rules).toEqual(['AwsSolutions-IAM5', 'AwsSolutions-L1', 'AwsSolutions-S1', 'AwsSolutions-SQS3']);
  });
});

describe('the generated entries and their bundles', () => {
  it('an entry imports the query module and the factory and exports handler', () => {
    const source = handlerEntrySource('kinesis', example('hourly-sales-live.ts'));
    expect(source).toContain(`import query from ${JSON.stringify(example('hourly-sales-live.ts'))};`);
    // The factory comes from the package, resolved from the user's project like the module's own imports.
    expect(source).toContain("import { createKinesisTriggerHandler } from 'sluice/lambda';");
    expect(source).toContain('export const handler = createKinesisTriggerHandler(query);');
    expect(handlerEntrySource('scheduled', example('hourly-sales-live.ts'))).toContain('export const handler = createScheduledTriggerHandler(query);');
    const repartition = handlerEntrySource('repartition', example('hourly-sales-per-product.ts'));
    expect(repartition).toContain("import { createRepartitionTriggerHandler } from 'sluice/lambda';");
    expect(repartition).toContain('export const handler = createRepartitionTriggerHandler(query);');
  });

  // One query with a repartition stage has all three entry kinds (the Kinesis entry as stage 1,
  // scheduled, repartition); the entries differ only in the factory they import.
  it('bundles the three functions of a repartitioned query with the local esbuild (minified, source map) into handlers that load and answer', async () => {
    const app = new App({ builtinCloudFormationValidation: false, outdir: appOutdirInProject() });
    const stack = testStack(app);
    const query = new SluiceQuery(stack, 'PerProduct', { queryModule: example('hourly-sales-per-product.ts'), shardCount: 2 });
    const template = Template.fromStack(stack);
    const assetDir = (fn: SluiceQuery['kinesisTriggerFunction']): string => {
      const resource = template.findResources('AWS::Lambda::Function')[stack.getLogicalId(fn.node.defaultChild as never)] as Resource;
      const key = String(resource.Properties.Code.S3Key);
      return join(app.outdir, `asset.${key.replace(/\.zip$/, '')}`);
    };
    const dirs = query.functions().map(assetDir);
    expect(new Set(dirs).size).toBe(3);
    for (const dir of dirs) {
      expect(existsSync(join(dir, 'index.js')), dir).toBe(true);
      expect(existsSync(join(dir, 'index.js.map'))).toBe(true);
      // Minified: no indentation-heavy source, and far fewer lines than the engine has.
      expect(readFileSync(join(dir, 'index.js'), 'utf8').split('\n').length).toBeLessThan(500);
    }

    // Load the bundles as Lambda would, with the construct's environment (references filled in):
    // each handler validates its query against that environment at load time, so a repartition
    // function whose environment did not announce the internal stream would throw here.
    const saved = { ...process.env };
    try {
      for (const [name, value] of Object.entries(query.environment)) {
        process.env[name] = stack.resolve(value) instanceof Object ? `resolved-${name}` : String(stack.resolve(value));
      }
      process.env.AWS_REGION = 'eu-west-1';
      process.env.POWERTOOLS_METRICS_DISABLED = 'true';
      process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
      expect(process.env[RUNTIME_ENV.expectedShardCount]).toBe('2');
      expect(process.env[RUNTIME_ENV.repartitionStreamName]).toBe(`resolved-${RUNTIME_ENV.repartitionStreamName}`);
      // A Lambda asset is CommonJS (no package.json); here the project's says "module".
      for (const dir of dirs) writeFileSync(join(dir, 'package.json'), '{ "type": "commonjs" }\n');
      const load = createRequire(import.meta.url);
      const [stage1, scheduled, stage2] = dirs.map((dir) => load(join(dir, 'index.js')).handler);
      expect([stage1, scheduled, stage2].map((h) => typeof h)).toEqual(['function', 'function', 'function']);
      // An empty delivery touches no AWS service and fails nothing, on either stream.
      await expect(stage1({ Records: [] })).resolves.toEqual({ batchItemFailures: [] });
      await expect(stage2({ Records: [] })).resolves.toEqual({ batchItemFailures: [] });
    } finally {
      process.env = saved;
    }
  });
});
