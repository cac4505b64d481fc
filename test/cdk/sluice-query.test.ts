/**
 * The SluiceQuery construct's template: what it creates with its defaults, what each knob
 * changes, least-privilege IAM, alarms, and cdk-nag's AwsSolutions pack.
 */
import { Duration, RemovalPolicy, type Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as kinesis from 'aws-cdk-lib/aws-kinesis';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import { beforeAll, describe, expect, it } from 'vitest';
import { SluiceQuery, semiSpaceMb } from '../../cdk/sluice-query.js';
import { CHECKPOINT_TABLE_KEYS, SINK_TABLE_KEYS, STATE_TABLE_KEYS } from '../../lib/aws/tables.js';
import { METRIC, METRICS_NAMESPACE } from '../../lib/runtime/metric-names.js';
import { RUNTIME_ENV, readRuntimeConfig } from '../../lib/runtime/runtime-config.js';
import {
  acknowledgments, asArray, example, nagViolations, policyStatements, statementsOfRole, testStack,
  type PolicyStatementJson,
} from './support.js';

type Resource = { Properties: Record<string, any>; DeletionPolicy?: string };
const only = (resources: Record<string, unknown>): Resource => {
  const values = Object.values(resources);
  expect(values).toHaveLength(1);
  return values[0] as Resource;
};
/** The Kinesis event source mappings (the on-failure function's SQS mapping aside), by id. */
const kinesisMappings = (template: Template): Record<string, Resource> => Object.fromEntries(
  (Object.entries(template.findResources('AWS::Lambda::EventSourceMapping')) as [string, Resource][])
    .filter(([, m]) => /stream/i.test(JSON.stringify(m.Properties.EventSourceArn))),
);
const logicalIdOf = (stack: Stack, construct: { node: { defaultChild?: unknown } }): string =>
  stack.getLogicalId(construct.node.defaultChild as never);

describe('SluiceQuery with its defaults (update mode → DynamoDB sink, created stream)', () => {
  let stack: Stack;
  let query: SluiceQuery;
  let template: Template;

  beforeAll(() => {
    stack = testStack();
    query = new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts') });
    template = Template.fromStack(stack);
  });

  it('creates a provisioned, encrypted one-shard stream with 24 hours of retention', () => {
    template.resourceCountIs('AWS::Kinesis::Stream', 1);
    template.hasResourceProperties('AWS::Kinesis::Stream', {
      ShardCount: 1,
      RetentionPeriodHours: 24,
      StreamModeDetails: { StreamMode: 'PROVISIONED' },
      StreamEncryption: { EncryptionType: 'KMS', KeyId: 'alias/aws/kinesis' },
    });
    expect(query.expectedShardCount).toBe(1);
  });

  it('maps the stream to the Kinesis-trigger function with partial batch responses and the default knobs', () => {
    const esm = only(kinesisMappings(template));
    expect(esm.Properties).toMatchObject({
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BatchSize: 100,
      MaximumBatchingWindowInSeconds: 1,
      BisectBatchOnFunctionError: true,
      ParallelizationFactor: 1,
      StartingPosition: 'TRIM_HORIZON',
      MaximumRetryAttempts: -1,
      // The stream's 24-hour retention minus one hour: given up while still replayable.
      MaximumRecordAgeInSeconds: 23 * 3600,
      FunctionName: { Ref: logicalIdOf(stack, query.kinesisTriggerFunction) },
      EventSourceArn: { 'Fn::GetAtt': [logicalIdOf(stack, query.stream as kinesis.Stream), 'Arn'] },
      DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [logicalIdOf(stack, query.onFailureQueue), 'Arn'] } } },
    });
  });

  it('creates checkpoint and state tables (pk/sk) and a sink table (pk): on-demand, PITR, SSE, retained', () => {
    const tables = Object.entries(template.findResources('AWS::DynamoDB::Table')) as [string, Resource][];
    expect(tables).toHaveLength(3);
    for (const [, table] of tables) {
      expect(table.Properties).toMatchObject({
        BillingMode: 'PAY_PER_REQUEST',
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        SSESpecification: { SSEEnabled: true },
      });
      expect(table.DeletionPolicy).toBe('Retain');
    }
    const keysOf = (construct: { node: { defaultChild?: unknown } }) =>
      tables.find(([id]) => id === logicalIdOf(stack, construct))![1].Properties.KeySchema;
    const withSortKey = (k: { partitionKey: string; sortKey?: string }) => [
      { AttributeName: k.partitionKey, KeyType: 'HASH' },
      ...(k.sortKey ? [{ AttributeName: k.sortKey, KeyType: 'RANGE' }] : []),
    ];
    expect(keysOf(query.checkpointTable)).toEqual(withSortKey(CHECKPOINT_TABLE_KEYS));
    expect(keysOf(query.stateTable)).toEqual(withSortKey(STATE_TABLE_KEYS));
    expect(keysOf(query.sinkTable as never)).toEqual(withSortKey(SINK_TABLE_KEYS));
    expect(query.sinkBucket).toBeUndefined();
  });

  it('runs its three functions (Kinesis trigger, scheduled, on-failure) on Node.js 22, ARM64, 1024 MiB, one minute, with their own log groups (one month)', () => {
    const functions = Object.values(template.findResources('AWS::Lambda::Function')) as Resource[];
    expect(functions).toHaveLength(3);
    for (const fn of functions) {
      expect(fn.Properties).toMatchObject({ Runtime: 'nodejs22.x', Architectures: ['arm64'], MemorySize: 1024, Timeout: 60, Handler: 'index.handler' });
      expect(fn.Properties.LoggingConfig.LogGroup).toBeDefined();
    }
    template.resourceCountIs('AWS::Logs::LogGroup', 3);
    template.allResourcesProperties('AWS::Logs::LogGroup', { RetentionInDays: 30 });
    // The scheduled function's asynchronous invocations are not retried: the next tick is the retry.
    template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
      FunctionName: { Ref: logicalIdOf(stack, query.scheduledTriggerFunction) },
      MaximumRetryAttempts: 0,
    });
  });

  it('gives both functions the runtime configuration the handlers read (RUNTIME_ENV)', () => {
    const functions = Object.values(template.findResources('AWS::Lambda::Function')) as Resource[];
    for (const fn of functions) {
      const variables = fn.Properties.Environment.Variables as Record<string, unknown>;
      expect(variables).toMatchObject({
        [RUNTIME_ENV.checkpointTable]: { Ref: logicalIdOf(stack, query.checkpointTable) },
        [RUNTIME_ENV.stateTable]: { Ref: logicalIdOf(stack, query.stateTable) },
        [RUNTIME_ENV.sinkTable]: { Ref: logicalIdOf(stack, query.sinkTable as never) },
        [RUNTIME_ENV.deadLetterPrefix]: 'dead-letter/',
        [RUNTIME_ENV.streamName]: { Ref: logicalIdOf(stack, query.stream as kinesis.Stream) },
        [RUNTIME_ENV.idleShardTimeoutMs]: '300000',
        [RUNTIME_ENV.expectedShardCount]: '1',
        [RUNTIME_ENV.snapshotEveryBatches]: '20',
        NODE_OPTIONS: '--max-semi-space-size=64',
      });
      expect(variables).not.toHaveProperty(RUNTIME_ENV.sinkBucket);
      // With the references filled in, the runtime accepts the environment as it is.
      const filledIn = Object.fromEntries(Object.entries(variables).map(([k, v]) => [k, typeof v === 'string' ? v : `resolved-${k}`]));
      const config = readRuntimeConfig(filledIn);
      expect(config).toMatchObject({ idleShardTimeoutMs: 300_000, expectedShardCount: 1, snapshotEveryBatches: 20, deadLetterPrefix: 'dead-letter/' });
    }
  });

  it('runs the scheduled function every minute with a tick event', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 minute)',
      State: 'ENABLED',
      Targets: [Match.objectLike({
        Arn: { 'Fn::GetAtt': [logicalIdOf(stack, query.scheduledTriggerFunction), 'Arn'] },
        Input: JSON.stringify({ mode: 'tick' }),
        RetryPolicy: { MaximumRetryAttempts: 0 },
      })],
    });
  });

  it('creates an encrypted, SSL-only on-failure queue and an encrypted dead-letter bucket', () => {
    template.hasResourceProperties('AWS::SQS::Queue', { SqsManagedSseEnabled: true, MessageRetentionPeriod: 14 * 24 * 3600 });
    template.hasResourceProperties('AWS::SQS::QueuePolicy', {
      PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]) },
    });
    template.resourceCountIs('AWS::S3::Bucket', 1);
    template.hasResourceProperties('AWS::S3::Bucket', {
      BucketEncryption: { ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
      PublicAccessBlockConfiguration: { BlockPublicAcls: true, BlockPublicPolicy: true, IgnorePublicAcls: true, RestrictPublicBuckets: true },
      VersioningConfiguration: Match.absent(),
    });
    template.hasResourceProperties('AWS::S3::BucketPolicy', {
      PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]) },
    });
  });

  it('alarms on iterator age, function errors, failed triggers, dead letters, late rows and skipped batches', () => {
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')) as Resource[];
    expect(alarms).toHaveLength(7);
    const byMetric = (name: string) => alarms.filter((a) => a.Properties.MetricName === name);
    expect(byMetric('IteratorAge')[0]!.Properties).toMatchObject({
      Namespace: 'AWS/Lambda', Statistic: 'Maximum', Threshold: 600_000, EvaluationPeriods: 5,
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: logicalIdOf(stack, query.kinesisTriggerFunction) } }],
    });
    expect(byMetric('Errors')).toHaveLength(2);
    for (const metric of [METRIC.deadLetteredRecords, METRIC.rowsDroppedByWatermark, METRIC.failedTriggers]) {
      const [alarm] = byMetric(metric);
      expect(alarm!.Properties).toMatchObject({
        Namespace: METRICS_NAMESPACE, Statistic: 'Sum', Threshold: 1, TreatMissingData: 'notBreaching',
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      });
      expect(alarm!.Properties.Dimensions).toEqual(expect.arrayContaining([
        { Name: 'query', Value: 'hourly-sales-live' }, { Name: 'service', Value: 'sluice' },
      ]));
    }
    // Skipped batches: the on-failure function's invocations plus the messages it could not record yet.
    const skipped = alarms.find((a) => JSON.stringify(a.Properties.Metrics ?? []).includes('ApproximateNumberOfMessagesVisible'))!;
    expect(skipped.Properties.Metrics[0]).toMatchObject({ Expression: 'recorded + waiting' });
    const metricsOf = JSON.stringify(skipped.Properties.Metrics);
    expect(metricsOf).toContain('"Namespace":"AWS/SQS"');
    expect(metricsOf).toContain(`{"Name":"FunctionName","Value":{"Ref":"${logicalIdOf(stack, query.onFailureFunction)}"}}`);
  });

  it('records skipped batches: the on-failure function consumes the queue and may only put items under `<query>#skipped`', () => {
    const mappings = (Object.values(template.findResources('AWS::Lambda::EventSourceMapping')) as Resource[])
      .filter((m) => JSON.stringify(m.Properties.FunctionName) === JSON.stringify({ Ref: logicalIdOf(stack, query.onFailureFunction) }));
    expect(mappings).toHaveLength(1);
    expect(mappings[0]!.Properties).toMatchObject({
      EventSourceArn: { 'Fn::GetAtt': [logicalIdOf(stack, query.onFailureQueue), 'Arn'] }, BatchSize: 10, FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
    // The queue hides a message in flight longer than the function may run.
    template.hasResourceProperties('AWS::SQS::Queue', { VisibilityTimeout: 360 });
    const own = statementsOfRole(template, logicalIdOf(stack, query.onFailureFunction.role as never));
    const onTables = own.filter((st) => JSON.stringify(st.Resource).includes(logicalIdOf(stack, query.checkpointTable))
      || JSON.stringify(st.Resource).includes(logicalIdOf(stack, query.stateTable)));
    expect(onTables).toHaveLength(1);
    expect(onTables[0]).toMatchObject({
      Action: 'dynamodb:PutItem',
      Resource: { 'Fn::GetAtt': [logicalIdOf(stack, query.checkpointTable), 'Arn'] },
      Condition: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': ['hourly-sales-live#skipped'] } },
    });
    expect(JSON.stringify(own)).not.toContain('kinesis:');
    expect(JSON.stringify(own)).not.toContain('s3:');
  });

  it('grants no wildcard resources or actions, no managed policies, and only the data-plane actions it needs', () => {
    const statements = policyStatements(template);
    expect(statements.length).toBeGreaterThan(0);
    for (const s of statements) {
      expect(s.Effect).toBe('Allow');
      expect(asArray(s.Resource)).not.toContain('*');
      for (const action of asArray(s.Action)) expect(action).not.toContain('*');
    }
    const roles = Object.values(template.findResources('AWS::IAM::Role')) as Resource[];
    expect(roles).toHaveLength(3);
    for (const role of roles) expect(role.Properties.ManagedPolicyArns).toBeUndefined();

    const actionsOn = (roleStatements: PolicyStatementJson[], resource: unknown) => roleStatements
      .filter((s) => asArray(s.Resource).some((r) => JSON.stringify(r) === JSON.stringify(resource)))
      .flatMap((s) => asArray(s.Action));
    for (const fn of [query.kinesisTriggerFunction, query.scheduledTriggerFunction]) {
      const roleId = logicalIdOf(stack, fn.role as never);
      const own = statementsOfRole(template, roleId);
      for (const table of [query.checkpointTable, query.stateTable, query.sinkTable as never]) {
        const actions = actionsOn(own, { 'Fn::GetAtt': [logicalIdOf(stack, table), 'Arn'] });
        expect(actions).toEqual(expect.arrayContaining(['dynamodb:PutItem']));
        expect(actions).not.toContain('dynamodb:Scan');
        expect(actions).not.toContain('dynamodb:DeleteTable');
      }
      // Dead letters: PutObject only, under this query's own dead-letter prefix.
      const deadLetterObjects = { 'Fn::Join': ['', [{ 'Fn::GetAtt': [logicalIdOf(stack, query.deadLetterBucket as never), 'Arn'] }, '/dead-letter/hourly-sales-live/*']] };
      expect(actionsOn(own, deadLetterObjects)).toEqual(['s3:PutObject']);
      // Kinesis reads on this stream only (the event source mapping's grant, and the scheduled function's own).
      const streamActions = actionsOn(own, { 'Fn::GetAtt': [logicalIdOf(stack, query.stream as kinesis.Stream), 'Arn'] });
      expect(streamActions).toEqual(expect.arrayContaining(['kinesis:GetRecords', 'kinesis:GetShardIterator', 'kinesis:ListShards']));
      expect(streamActions.filter((a) => !/^kinesis:(Describe|Get|List|SubscribeToShard)/.test(a))).toEqual([]);
    }
    // Only the Kinesis-trigger function's role may send to the on-failure queue (the event source mapping uses it).
    const queueArn = { 'Fn::GetAtt': [logicalIdOf(stack, query.onFailureQueue), 'Arn'] };
    expect(actionsOn(statementsOfRole(template, logicalIdOf(stack, query.kinesisTriggerFunction.role as never)), queueArn)).toContain('sqs:SendMessage');
    expect(actionsOn(statementsOfRole(template, logicalIdOf(stack, query.scheduledTriggerFunction.role as never)), queueArn)).toEqual([]);
  });

  it('passes cdk-nag AwsSolutions, every acknowledgment with a written reason', () => {
    expect(nagViolations(stack)).toEqual([]);
    const acks = acknowledgments(stack).map((a) => ({ ...a, id: a.id.replace(/^Annotation::/, "") }));
    expect(acks.map((a) => a.id).sort()).toEqual([
      'AwsSolutions-IAM5[Resource::<LiveDeadLetterBucket8D3E3A1D.Arn>/dead-letter/hourly-sales-live/*]',
      'AwsSolutions-IAM5[Resource::<LiveDeadLetterBucket8D3E3A1D.Arn>/dead-letter/hourly-sales-live/*]',
      'AwsSolutions-L1',
      'AwsSolutions-L1',
      'AwsSolutions-L1',
      'AwsSolutions-S1',
      'AwsSolutions-SQS3',
    ].map((id) => id.replace('LiveDeadLetterBucket8D3E3A1D', logicalIdOf(stack, query.deadLetterBucket as never))));
    for (const a of acks) expect(a.reason.length).toBeGreaterThan(40);
  });
});

