/**
 * The example stack as `cdklocal deploy` left it in LocalStack (scripts/localstack/parts.sh deploys
 * it first): every resource of the synthesized template is created, or the test names it with
 * LocalStack's reason; the settings that matter are read back through the SDK; and one query runs
 * end to end against the deployed stream and tables, its Kinesis-trigger handler in-process under
 * Sluice's local event source mapping (LocalStack runs Lambda code only in Docker).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { CloudWatchClient, DescribeAlarmsCommand } from '@aws-sdk/client-cloudwatch';
import { DescribeTableCommand, DescribeContinuousBackupsCommand } from '@aws-sdk/client-dynamodb';
import { DescribeRuleCommand, EventBridgeClient, ListTargetsByRuleCommand } from '@aws-sdk/client-eventbridge';
import { DescribeStreamSummaryCommand } from '@aws-sdk/client-kinesis';
import {
  GetEventSourceMappingCommand, GetFunctionConfigurationCommand, LambdaClient, type EventSourceMappingConfiguration,
} from '@aws-sdk/client-lambda';
import { GetBucketEncryptionCommand, GetBucketPolicyCommand, GetPublicAccessBlockCommand } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { createAwsClients, type AwsClientOptions } from '../../lib/aws/clients.js';
import { createKinesisTriggerHandler } from '../../lib/aws/kinesis-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { LocalEventSourceMapping } from '../../lib/local/event-source-mapping.js';
import { putRecordsBatched } from '../../lib/local/kinesis-admin.js';
import { readRuntimeConfig, TABLE_KEYS } from '../../lib/runtime/runtime-config.js';
import liveQuery from '../../examples/hourly-sales-live.js';
import { logicalIds, outcomeTable, readDeployedStack, type DeployedStack } from './deployed-stack.js';

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
  it('creates every resource of the template (else names each one with LocalStack\'s reason)', () => {
    const notCreated = stack.outcomes.filter((o) => o.status !== 'CREATE_COMPLETE')
      .map((o) => `${o.logicalId} (${o.type}): ${o.status}${o.reason ? `: ${o.reason}` : ''}`);
    expect({ cdklocalExit: process.env.SLUICE_CDKLOCAL_STATUS, stack: stack.status, notCreated })
      .toEqual({ cdklocalExit: '0', stack: 'CREATE_COMPLETE', notCreated: [] });
  });

  it('tables: checkpoint and state keyed (pk, sk), sinks keyed pk; on demand, point-in-time recovery on', async () => {
    const tables = logicalIds(stack.template, 'AWS::DynamoDB::Table');
    expect(tables.length).toBeGreaterThanOrEqual(10);
    for (const id of tables) {
      const { Table } = await aws.dynamodb.send(new DescribeTableCommand({ TableName: stack.physicalId(id) }));
      const keys = Object.fromEntries((Table!.KeySchema ?? []).map((k) => [k.KeyType, k.AttributeName]));
      const expected = /SinkTable/.test(id)
        ? { HASH: TABLE_KEYS.sink.partitionKey }
        : { HASH: TABLE_KEYS.state.partitionKey, RANGE: TABLE_KEYS.state.sortKey };
      expect({ id, keys, billing: Table!.BillingModeSummary?.BillingMode }).toEqual({ id, keys: expected, billing: 'PAY_PER_REQUEST' });
      const backups = await aws.dynamodb.send(new DescribeContinuousBackupsCommand({ TableName: stack.physicalId(id) }));
      expect({ id, pitr: backups.ContinuousBackupsDescription?.PointInTimeRecoveryDescription?.PointInTimeRecoveryStatus })
        .toEqual({ id, pitr: 'ENABLED' });
    }
  });

  it('streams: the sales stream with two shards, the internal stream of the repartition stage, 24 h, KMS', async () => {
    const streams = logicalIds(stack.template, 'AWS::Kinesis::Stream');
    expect(streams.length).toBe(2);
    const byName = new Map<string, { shards: number; retention: number; encryption: string }>();
    for (const id of streams) {
      const { StreamDescriptionSummary: s } = await aws.kinesis.send(new DescribeStreamSummaryCommand({ StreamName: stack.physicalId(id) }));
      byName.set(s!.StreamName!, { shards: s!.OpenShardCount!, retention: s!.RetentionPeriodHours!, encryption: s!.EncryptionType! });
    }
    expect(byName.get(stack.outputs.SalesStreamName!)).toEqual({ shards: 2, retention: 24, encryption: 'KMS' });
    expect(byName.get(stack.outputs.PerProductRepartitionStreamName!)).toMatchObject({ shards: 2, encryption: 'KMS' });
  });

  it('buckets: SSE-S3, public access blocked, a policy refusing requests without TLS', async () => {
    const buckets = logicalIds(stack.template, 'AWS::S3::Bucket');
    expect(buckets.length).toBeGreaterThanOrEqual(2);
    for (const id of buckets) {
      const Bucket = stack.physicalId(id);
      const encryption = await aws.s3.send(new GetBucketEncryptionCommand({ Bucket }));
      expect(encryption.ServerSideEncryptionConfiguration?.Rules?.[0]?.ApplyServerSideEncryptionByDefault?.SSEAlgorithm).toBe('AES256');
      const block = await aws.s3.send(new GetPublicAccessBlockCommand({ Bucket }));
      expect(block.PublicAccessBlockConfiguration).toEqual({
        BlockPublicAcls: true, BlockPublicPolicy: true, IgnorePublicAcls: true, RestrictPublicBuckets: true,
      });
      const { Policy } = await aws.s3.send(new GetBucketPolicyCommand({ Bucket }));
      const statements = (JSON.parse(Policy!) as { Statement: { Effect: string; Condition?: unknown }[] }).Statement;
      expect(statements).toContainEqual(expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }));
    }
  });

  it('event source mappings: TRIM_HORIZON, bisect on error, batch item failures, one batch per shard, on-failure queue', async () => {
    const ids = logicalIds(stack.template, 'AWS::Lambda::EventSourceMapping');
    expect(ids.length).toBe(5); // four queries on the sales stream, one on the internal stream
    for (const id of ids) {
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

  it('schedule rules: every minute, the scheduled function as target with {"mode":"tick"}, no retries', async () => {
    const ids = logicalIds(stack.template, 'AWS::Events::Rule');
    expect(ids.length).toBe(4);
    for (const id of ids) {
      const name = stack.physicalId(id);
      const rule = await eventbridge.send(new DescribeRuleCommand({ Name: name }));
      expect({ id, schedule: rule.ScheduleExpression, state: rule.State }).toEqual({ id, schedule: 'rate(1 minute)', state: 'ENABLED' });
      const { Targets } = await eventbridge.send(new ListTargetsByRuleCommand({ Rule: name }));
      expect(Targets).toHaveLength(1);
      expect({ id, input: JSON.parse(Targets![0]!.Input!), retries: Targets![0]!.RetryPolicy?.MaximumRetryAttempts })
        .toEqual({ id, input: { mode: 'tick' }, retries: 0 });
    }
  });

  it('alarms: each alarm of the template exists with its metric, threshold and comparison', async () => {
    const ids = logicalIds(stack.template, 'AWS::CloudWatch::Alarm');
    expect(ids.length).toBeGreaterThanOrEqual(4 * 7);
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

  it('drives hourly-sales-live end to end: the deployed stream and tables, its handler in-process', async () => {
    const functionId = logicalIds(stack.template, 'AWS::Lambda::Function', 'HourlySalesLiveKinesisTrigger')[0]!;
    const mappingId = logicalIds(stack.template, 'AWS::Lambda::EventSourceMapping', 'HourlySalesLiveKinesisTrigger')[0]!;
    // The function's own environment, as LocalStack stored it, is the handler's configuration.
    const fn = await lambda.send(new GetFunctionConfigurationCommand({ FunctionName: stack.physicalId(functionId) }));
    const config = readRuntimeConfig(fn.Environment!.Variables!);
    expect(config.streamName).toBe(stack.outputs.SalesStreamName);
    expect(config.sinkTable).toBe(stack.outputs.LiveTableName);
    const mapping = await lambda.send(new GetEventSourceMappingCommand({ UUID: stack.physicalId(mappingId) }));

    const events = [
      { store_id: 'north', amount: 15, ts: '2024-05-01T14:40:00Z' },
      { store_id: 'north', amount: 5, ts: '2024-05-01T14:50:00Z' },
      { store_id: 'south', amount: 7.5, ts: '2024-05-01T14:10:00Z' },
      { store_id: 'north', amount: 2, ts: '2024-05-01T15:05:00Z' },
    ];
    await putRecordsBatched(aws.kinesis, config.streamName, events.map((e) => ({ data: JSON.stringify(e), partitionKey: e.store_id })));
    const esm = new LocalEventSourceMapping({
      kinesis: aws.kinesis, streamName: config.streamName,
      handler: createKinesisTriggerHandler(liveQuery, { config, clientOptions, observability: createQuietObservability(liveQuery.name) }),
      batchSize: mapping.BatchSize, maximumBatchingWindowMs: (mapping.MaximumBatchingWindowInSeconds ?? 0) * 1000,
      startingPosition: mapping.StartingPosition as 'TRIM_HORIZON', bisectBatchOnFunctionError: mapping.BisectBatchOnFunctionError,
      reportBatchItemFailures: true, pollIntervalMs: 50,
    });
    await esm.drain({ idleMs: 1_500 });
    await esm.stop();

    const rows = (await scanDynamoDbSink(aws.dynamodb, config.sinkTable!))
      .map((r) => ({ store: r.store_id, start: (r.window as { start: unknown }).start, sales: r.sales, orders: r.orders }));
    const micros = (iso: string): number => Date.parse(iso) * 1000;
    expect(rows.sort((a, b) => `${String(a.store)}${String(a.start)}`.localeCompare(`${String(b.store)}${String(b.start)}`))).toEqual([
      { store: 'north', start: micros('2024-05-01T14:00:00Z'), sales: 20, orders: 2 },
      { store: 'north', start: micros('2024-05-01T15:00:00Z'), sales: 2, orders: 1 },
      { store: 'south', start: micros('2024-05-01T14:00:00Z'), sales: 7.5, orders: 1 },
    ]);
  });
});
