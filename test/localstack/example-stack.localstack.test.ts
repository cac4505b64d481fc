/**
 * The example stack as `cdklocal deploy` left it in LocalStack (scripts/localstack/parts.sh deploys
 * it first, with --no-rollback): every resource of the synthesized template is created, or the
 * test names it with LocalStack's reason; the settings that matter are read back through the SDK
 * for what was created (a type with nothing created is skipped, saying why); and one query runs
 * end to end against the deployed stream, tables and buckets, its Kinesis-trigger handler
 * in-process under Sluice's local event source mapping (LocalStack runs Lambda code only in Docker).
 *
 * Without Docker, LocalStack cannot create a Lambda function: CreateFunction is accepted, but the
 * version's preparation installs the runtime-init binary (downloaded from GitHub) and pulls the
 * runtime's Docker image, the function goes to Failed, and CloudFormation stops at the first one.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { CloudWatchClient, DescribeAlarmsCommand } from '@aws-sdk/client-cloudwatch';
import { DescribeTableCommand, DescribeContinuousBackupsCommand } from '@aws-sdk/client-dynamodb';
import { DescribeRuleCommand, EventBridgeClient, ListTargetsByRuleCommand } from '@aws-sdk/client-eventbridge';
import { DescribeStreamSummaryCommand } from '@aws-sdk/client-kinesis';
import {
  GetEventSourceMappingCommand, LambdaClient, type EventSourceMappingConfiguration,
} from '@aws-sdk/client-lambda';
import { GetBucketEncryptionCommand, GetBucketPolicyCommand, GetPublicAccessBlockCommand } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { createAwsClients, type AwsClientOptions } from '../../lib/aws/clients.js';
import { createKinesisTriggerHandler } from '../../lib/aws/kinesis-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { createScheduledTriggerHandler } from '../../lib/aws/scheduled-trigger-handler.js';
import { readS3Files } from '../../lib/aws/sink-readers.js';
import { LocalEventSourceMapping } from '../../lib/local/event-source-mapping.js';
import { putRecordsBatched } from '../../lib/local/kinesis-admin.js';
import { readRuntimeConfig, TABLE_KEYS } from '../../lib/runtime/runtime-config.js';
import archiveQuery from '../../examples/hourly-sales-archive.js';
import { logicalIds, outcomeTable, readDeployedStack, type DeployedStack, type ResourceOutcome } from './deployed-stack.js';

const endpoint = process.env.AWS_ENDPOINT_URL;
const repo = fileURLToPath(new URL('../..', import.meta.url));
const region = process.env.AWS_REGION ?? 'us-east-1';
const clientOptions: AwsClientOptions = {
  region, endpoints: { kinesis: endpoint, dynamodb: endpoint, s3: endpoint },
  credentials: { accessKeyId: process.env.AWS_ACCESS_KEY_ID ?? 'test', secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY ?? 'test' },
};
const sdk = { region, endpoint, credentials: clientOptions.credentials };

const aws = createAwsClients(clientOptions);
const cfn = new CloudFormationClient(sdk);
const lambda = new LambdaClient(sdk);
const cloudwatch = new CloudWatchClient(sdk);
const eventbridge = new EventBridgeClient(sdk);
const sqs = new SQSClient(sdk);
let stack: DeployedStack;

/** LocalStack's reason when it cannot prepare a function for running (no Docker, no runtime-init download). */
const LAMBDA_WITHOUT_DOCKER = /lambda-runtime|Docker|docker/;
/**
 * Template properties LocalStack 2026.3.0's CloudFormation creates the resource without (read in its
 * resource providers, localstack/services/<service>/resource_providers). The tests check that the
 * template asks for each and that LocalStack reports it unapplied: a LocalStack that applies one
 * fails the test, and its entry (and docs/localstack.md's) goes.
 */
