/**
 * The example stack (seed 003 written three ways on one stream) and the bundles: the generated
 * entries bundle with the local esbuild into handlers that load and answer.
 */
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { handlerEntrySource } from '../../cdk/generated-entry.js';
import { SluiceExampleStack } from '../../cdk/sluice-example-stack.js';
import { StreamingQuery } from '../../cdk/streaming-query.js';
import { RUNTIME_ENV } from '../../lib/runtime/runtime-config.js';
import { acknowledgments, appWithoutBundling, example, nagViolations, testStack } from './support.js';

type Resource = { Properties: Record<string, any> };

describe('SluiceExampleStack: hourly sales per store, three ways, one stream', () => {
  let app: App;
  let stack: SluiceExampleStack;
  let template: Template;

  beforeAll(() => {
    app = appWithoutBundling();
    stack = new SluiceExampleStack(app, 'SluiceExampleStack', { env: { account: '123456789012', region: 'eu-west-1' } });
    template = Template.fromStack(stack);
  });

  it('shares one two-shard stream among three event source mappings', () => {
    template.resourceCountIs('AWS::Kinesis::Stream', 1);
    template.hasResourceProperties('AWS::Kinesis::Stream', { ShardCount: 2 });
    const mappings = Object.values(template.findResources('AWS::Lambda::EventSourceMapping')) as Resource[];
    expect(mappings).toHaveLength(3);
    const streamArn = { 'Fn::GetAtt': [stack.getLogicalId(stack.salesStream.node.defaultChild as never), 'Arn'] };
    for (const m of mappings) expect(m.Properties.EventSourceArn).toEqual(streamArn);
    for (const q of [stack.archive, stack.live, stack.snapshot]) expect(q.expectedShardCount).toBe(2);
  });

  it('deploys append → S3 files, update → DynamoDB, complete → S3 snapshot', () => {
    expect([stack.archive, stack.live, stack.snapshot].map((q) => [q.queryName, q.definition.outputMode, q.definition.sink.kind])).toEqual([
      ['hourly-sales-archive', 'append', 's3-files'],
      ['hourly-sales-live', 'update', 'dynamodb'],
      ['hourly-sales-snapshot', 'complete', 's3-snapshot'],
    ]);
    // Two state tables per query and the live query's sink table; the results and dead-letter buckets are shared.
    template.resourceCountIs('AWS::DynamoDB::Table', 7);
    template.resourceCountIs('AWS::S3::Bucket', 2);
    expect(stack.archive.sinkBucket).toBe(stack.resultsBucket);
    expect(stack.snapshot.sinkBucket).toBe(stack.resultsBucket);
    expect([stack.archive.sinkPrefix, stack.snapshot.sinkPrefix]).toEqual(['hourly-sales/archive/', 'hourly-sales/snapshot/']);
    template.resourceCountIs('AWS::Lambda::Function', 6);
    template.resourceCountIs('AWS::Events::Rule', 3);
    template.resourceCountIs('AWS::SQS::Queue', 3);
    template.resourceCountIs('AWS::CloudWatch::Alarm', 21);
    for (const output of ['SalesStreamName', 'ResultsBucketName', 'DeadLetterBucketName', 'LiveTableName', 'LiveScheduledFunctionName', 'LiveOnFailureQueueUrl']) {
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
    expect(source).toMatch(/import \{ createKinesisTriggerHandler \} from ".*\/functions\/kinesis-trigger\.ts";/);
    expect(source).toContain('export const handler = createKinesisTriggerHandler(query);');
    expect(handlerEntrySource('scheduled', example('hourly-sales-live.ts'))).toContain('export const handler = createScheduledTriggerHandler(query);');
  });

  it('bundles both functions with the local esbuild (minified, source map) into handlers that load and answer', async () => {
    const app = new App({ builtinCloudFormationValidation: false });
    const stack = testStack(app);
    const query = new StreamingQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts') });
    const template = Template.fromStack(stack);
    const assetDir = (fn: StreamingQuery['kinesisTriggerFunction']): string => {
      const resource = template.findResources('AWS::Lambda::Function')[stack.getLogicalId(fn.node.defaultChild as never)] as Resource;
      const key = String(resource.Properties.Code.S3Key);
      return join(app.outdir, `asset.${key.replace(/\.zip$/, '')}`);
    };
    const kinesisDir = assetDir(query.kinesisTriggerFunction);
    const scheduledDir = assetDir(query.scheduledTriggerFunction);
    for (const dir of [kinesisDir, scheduledDir]) {
      expect(existsSync(join(dir, 'index.js')), dir).toBe(true);
      expect(existsSync(join(dir, 'index.js.map'))).toBe(true);
      // Minified: no indentation-heavy source, and far fewer lines than the engine has.
      expect(readFileSync(join(dir, 'index.js'), 'utf8').split('\n').length).toBeLessThan(500);
    }

    // Load the bundles as Lambda would, with the construct's environment (references filled in).
    const saved = { ...process.env };
    try {
      for (const [name, value] of Object.entries(query.environment)) {
        process.env[name] = stack.resolve(value) instanceof Object ? `resolved-${name}` : String(stack.resolve(value));
      }
      process.env.AWS_REGION = 'eu-west-1';
      process.env.POWERTOOLS_METRICS_DISABLED = 'true';
      process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
      expect(process.env[RUNTIME_ENV.expectedShardCount]).toBe('1');
      const load = createRequire(import.meta.url);
      const kinesisHandler = load(join(kinesisDir, 'index.js')).handler;
      const scheduledHandler = load(join(scheduledDir, 'index.js')).handler;
      expect(typeof kinesisHandler).toBe('function');
      expect(typeof scheduledHandler).toBe('function');
      // An empty delivery touches no AWS service and fails nothing.
      await expect(kinesisHandler({ Records: [] })).resolves.toEqual({ batchItemFailures: [] });
    } finally {
      process.env = saved;
    }
  });
});