describe('SluiceQuery with an S3 sink (append → S3 files)', () => {
  let stack: Stack;
  let query: SluiceQuery;
  let template: Template;

  beforeAll(() => {
    stack = testStack();
    query = new SluiceQuery(stack, 'Archive', { queryModule: example('hourly-sales-archive.ts') });
    template = Template.fromStack(stack);
  });

  it('creates a sink bucket and passes its name and the query\'s prefix, and no sink table', () => {
    template.resourceCountIs('AWS::S3::Bucket', 2);
    template.resourceCountIs('AWS::DynamoDB::Table', 2);
    expect(query.sinkPrefix).toBe('hourly-sales/archive/');
    const fn = template.findResources('AWS::Lambda::Function')[logicalIdOf(stack, query.kinesisTriggerFunction)] as Resource;
    expect(fn.Properties.Environment.Variables).toMatchObject({
      [RUNTIME_ENV.sinkBucket]: { Ref: logicalIdOf(stack, query.sinkBucket as never) },
      [RUNTIME_ENV.sinkPrefix]: 'hourly-sales/archive/',
    });
    expect(fn.Properties.Environment.Variables).not.toHaveProperty(RUNTIME_ENV.sinkTable);
  });

  it('scopes object access to the sink prefix (read, write, delete) and lists only the sink bucket', () => {
    const bucketArn = { 'Fn::GetAtt': [logicalIdOf(stack, query.sinkBucket as never), 'Arn'] };
    const own = statementsOfRole(template, logicalIdOf(stack, query.kinesisTriggerFunction.role as never));
    const objects = own.filter((s) => JSON.stringify(s.Resource) === JSON.stringify({ 'Fn::Join': ['', [bucketArn, '/hourly-sales/archive/*']] }));
    expect(objects.flatMap((s) => asArray(s.Action)).sort()).toEqual(['s3:DeleteObject', 's3:GetObject', 's3:PutObject']);
    const list = own.filter((s) => asArray(s.Action).includes('s3:ListBucket'));
    expect(list.map((s) => s.Resource)).toEqual([bucketArn]);
    expect(list.map((s) => s.Condition)).toEqual([{ StringLike: { 's3:prefix': ['hourly-sales/archive/*'] } }]);
  });

  it('passes cdk-nag AwsSolutions', () => {
    expect(nagViolations(stack)).toEqual([]);
    expect(acknowledgments(stack).filter((a) => a.id.endsWith('AwsSolutions-S1'))).toHaveLength(2);
  });
});