const LOCALSTACK_CFN_IGNORES = {
  pitr: 'AWS::DynamoDB::Table PointInTimeRecoverySpecification: aws_dynamodb_table.py creates the table, TTL and Kinesis destination, never UpdateContinuousBackups',
  streamEncryption: 'AWS::Kinesis::Stream StreamEncryption: aws_kinesis_stream.py calls CreateStream only, never StartStreamEncryption',
} as const;
const describeOutcome = (o: ResourceOutcome): string => `${o.type} ${o.logicalId}: ${o.status}${o.reason ? `: ${o.reason}` : ''}`;

/** The created resources of a type; none created skips the test with the template's outcomes as the reason. */
function createdOf(ctx: TestContext, type: string, prefix = ''): string[] {
  const ids = logicalIds(stack.template, type, prefix);
  const created = ids.filter((id) => stack.outcomes.some((o) => o.logicalId === id && o.status === 'CREATE_COMPLETE'));
  if (created.length === 0) {
    const why = [...new Set(stack.outcomes.filter((o) => ids.includes(o.logicalId)).map((o) => `${o.status}${o.reason ? `: ${o.reason}` : ''}`))].join('; ');
    ctx.skip(`LocalStack created none of the ${ids.length} ${type} (${why || 'none in the template'})`);
  }
  return created;
}

beforeAll(async () => {
  if (!endpoint) throw new Error('AWS_ENDPOINT_URL is not set: run these tests through npm run test:localstack');
  stack = await readDeployedStack(cfn, `${repo}/cdk.out/SluiceExampleStack.template.json`);
  mkdirSync(`${repo}/.localstack`, { recursive: true });
  writeFileSync(`${repo}/.localstack/deploy-report.md`, `stack ${stack.status}${stack.statusReason ? `: ${stack.statusReason}` : ''}\n\n${outcomeTable(stack.outcomes)}\n`);
});

afterAll(() => {
  for (const c of [cfn, lambda, cloudwatch, eventbridge, sqs]) c.destroy();
  aws.destroy();
});

