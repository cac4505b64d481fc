/**
 * `sluice status` counts the batches waiting in the on-failure SQS queue (visible and in flight,
 * GetQueueAttributes' approximate counts) and is unhealthy while any wait, against LocalStack's
 * SQS (the local emulators have none). Needs only LocalStack, not the deployed example stack: it
 * creates a query's resources itself. Run alone:
 * `scripts/localstack/with-localstack.sh npx vitest run --config test/localstack/vitest.config.ts test/localstack/status-on-failure-queue.localstack.test.ts`
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import {
  CreateQueueCommand, DeleteMessageCommand, DeleteQueueCommand, ReceiveMessageCommand, SendMessageCommand, SQSClient,
} from '@aws-sdk/client-sqs';
import { createAwsClients } from '../../lib/aws/clients.js';
import type { QueryStatus } from '../../lib/aws/query-inspection.js';
import { ensureTables } from '../../lib/aws/tables.js';
import { createStreamAndWait } from '../../lib/local/kinesis-admin.js';
import { onFailureRecordOf } from '../../lib/local/on-failure-destination.js';
import type { DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';
import { deleteResources } from '../support/cleanup.js';
import { runSluice } from '../support/sluice-cli.js';

const endpoint = process.env.AWS_ENDPOINT_URL;
const region = process.env.AWS_REGION ?? 'us-east-1';
const credentials = { accessKeyId: process.env.AWS_ACCESS_KEY_ID ?? 'test', secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY ?? 'test' };
const id = `${process.pid}-${Date.now() % 100_000}`;
const QUERY = `status-sqs-${id}`;
const descriptor: DeploymentDescriptor = {
  sluiceQuery: QUERY,
  checkpointTable: `sluice-checkpoint-${id}`,
  stateTable: `sluice-state-${id}`,
  streamName: `sluice-stream-${id}`,
  deadLetterBucket: `sluice-dlq-${id}`,
  deadLetterPrefix: 'dead-letter/',
};

const aws = createAwsClients({ region, credentials, endpoints: { kinesis: endpoint, dynamodb: endpoint, s3: endpoint } });
const sqs = new SQSClient({ region, credentials, endpoint });
let dir: string;
let descriptorFile: string;
let queueUrl: string;

async function status(): Promise<{ code: number | null; status: QueryStatus }> {
  const out = await runSluice(['status', QUERY, '--json', '--deployment', descriptorFile, '--endpoint', endpoint!], 120_000,
    { AWS_REGION: region, AWS_ACCESS_KEY_ID: credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey });
  expect(out.stdout, out.stderr).toMatch(/^\{/);
  return { code: out.code, status: JSON.parse(out.stdout) as QueryStatus };
}

/** What Lambda sends the on-failure destination for a Kinesis batch it gave up on. */
function givenUpBatch(first: number): string {
  const arrival = new Date().toISOString();
  return onFailureRecordOf({
    condition: 'RetryAttemptsExhausted', reason: 'function error', shardId: 'shardId-000000000000',
    streamArn: `arn:aws:kinesis:${region}:000000000000:stream/${descriptor.streamName}`,
    startSequenceNumber: String(49_600_000_000_000_000_000n + BigInt(first)), endSequenceNumber: String(49_600_000_000_000_000_000n + BigInt(first + 3)),
    batchSize: 4, approximateArrivalOfFirstRecord: arrival, approximateArrivalOfLastRecord: arrival, approximateInvokeCount: 3, records: [],
  });
}

beforeAll(async () => {
  expect(endpoint, 'AWS_ENDPOINT_URL (LocalStack): run through scripts/localstack/with-localstack.sh').toBeTruthy();
  dir = mkdtempSync(join(tmpdir(), 'sluice-status-sqs-'));
  await createStreamAndWait(aws.kinesis, descriptor.streamName, 1);
  await ensureTables(aws.dynamodb, { checkpointTable: descriptor.checkpointTable, stateTable: descriptor.stateTable });
  await aws.s3.send(new CreateBucketCommand({ Bucket: descriptor.deadLetterBucket }));
  queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: `sluice-on-failure-${id}` }))).QueueUrl!;
  descriptorFile = join(dir, 'deployment.json');
  writeFileSync(descriptorFile, JSON.stringify({ ...descriptor, onFailureQueueUrl: queueUrl }));
});

afterAll(async () => {
  if (queueUrl) await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
  await deleteResources(aws, { streams: [descriptor.streamName], tables: [descriptor.checkpointTable, descriptor.stateTable], buckets: [descriptor.deadLetterBucket] });
  aws.destroy();
  sqs.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('sluice status and the on-failure queue (LocalStack SQS)', () => {
  it('counts the skipped batches waiting, in flight included, and is unhealthy until the queue is empty', async () => {
    const empty = await status();
    expect(empty.status.skippedBatches).toBe(0);
    expect(empty.status.healthy).toBe(true);
    expect(empty.code).toBe(0);

    for (const first of [0, 10]) await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: givenUpBatch(first) }));
    // One of them taken by the on-failure function and not yet deleted: in flight, still waiting.
    const taken = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1, VisibilityTimeout: 600 }));
    expect(taken.Messages).toHaveLength(1);

    const waiting = await status();
    expect(waiting.status.skippedBatches).toBe(2);
    expect(waiting.status.healthy).toBe(false);
    expect(waiting.status.problems).toContain('2 skipped batch(es) wait in the on-failure queue: their records were not processed');
    expect(waiting.code).toBe(1);

    // Both recorded by the on-failure function (deleted): healthy again.
    await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: taken.Messages![0]!.ReceiptHandle! }));
    const rest = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
    expect(rest.Messages).toHaveLength(1);
    await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: rest.Messages![0]!.ReceiptHandle! }));

    const drained = await status();
    expect(drained.status.skippedBatches).toBe(0);
    expect(drained.status.problems).toEqual([]);
    expect(drained.code).toBe(0);
  });
});