describe('SluiceQuery knobs', () => {
  it('applies every knob to the event source mapping, functions, schedule, log groups and removal policy', () => {
    const stack = testStack();
    const stream = kinesis.Stream.fromStreamArn(stack, 'Given', 'arn:aws:kinesis:eu-west-1:123456789012:stream/sales');
    const query = new SluiceQuery(stack, 'Live', {
      queryModule: example('hourly-sales-live.ts'),
      stream,
      expectedShardCount: 3,
      streamRetention: Duration.days(7),
      batchSize: 500,
      maxBatchingWindow: Duration.seconds(5),
      startingPosition: lambda.StartingPosition.LATEST,
      retryAttempts: 10,
      bisectBatchOnError: false,
      parallelizationFactor: 1,
      memorySize: 2048,
      timeout: Duration.minutes(2),
      scheduleRate: Duration.minutes(5),
      idleShardTimeout: Duration.minutes(10),
      logRetention: logs.RetentionDays.ONE_WEEK,
      snapshotEveryBatches: 50,
      removalPolicy: RemovalPolicy.DESTROY,
      iteratorAgeAlarmThreshold: Duration.minutes(30),
    });
    const template = Template.fromStack(stack);
    template.resourceCountIs('AWS::Kinesis::Stream', 0);
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: 'arn:aws:kinesis:eu-west-1:123456789012:stream/sales',
      BatchSize: 500,
      MaximumBatchingWindowInSeconds: 5,
      StartingPosition: 'LATEST',
      MaximumRetryAttempts: 10,
      // Seven days of retention minus an hour.
      MaximumRecordAgeInSeconds: 7 * 24 * 3600 - 3600,
      BisectBatchOnFunctionError: false,
      ParallelizationFactor: 1,
    });
    template.allResourcesProperties('AWS::Lambda::Function', {
      MemorySize: 2048,
      Timeout: 120,
      Environment: { Variables: Match.objectLike({
        [RUNTIME_ENV.streamName]: 'sales',
        [RUNTIME_ENV.expectedShardCount]: '3',
        [RUNTIME_ENV.idleShardTimeoutMs]: '600000',
        [RUNTIME_ENV.snapshotEveryBatches]: '50',
      }) },
    });
    template.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(5 minutes)' });
    template.allResourcesProperties('AWS::Logs::LogGroup', { RetentionInDays: 7 });
    template.allResources('AWS::DynamoDB::Table', { DeletionPolicy: 'Delete' });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', { MetricName: 'IteratorAge', Threshold: 1_800_000 });
    expect(query.expectedShardCount).toBe(3);
  });

  it('takes an explicit maxRecordAge, and a shard count for the stream it creates', () => {
    const stack = testStack();
    new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts'), shardCount: 4, maxRecordAge: Duration.hours(2) });
    const template = Template.fromStack(stack);
    template.hasResourceProperties('AWS::Kinesis::Stream', { ShardCount: 4 });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { MaximumRecordAgeInSeconds: 7200 });
    template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ [RUNTIME_ENV.expectedShardCount]: '4' }) },
    });
  });
});

