/**
 * Least privilege per function: every statement of each function's role, by resource, against
 * what its code calls (cdk/grants.ts has the table). A new grant, or one missing, fails here.
 */
import type { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { describe, expect, it } from 'vitest';
import { SluiceQuery } from '../../cdk/sluice-query.js';
import { asArray, example, fixture, nagViolations, statementsOfRole, testStack } from './support.js';

type Fn = SluiceQuery['kinesisTriggerFunction'];

const CHECKPOINT = ['dynamodb:BatchWriteItem', 'dynamodb:ConditionCheckItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:UpdateItem'];
/** Stage 2 never writes a watermark row: its watermark comes with the internal records. */
const CHECKPOINT_WITHOUT_WATERMARK_ROWS = CHECKPOINT.filter((a) => a !== 'dynamodb:UpdateItem');
const STATE = ['dynamodb:BatchWriteItem', 'dynamodb:PutItem', 'dynamodb:Query'];
const MAPPING_READS = ['kinesis:DescribeStream', 'kinesis:DescribeStreamSummary', 'kinesis:GetRecords', 'kinesis:GetShardIterator', 'kinesis:ListShards'];
const OWN_READS = ['kinesis:GetRecords', 'kinesis:GetShardIterator', 'kinesis:ListShards'];
const LOGS = ['logs:CreateLogStream', 'logs:PutLogEvents'];
const QUEUE = ['sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:SendMessage'];

/** Each role statement's actions by a readable name of its resource; an unknown resource fails. */
function accessOf(stack: Stack, template: Template, query: SluiceQuery, fn: Fn): Record<string, string[]> {
  const arn = (c: unknown) => ({ 'Fn::GetAtt': [stack.getLogicalId((c as { node: { defaultChild: never } }).node.defaultChild), 'Arn'] });
  const named: [string, unknown][] = [
    ['checkpoint', arn(query.checkpointTable)],
    ['state', arn(query.stateTable)],
    ['stream', arn(query.stream)],
    ['queue', arn(query.onFailureQueue)],
    ['logs', arn(query.node.findChild(`${fn.node.id}Logs`))],
  ];
  if (query.sinkTable) named.push(['sink-table', arn(query.sinkTable)]);
  if (query.sinkBucket) {
    named.push(['sink-bucket', arn(query.sinkBucket)]);
    named.push(['sink-objects', { 'Fn::Join': ['', [arn(query.sinkBucket), `/${query.sinkPrefix}*`]] }]);
    named.push(['spill-objects', { 'Fn::Join': ['', [arn(query.sinkBucket), `/${query.sinkPrefix}_sluice_spill/*`]] }]);
    named.push(['spill-tombstones', { 'Fn::Join': ['', [arn(query.sinkBucket), `/${query.sinkPrefix}_sluice_spill_tombstones/*`]] }]);
  }
  named.push(['dead-letters', { 'Fn::Join': ['', [arn(query.deadLetterBucket), `/${query.deadLetterPrefix}${query.queryName}/*`]] }]);
  if (query.repartitionStream) named.push(['internal', arn(query.repartitionStream)]);
  const out: Record<string, string[]> = {};
  for (const s of statementsOfRole(template, stack.getLogicalId(fn.role!.node.defaultChild as never))) {
    for (const resource of asArray(s.Resource)) {
      const name = named.find(([, value]) => JSON.stringify(value) === JSON.stringify(resource))?.[0] ?? `unknown ${JSON.stringify(resource)}`;
      out[name] = [...new Set([...(out[name] ?? []), ...asArray(s.Action)])].sort();
    }
  }
  return out;
}

describe('least privilege per function', () => {
  it('a one-stage stateful query (update → DynamoDB): state for both functions, only the mapping\'s reads for the trigger', () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts') });
    const template = Template.fromStack(stack);
    const common = { checkpoint: CHECKPOINT, state: STATE, 'sink-table': ['dynamodb:PutItem'], 'dead-letters': ['s3:PutObject'], logs: LOGS };
    expect(accessOf(stack, template, query, query.kinesisTriggerFunction)).toEqual({ ...common, stream: MAPPING_READS, queue: QUEUE });
    expect(accessOf(stack, template, query, query.scheduledTriggerFunction)).toEqual({ ...common, stream: OWN_READS });
    expect(nagViolations(stack)).toEqual([]);
  });

  it("a DynamoDB sink with onUnwritableRow: 'spill': writers PUT spilled values and read tombstones; only the scheduled function (the collector) scans, lists both folders and deletes", () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'Spill', { queryModule: fixture('notes-spill.ts') });
    const template = Template.fromStack(stack);
    expect(query.sinkBucket).toBeDefined();
    expect(query.sinkPrefix).toBe('notes-spill/');
    expect(query.environment.SLUICE_SINK_BUCKET).toBeDefined();
    const common = { checkpoint: CHECKPOINT, state: STATE, 'dead-letters': ['s3:PutObject'], 'sink-bucket': ['s3:ListBucket'], logs: LOGS };
    expect(accessOf(stack, template, query, query.kinesisTriggerFunction)).toEqual({
      ...common, 'sink-table': ['dynamodb:PutItem'], 'spill-objects': ['s3:PutObject'], 'spill-tombstones': ['s3:GetObject'], stream: MAPPING_READS, queue: QUEUE,
    });
    expect(accessOf(stack, template, query, query.scheduledTriggerFunction)).toEqual({
      ...common, 'sink-table': ['dynamodb:PutItem', 'dynamodb:Scan'], 'spill-objects': ['s3:DeleteObject', 's3:PutObject'],
      'spill-tombstones': ['s3:DeleteObject', 's3:GetObject', 's3:PutObject'], stream: OWN_READS,
    });
    const listed = (fn: Fn) => statementsOfRole(template, stack.getLogicalId(fn.role!.node.defaultChild as never))
      .filter((s) => asArray(s.Action).includes('s3:ListBucket')).map((s) => s.Condition);
    expect(listed(query.kinesisTriggerFunction)).toEqual([{ StringLike: { 's3:prefix': ['notes-spill/_sluice_spill_tombstones/*'] } }]);
    expect(listed(query.scheduledTriggerFunction)).toEqual([{ StringLike: { 's3:prefix': ['notes-spill/_sluice_spill*'] } }]);
    expect(nagViolations(stack)).toEqual([]);
  });

  it('a stateless query (append → S3 files): no state table at all; ListBucket only under the sink prefix', () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'Large', { queryModule: fixture('large-orders.ts') });
    const template = Template.fromStack(stack);
    const common = {
      checkpoint: CHECKPOINT, 'sink-objects': ['s3:DeleteObject', 's3:GetObject', 's3:PutObject'], 'sink-bucket': ['s3:ListBucket'],
      'dead-letters': ['s3:PutObject'], logs: LOGS,
    };
    expect(accessOf(stack, template, query, query.kinesisTriggerFunction)).toEqual({ ...common, stream: MAPPING_READS, queue: QUEUE });
    expect(accessOf(stack, template, query, query.scheduledTriggerFunction)).toEqual({ ...common, stream: OWN_READS });
    for (const fn of query.functions()) {
      const list = statementsOfRole(template, stack.getLogicalId(fn.role!.node.defaultChild as never)).filter((s) => asArray(s.Action).includes('s3:ListBucket'));
      expect(list.map((s) => s.Condition)).toEqual([{ StringLike: { 's3:prefix': ['large-orders/*'] } }]);
    }
    expect(nagViolations(stack)).toEqual([]);
  });

  it('a repartition stage: stage 1 writes the internal stream and touches neither state nor sink; stage 2 keeps both', () => {
    const stack = testStack();
    const query = new SluiceQuery(stack, 'PerProduct', { queryModule: example('hourly-sales-per-product.ts'), shardCount: 3 });
    const template = Template.fromStack(stack);
    expect(accessOf(stack, template, query, query.kinesisTriggerFunction)).toEqual({
      checkpoint: CHECKPOINT, 'dead-letters': ['s3:PutObject'], logs: LOGS, stream: MAPPING_READS, queue: QUEUE,
      internal: ['kinesis:ListShards', 'kinesis:PutRecords'],
    });
    const sink = query.sinkTable ? { 'sink-table': ['dynamodb:PutItem'] }
      : { 'sink-objects': ['s3:DeleteObject', 's3:GetObject', 's3:PutObject'], 'sink-bucket': ['s3:ListBucket'] };
    expect(accessOf(stack, template, query, query.scheduledTriggerFunction)).toEqual({
      checkpoint: CHECKPOINT, state: STATE, ...sink, 'dead-letters': ['s3:PutObject'], logs: LOGS, stream: OWN_READS,
      internal: [...OWN_READS, 'kinesis:PutRecords'].sort(),
    });
    expect(accessOf(stack, template, query, query.repartitionFunction!)).toEqual({
      checkpoint: CHECKPOINT_WITHOUT_WATERMARK_ROWS, state: STATE, ...sink, 'dead-letters': ['s3:PutObject'], logs: LOGS, queue: QUEUE,
      stream: ['kinesis:ListShards'], internal: MAPPING_READS,
    });
    expect(nagViolations(stack)).toEqual([]);
  });

  it('replaySinkTables: the functions that write the sink may PutItem each replay table, and nothing more; refused for an S3 sink', () => {
    const stack = testStack();
    const replayTable = new dynamodb.Table(stack, 'ReplayTable', {
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING }, billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    });
    const query = new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts'), replaySinkTables: [replayTable] });
    const template = Template.fromStack(stack);
    const replayArn = { 'Fn::GetAtt': [stack.getLogicalId(replayTable.node.defaultChild as never), 'Arn'] };
    const onReplayTable = (fn: Fn) => statementsOfRole(template, stack.getLogicalId(fn.role!.node.defaultChild as never))
      .filter((s) => asArray(s.Resource).some((r) => JSON.stringify(r) === JSON.stringify(replayArn)))
      .flatMap((s) => asArray(s.Action));
    expect(onReplayTable(query.kinesisTriggerFunction)).toEqual(['dynamodb:PutItem']);
    expect(onReplayTable(query.scheduledTriggerFunction)).toEqual(['dynamodb:PutItem']);
    expect(onReplayTable(query.onFailureFunction)).toEqual([]);
    expect(nagViolations(stack)).toEqual([]);

    const s3Stack = testStack();
    const other = new dynamodb.Table(s3Stack, 'ReplayTable', { partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING } });
    expect(() => new SluiceQuery(s3Stack, 'Large', { queryModule: fixture('large-orders.ts'), replaySinkTables: [other] }))
      .toThrow(/replaySinkTables are for a dynamodb sink's replays/);
    const liveStack = testStack();
    const live = new dynamodb.Table(liveStack, 'Sink', { partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING } });
    expect(() => new SluiceQuery(liveStack, 'Live', { queryModule: example('hourly-sales-live.ts'), sinkTable: live, replaySinkTables: [live] }))
      .toThrow(/lists the sink table itself/);
  });

  it('two queries sharing a dead-letter bucket each write only their own prefix', () => {
    const stack = testStack();
    const live = new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts') });
    const archive = new SluiceQuery(stack, 'Archive', { queryModule: example('hourly-sales-archive.ts'), deadLetterBucket: live.deadLetterBucket });
    const template = Template.fromStack(stack);
    const putTargets = (fn: Fn) => statementsOfRole(template, stack.getLogicalId(fn.role!.node.defaultChild as never))
      .filter((s) => asArray(s.Action).includes('s3:PutObject') && JSON.stringify(s.Resource).includes(stack.getLogicalId(live.deadLetterBucket.node.defaultChild as never)))
      .map((s) => JSON.stringify(s.Resource));
    expect(putTargets(live.kinesisTriggerFunction)).toEqual([expect.stringContaining('/dead-letter/hourly-sales-live/*')]);
    expect(putTargets(archive.kinesisTriggerFunction)).toEqual([expect.stringContaining('/dead-letter/hourly-sales-archive/*')]);
  });
});