describe('cdklocal deploy SluiceExampleStack', () => {
  it('creates every resource of the template, or fails only where LocalStack cannot create a function without Docker', () => {
    const notCreated = stack.outcomes.filter((o) => o.status !== 'CREATE_COMPLETE');
    const failed = notCreated.filter((o) => o.status.endsWith('_FAILED'));
    console.log(`cdklocal deploy exited with ${process.env.SLUICE_CDKLOCAL_STATUS}; stack ${stack.status}: `
      + `${stack.outcomes.length - notCreated.length} of ${stack.outcomes.length} resources created\n${outcomeTable(stack.outcomes)}`);
    if (stack.status === 'CREATE_COMPLETE') {
      expect(notCreated).toEqual([]);
      return;
    }
    // Every failure LocalStack gave a reason for is a function it could not prepare; the resources
    // failed without a reason, or never attempted, are the stack stopping there.
    const causes = notCreated.filter((o) => o.status.endsWith('_FAILED') && o.reason);
    expect(causes.length).toBeGreaterThan(0);
    expect(causes.filter((o) => !(o.type === 'AWS::Lambda::Function' && LAMBDA_WITHOUT_DOCKER.test(o.reason!))).map(describeOutcome)).toEqual([]);
  });

  it('tables: checkpoint and state keyed (pk, sk), sinks keyed pk; on demand; point-in-time recovery asked (LocalStack does not apply it)', async (ctx) => {
    expect(logicalIds(stack.template, 'AWS::DynamoDB::Table')).toHaveLength(10);
    for (const id of createdOf(ctx, 'AWS::DynamoDB::Table')) {
      const { Table } = await aws.dynamodb.send(new DescribeTableCommand({ TableName: stack.physicalId(id) }));
      const keys = Object.fromEntries((Table!.KeySchema ?? []).map((k) => [k.KeyType, k.AttributeName]));
      const expected = /SinkTable/.test(id)
        ? { HASH: TABLE_KEYS.sink.partitionKey }
        : { HASH: TABLE_KEYS.state.partitionKey, RANGE: TABLE_KEYS.state.sortKey };
      expect({ id, keys, billing: Table!.BillingModeSummary?.BillingMode }).toEqual({ id, keys: expected, billing: 'PAY_PER_REQUEST' });
      const asked = (stack.template[id]!.Properties as { PointInTimeRecoverySpecification?: { PointInTimeRecoveryEnabled?: boolean } })
        .PointInTimeRecoverySpecification?.PointInTimeRecoveryEnabled;
      expect({ id, asked }).toEqual({ id, asked: true });
      const backups = await aws.dynamodb.send(new DescribeContinuousBackupsCommand({ TableName: stack.physicalId(id) }));
      // AWS: ENABLED. LocalStack: DISABLED (LOCALSTACK_CFN_IGNORES.pitr).
      expect({ id, pitr: backups.ContinuousBackupsDescription?.PointInTimeRecoveryDescription?.PointInTimeRecoveryStatus }, LOCALSTACK_CFN_IGNORES.pitr)
        .toEqual({ id, pitr: 'DISABLED' });
    }
  });

  it('streams: the sales stream with two shards, the internal stream of the repartition stage, 24 h; KMS asked (LocalStack does not apply it)', async (ctx) => {
    expect(logicalIds(stack.template, 'AWS::Kinesis::Stream')).toHaveLength(2);
    const streams = createdOf(ctx, 'AWS::Kinesis::Stream');
    const byName = new Map<string, { shards: number; retention: number; encryption: string }>();
    for (const id of streams) {
      const { StreamDescriptionSummary: s } = await aws.kinesis.send(new DescribeStreamSummaryCommand({ StreamName: stack.physicalId(id) }));
      byName.set(s!.StreamName!, { shards: s!.OpenShardCount!, retention: s!.RetentionPeriodHours!, encryption: s!.EncryptionType! });
    }
    // Outputs exist only when the stack completed: name the streams by their logical ids.
    const described = (prefix: string) => byName.get(streams.filter((id) => id.startsWith(prefix)).map((id) => stack.physicalId(id))[0] ?? '');
    for (const id of streams) {
      const asked = (stack.template[id]!.Properties as { StreamEncryption?: { EncryptionType?: string } }).StreamEncryption?.EncryptionType;
      expect({ id, asked }).toEqual({ id, asked: 'KMS' });
    }
    // AWS: encryption KMS. LocalStack: NONE (LOCALSTACK_CFN_IGNORES.streamEncryption).
    expect(described('SalesStream'), LOCALSTACK_CFN_IGNORES.streamEncryption).toEqual({ shards: 2, retention: 24, encryption: 'NONE' });
    if (streams.some((id) => id.startsWith('HourlySalesPerProductRepartitionStream'))) {
      expect(described('HourlySalesPerProductRepartitionStream'), LOCALSTACK_CFN_IGNORES.streamEncryption).toMatchObject({ shards: 2, retention: 24, encryption: 'NONE' });
    }
  });

  it('buckets: SSE-S3, public access blocked, a policy refusing requests without TLS', async (ctx) => {
    const policies = new Set(createdOf(ctx, 'AWS::S3::BucketPolicy').map((id) => id.replace(/Policy[0-9A-F]{8}$/, '')));
    for (const id of createdOf(ctx, 'AWS::S3::Bucket')) {
      const Bucket = stack.physicalId(id);
      const encryption = await aws.s3.send(new GetBucketEncryptionCommand({ Bucket }));
      expect(encryption.ServerSideEncryptionConfiguration?.Rules?.[0]?.ApplyServerSideEncryptionByDefault?.SSEAlgorithm).toBe('AES256');
      const block = await aws.s3.send(new GetPublicAccessBlockCommand({ Bucket }));
      expect(block.PublicAccessBlockConfiguration).toEqual({
        BlockPublicAcls: true, BlockPublicPolicy: true, IgnorePublicAcls: true, RestrictPublicBuckets: true,
      });
      if (!policies.has(id.replace(/[0-9A-F]{8}$/, ''))) continue; // its policy was not reached (first test)
      const { Policy } = await aws.s3.send(new GetBucketPolicyCommand({ Bucket }));
      const statements = (JSON.parse(Policy!) as { Statement: { Effect: string; Condition?: unknown }[] }).Statement;
      expect(statements).toContainEqual(expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }));
    }
  });

  it('event source mappings: TRIM_HORIZON, bisect on error, batch item failures, one batch per shard, on-failure queue', async (ctx) => {
    // Kinesis mappings: four on the sales stream, one on the internal one (each query's on-failure function also reads its queue).
    const onStream = (id: string) => /stream/i.test(JSON.stringify((stack.template[id]!.Properties as { EventSourceArn?: unknown }).EventSourceArn));
    expect(logicalIds(stack.template, 'AWS::Lambda::EventSourceMapping').filter(onStream)).toHaveLength(5);
    for (const id of createdOf(ctx, 'AWS::Lambda::EventSourceMapping').filter(onStream)) {
      const m: EventSourceMappingConfiguration = await lambda.send(new GetEventSourceMappingCommand({ UUID: stack.physicalId(id) }));
      expect({
        id, batchSize: m.BatchSize, window: m.MaximumBatchingWindowInSeconds, start: m.StartingPosition, bisect: m.BisectBatchOnFunctionError,
        retries: m.MaximumRetryAttempts, parallelization: m.ParallelizationFactor, responses: m.FunctionResponseTypes,
      }).toEqual({
        id, batchSize: 100, window: 1, start: 'TRIM_HORIZON', bisect: true, retries: -1, parallelization: 1, responses: ['ReportBatchItemFailures'],
      });
      const queueArn = m.DestinationConfig?.OnFailure?.Destination;
      expect(queueArn).toMatch(/^arn:aws:sqs:/);
      const queueUrl = `${endpoint}/000000000000/${queueArn!.split(':').pop()}`;
      const queue = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }));
      expect(queue.Attributes?.QueueArn).toBe(queueArn);
    }
  });

  it('schedule rules: every minute, the scheduled function as target with {"mode":"tick"}, no retries', async (ctx) => {
    expect(logicalIds(stack.template, 'AWS::Events::Rule')).toHaveLength(4);
    for (const id of createdOf(ctx, 'AWS::Events::Rule')) {
      const name = stack.physicalId(id);
      const rule = await eventbridge.send(new DescribeRuleCommand({ Name: name }));
      expect({ id, schedule: rule.ScheduleExpression, state: rule.State }).toEqual({ id, schedule: 'rate(1 minute)', state: 'ENABLED' });
      const { Targets } = await eventbridge.send(new ListTargetsByRuleCommand({ Rule: name }));
      expect(Targets).toHaveLength(1);
      expect({ id, input: JSON.parse(Targets![0]!.Input!), retries: Targets![0]!.RetryPolicy?.MaximumRetryAttempts })
        .toEqual({ id, input: { mode: 'tick' }, retries: 0 });
    }
  });

  it('alarms: each alarm created exists with its metric, threshold and comparison', async (ctx) => {
    expect(logicalIds(stack.template, 'AWS::CloudWatch::Alarm').length).toBeGreaterThanOrEqual(4 * 7);
    const ids = createdOf(ctx, 'AWS::CloudWatch::Alarm');
    const names = ids.map((id) => stack.physicalId(id));
    const found = new Map<string, { metric?: string; threshold?: number; comparison?: string }>();
    let next: string | undefined;
    do {
      const page = await cloudwatch.send(new DescribeAlarmsCommand({ NextToken: next }));
      for (const a of page.MetricAlarms ?? []) {
        found.set(a.AlarmName!, { metric: a.MetricName ?? a.Metrics?.map((m) => m.MetricStat?.Metric?.MetricName ?? m.Expression).join(','), threshold: a.Threshold, comparison: a.ComparisonOperator });
      }
      next = page.NextToken;
    } while (next);
    for (const [i, id] of ids.entries()) {
      const props = stack.template[id]!.Properties as { MetricName?: string; Threshold: number; ComparisonOperator: string };
      expect({ id, alarm: found.get(names[i]!) }).toEqual({
        id, alarm: expect.objectContaining({ threshold: props.Threshold, comparison: props.ComparisonOperator, ...(props.MetricName ? { metric: props.MetricName } : {}) }),
      });
    }
  });

  it('queues: the on-failure queues exist', async (ctx) => {
    for (const id of createdOf(ctx, 'AWS::SQS::Queue')) {
      const queue = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: stack.physicalId(id), AttributeNames: ['QueueArn'] }));
      expect(queue.Attributes?.QueueArn).toMatch(/^arn:aws:sqs:/);
    }
  });

  it('drives hourly-sales-archive end to end: the deployed stream, tables and buckets, its handler in-process', async () => {
    const functionId = logicalIds(stack.template, 'AWS::Lambda::Function', 'HourlySalesArchiveKinesisTrigger')[0]!;
    // The function's environment as the template gives it, each reference resolved to the resource
    // LocalStack created (the function itself is not, without Docker: see the first test).
    const variables = (stack.template[functionId]!.Properties as { Environment: { Variables: Record<string, unknown> } }).Environment.Variables;
    const env = Object.fromEntries(Object.entries(variables).map(([k, v]) => [k, typeof v === 'string' ? v : stack.physicalId((v as { Ref: string }).Ref)]));
    const config = readRuntimeConfig(env);
    const mapping = stack.template[logicalIds(stack.template, 'AWS::Lambda::EventSourceMapping', 'HourlySalesArchiveKinesisTrigger')[0]!]!
      .Properties as { BatchSize: number; MaximumBatchingWindowInSeconds: number; StartingPosition: 'TRIM_HORIZON'; BisectBatchOnFunctionError: boolean };

    const events = [
      { store_id: 'north', amount: 15, ts: '2024-05-01T14:40:00Z' },
      { store_id: 'north', amount: 5, ts: '2024-05-01T14:50:00Z' },
      { store_id: 'south', amount: 7.5, ts: '2024-05-01T14:10:00Z' },
      { store_id: 'south', amount: 1, ts: '2024-05-01T15:20:00Z' },
      { store_id: 'north', amount: 2, ts: '2024-05-01T15:25:00Z' },
    ];
    const handler = createKinesisTriggerHandler(archiveQuery, { config, clientOptions, observability: createQuietObservability(archiveQuery.name) });
    const esm = new LocalEventSourceMapping({
      kinesis: aws.kinesis, streamName: config.streamName, handler,
      batchSize: mapping.BatchSize, maximumBatchingWindowMs: mapping.MaximumBatchingWindowInSeconds * 1000,
      startingPosition: mapping.StartingPosition, bisectBatchOnFunctionError: mapping.BisectBatchOnFunctionError,
      reportBatchItemFailures: true, pollIntervalMs: 50,
    });
    // Two waves: the second batch's watermark (15:25 - 15 min) closes the 14:00 hour.
    await putRecordsBatched(aws.kinesis, config.streamName, events.slice(0, 3).map((e) => ({ data: JSON.stringify(e), partitionKey: e.store_id })));
    await esm.drain({ idleMs: 1_500 });
    await putRecordsBatched(aws.kinesis, config.streamName, events.slice(3).map((e) => ({ data: JSON.stringify(e), partitionKey: e.store_id })));
    await esm.drain({ idleMs: 1_500 });
    await esm.stop();
    // The schedule rule's tick (the function EventBridge would invoke): a no-data batch per shard
    // applies the advanced watermark, as Spark does, and closes the 14:00 hour.
    const scheduled = createScheduledTriggerHandler(archiveQuery, { config, clients: aws, observability: createQuietObservability(archiveQuery.name), now: () => Date.now() });
    await scheduled({ mode: 'tick' });

    const rows = (await readS3Files(aws.s3, config.sinkBucket!, config.sinkPrefix))
      .map((r) => ({ store: r.store_id, sales: r.sales, orders: r.orders }))
      .sort((a, b) => String(a.store).localeCompare(String(b.store)));
    expect(rows).toEqual([{ store: 'north', sales: 20, orders: 2 }, { store: 'south', sales: 7.5, orders: 1 }]);
  });
});