describe('SluiceQuery with a repartition stage (hourly sales per product on a stream partitioned by store)', () => {
  let stack: Stack;
  let query: SluiceQuery;
  let template: Template;
  const idOf = (construct: { node: { defaultChild?: unknown } }) => logicalIdOf(stack, construct);
  const arnOf = (construct: { node: { defaultChild?: unknown } }) => ({ 'Fn::GetAtt': [idOf(construct), 'Arn'] });
  /** The Kinesis actions a function's role has on a stream ARN. */
  const kinesisActions = (fn: SluiceQuery['kinesisTriggerFunction'], streamArn: unknown): string[] =>
    statementsOfRole(template, idOf(fn.role as never))
      .filter((s) => asArray(s.Resource).some((r) => JSON.stringify(r) === JSON.stringify(streamArn)))
      .flatMap((s) => asArray(s.Action))
      .filter((a) => a.startsWith('kinesis:'))
      .sort();

  beforeAll(() => {
    stack = testStack();
    query = new SluiceQuery(stack, 'PerProduct', { queryModule: example('hourly-sales-per-product.ts'), shardCount: 3 });
    template = Template.fromStack(stack);
  });

  it('says it needs the stage and exposes the internal stream, its function and its mapping', () => {
    expect(query.needsRepartition).toBe(true);
    expect(query.repartitionStream).toBeDefined();
    expect(query.repartitionFunction).toBeDefined();
    expect(query.repartitionEventSource).toBeDefined();
    expect(query.functions()).toEqual([query.kinesisTriggerFunction, query.scheduledTriggerFunction, query.repartitionFunction]);
  });

  it('creates an internal stream: provisioned, encrypted, 24 hours, as many shards as the source stream, retained', () => {
    const streams = template.findResources('AWS::Kinesis::Stream') as Record<string, Resource>;
    expect(Object.keys(streams)).toHaveLength(2);
    const internal = streams[idOf(query.repartitionStream!)]!;
    expect(internal.Properties).toEqual({
      ShardCount: 3,
      RetentionPeriodHours: 24,
      StreamModeDetails: { StreamMode: 'PROVISIONED' },
      StreamEncryption: { EncryptionType: 'KMS', KeyId: 'alias/aws/kinesis' },
    });
    expect(internal.DeletionPolicy).toBe('Retain');
  });

  it('maps the source stream to stage 1 and the internal stream to stage 2, each with partial batch responses', () => {
    const mappings = Object.values(kinesisMappings(template));
    expect(mappings).toHaveLength(2);
    const common = {
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BisectBatchOnFunctionError: true,
      MaximumRetryAttempts: -1,
      ParallelizationFactor: 1,
      StartingPosition: 'TRIM_HORIZON',
      BatchSize: 100,
      MaximumRecordAgeInSeconds: 23 * 3600,
      DestinationConfig: { OnFailure: { Destination: arnOf(query.onFailureQueue) } },
    };
    const bySource = (stream: unknown) => mappings.filter((m) => JSON.stringify(m.Properties.EventSourceArn) === JSON.stringify(stream));
    const [source] = bySource(arnOf(query.stream as kinesis.Stream));
    const [internal] = bySource(arnOf(query.repartitionStream!));
    expect(source!.Properties).toMatchObject({ ...common, FunctionName: { Ref: idOf(query.kinesisTriggerFunction) } });
    expect(internal!.Properties).toMatchObject({ ...common, FunctionName: { Ref: idOf(query.repartitionFunction!) } });
  });

  it('bundles the repartition function like the others: Node.js 22, ARM64, 1024 MiB, one minute, its own log group', () => {
    const functions = template.findResources('AWS::Lambda::Function') as Record<string, Resource>;
    expect(Object.keys(functions)).toHaveLength(4);
    for (const fn of Object.values(functions)) {
      expect(fn.Properties).toMatchObject({ Runtime: 'nodejs22.x', Architectures: ['arm64'], MemorySize: 1024, Timeout: 60, Handler: 'index.handler' });
    }
    const repartition = functions[idOf(query.repartitionFunction!)]!;
    expect(repartition.Properties.Description).toContain('stage 2');
    const logGroup = query.node.findChild('RepartitionTriggerLogs') as logs.LogGroup;
    expect(repartition.Properties.LoggingConfig.LogGroup).toEqual({ Ref: idOf(logGroup) });
    template.resourceCountIs('AWS::Logs::LogGroup', 4);
    // Only the scheduled function is invoked asynchronously.
    template.resourceCountIs('AWS::Lambda::EventInvokeConfig', 1);
  });

  it('gives every function SLUICE_REPARTITION_STREAM, which the runtime reads back', () => {
    for (const fn of query.functions()) {
      const resource = (template.findResources('AWS::Lambda::Function') as Record<string, Resource>)[idOf(fn)]!;
      const variables = resource.Properties.Environment.Variables as Record<string, unknown>;
      expect(variables[RUNTIME_ENV.repartitionStreamName]).toEqual({ Ref: idOf(query.repartitionStream!) });
      expect(variables[RUNTIME_ENV.expectedShardCount]).toBe('3');
      const filledIn = Object.fromEntries(Object.entries(variables).map(([k, v]) => [k, typeof v === 'string' ? v : `resolved-${k}`]));
      expect(readRuntimeConfig(filledIn).repartitionStreamName).toBe(`resolved-${RUNTIME_ENV.repartitionStreamName}`);
    }
    expect(query.environment[RUNTIME_ENV.repartitionStreamName]).toBeDefined();
  });

  it('grants stage 1 and the scheduled function PutRecords on the internal stream, and stage 2 only reads it', () => {
    const source = arnOf(query.stream as kinesis.Stream);
    const internal = arnOf(query.repartitionStream!);
    // Stage 1: list the internal shards and write them; no reads.
    expect(kinesisActions(query.kinesisTriggerFunction, internal)).toEqual(['kinesis:ListShards', 'kinesis:PutRecords']);
    // Scheduled: reads both streams (idle checks, drain), writes idle markers into the internal one.
    expect(kinesisActions(query.scheduledTriggerFunction, internal)).toEqual([
      'kinesis:GetRecords', 'kinesis:GetShardIterator', 'kinesis:ListShards', 'kinesis:PutRecords',
    ]);
    expect(kinesisActions(query.scheduledTriggerFunction, source)).toEqual(['kinesis:GetRecords', 'kinesis:GetShardIterator', 'kinesis:ListShards']);
    expect(kinesisActions(query.scheduledTriggerFunction, source)).not.toContain('kinesis:PutRecords');
    // Stage 2: reads the internal stream (its mapping), lists the source shards, writes no stream.
    const stage2Internal = kinesisActions(query.repartitionFunction!, internal);
    expect(stage2Internal).toEqual(expect.arrayContaining(['kinesis:GetRecords', 'kinesis:GetShardIterator', 'kinesis:ListShards']));
    expect(stage2Internal.filter((a) => !/^kinesis:(Describe|Get|List|SubscribeToShard)/.test(a))).toEqual([]);
    expect(kinesisActions(query.repartitionFunction!, source)).toEqual(['kinesis:ListShards']);
    // Stage 2 keeps the state and writes the sink: the same table access as the other functions.
    const tableActions = statementsOfRole(template, idOf(query.repartitionFunction!.role as never))
      .filter((s) => JSON.stringify(s.Resource).includes(idOf(query.stateTable)))
      .flatMap((s) => asArray(s.Action));
    expect(tableActions).toEqual(expect.arrayContaining(['dynamodb:Query', 'dynamodb:PutItem', 'dynamodb:BatchWriteItem']));
    // Stage 2's mapping sends its given-up batches to the queue too.
    const queueActions = statementsOfRole(template, idOf(query.repartitionFunction!.role as never))
      .filter((s) => JSON.stringify(s.Resource) === JSON.stringify(arnOf(query.onFailureQueue)))
      .flatMap((s) => asArray(s.Action));
    expect(queueActions).toContain('sqs:SendMessage');
    for (const s of policyStatements(template)) expect(asArray(s.Resource)).not.toContain('*');
  });

  it('alarms on the internal stream\'s iterator age and the repartition function\'s errors too', () => {
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')) as Resource[];
    expect(alarms).toHaveLength(9);
    const onFunction = (metric: string, fn: SluiceQuery['kinesisTriggerFunction']) => alarms.filter((a) => a.Properties.MetricName === metric
      && JSON.stringify(a.Properties.Dimensions) === JSON.stringify([{ Name: 'FunctionName', Value: { Ref: idOf(fn) } }]));
    expect(onFunction('IteratorAge', query.repartitionFunction!)[0]!.Properties).toMatchObject({
      Namespace: 'AWS/Lambda', Statistic: 'Maximum', Threshold: 600_000, EvaluationPeriods: 5, ComparisonOperator: 'GreaterThanThreshold',
    });
    expect(onFunction('IteratorAge', query.kinesisTriggerFunction)).toHaveLength(1);
    expect(onFunction('Errors', query.repartitionFunction!)).toHaveLength(1);
    expect(query.alarms.repartitionIteratorAge).toBeDefined();
    expect(query.alarms.repartitionTriggerErrors).toBeDefined();
  });

  it('passes cdk-nag AwsSolutions, the repartition function\'s findings acknowledged like the others\'', () => {
    expect(nagViolations(stack)).toEqual([]);
    const acks = acknowledgments(stack).map((a) => a.id.replace(/^Annotation::/, ''));
    expect(acks.filter((id) => id === 'AwsSolutions-L1')).toHaveLength(4);
    expect(acks.filter((id) => id.startsWith('AwsSolutions-IAM5['))).toHaveLength(3);
  });
});

describe('SluiceQuery repartition knobs', () => {
  it('takes repartitionShardCount; the internal mapping follows the batch and retry knobs but always starts at TRIM_HORIZON', () => {
    const stack = testStack();
    const action = { bind: () => ({ alarmActionArn: 'arn:aws:sns:eu-west-1:123456789012:ops' }) };
    const query = new SluiceQuery(stack, 'PerProduct', {
      queryModule: example('hourly-sales-per-product.ts'),
      shardCount: 2,
      repartitionShardCount: 6,
      batchSize: 500,
      maxBatchingWindow: Duration.seconds(5),
      startingPosition: lambda.StartingPosition.LATEST,
      retryAttempts: 10,
      bisectBatchOnError: false,
      // More than the internal stream's 24 hours allow: capped there at 23 hours.
      streamRetention: Duration.days(7),
      maxRecordAge: Duration.days(2),
      alarmAction: action,
    });
    const template = Template.fromStack(stack);
    template.hasResourceProperties('AWS::Kinesis::Stream', { ShardCount: 2, RetentionPeriodHours: 168 });
    template.hasResourceProperties('AWS::Kinesis::Stream', { ShardCount: 6, RetentionPeriodHours: 24 });
    const internal = { 'Fn::GetAtt': [stack.getLogicalId(query.repartitionStream!.node.defaultChild as never), 'Arn'] };
    const shared = { BatchSize: 500, MaximumBatchingWindowInSeconds: 5, MaximumRetryAttempts: 10, BisectBatchOnFunctionError: false, ParallelizationFactor: 1 };
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { ...shared, EventSourceArn: internal, StartingPosition: 'TRIM_HORIZON', MaximumRecordAgeInSeconds: 23 * 3600 });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { ...shared, StartingPosition: 'LATEST', MaximumRecordAgeInSeconds: 2 * 24 * 3600 });
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')) as Resource[];
    expect(alarms).toHaveLength(9);
    for (const alarm of alarms) expect(alarm.Properties.AlarmActions).toEqual(['arn:aws:sns:eu-west-1:123456789012:ops']);
  });

  it('a given stream of unknown shard count: an internal stream of 2 shards', () => {
    const stack = testStack();
    const stream = kinesis.Stream.fromStreamArn(stack, 'Given', 'arn:aws:kinesis:eu-west-1:123456789012:stream/sales');
    const query = new SluiceQuery(stack, 'PerProduct', { queryModule: example('hourly-sales-per-product.ts'), stream });
    const template = Template.fromStack(stack);
    template.resourceCountIs('AWS::Kinesis::Stream', 1);
    template.hasResourceProperties('AWS::Kinesis::Stream', { ShardCount: 2 });
    expect(query.expectedShardCount).toBeUndefined();
    // Stage 2 lists the given stream's shards.
    const listShards = statementsOfRole(template, stack.getLogicalId(query.repartitionFunction!.role!.node.defaultChild as never))
      .filter((s) => JSON.stringify(s.Resource) === JSON.stringify('arn:aws:kinesis:eu-west-1:123456789012:stream/sales'));
    expect(listShards.flatMap((s) => asArray(s.Action))).toEqual(['kinesis:ListShards']);
  });

  it('a co-partitioned query creates no internal stream, no third function and no SLUICE_REPARTITION_STREAM', () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts'), shardCount: 4, repartitionShardCount: 8 });
    const template = Template.fromStack(stack);
    expect(query.needsRepartition).toBe(false);
    expect(query.repartitionStream).toBeUndefined();
    expect(query.repartitionFunction).toBeUndefined();
    expect(query.repartitionEventSource).toBeUndefined();
    expect(query.alarms.repartitionIteratorAge).toBeUndefined();
    template.resourceCountIs('AWS::Kinesis::Stream', 1);
    template.hasResourceProperties('AWS::Kinesis::Stream', { ShardCount: 4 });
    expect(Object.keys(kinesisMappings(template))).toHaveLength(1);
    template.resourceCountIs('AWS::Lambda::Function', 3);
    template.resourceCountIs('AWS::CloudWatch::Alarm', 7);
    for (const fn of Object.values(template.findResources('AWS::Lambda::Function')) as Resource[]) {
      expect(fn.Properties.Environment.Variables).not.toHaveProperty(RUNTIME_ENV.repartitionStreamName);
    }
    for (const s of policyStatements(template)) expect(asArray(s.Action)).not.toContain('kinesis:PutRecords');
  });
});

describe('semiSpaceMb', () => {
  it('sizes the young generation at a sixteenth of the function memory, 16 to 64 MiB', () => {
    expect([128, 256, 512, 1024, 3008].map(semiSpaceMb)).toEqual([16, 16, 32, 64, 64]);
  });
});
