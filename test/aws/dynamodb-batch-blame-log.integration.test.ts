/**
 * The BatchBlameLog contract, on DynamoDB Local and on its in-memory twin: an entry per planned
 * batch id, replaced by a later put, kept apart per partition, removed after the commit, and
 * matched to its plan by the end offsets. On DynamoDB, a Kinesis batch's worth (10,000 withheld
 * records) fits in one item, and an entry of a newer format is ignored (the search starts over).
 */
import { randomUUID } from 'node:crypto';
import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { DynamoDbCheckpoint } from '../../lib/aws/dynamodb-checkpoint.js';
import { ensureTables } from '../../lib/aws/tables.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { BATCH_BLAME_FORMAT_VERSION, blameIsFor, MemoryBatchBlameLog, type BatchBlame, type BatchBlameLog } from '../../lib/checkpoint/batch-blame-log.js';
import { deleteResources } from '../support/cleanup.js';

let emu: EmulatorSet;
let aws: AwsClients;
const CP = 'sluice-blame-log-test';
const STATE = 'sluice-blame-log-test-state';

beforeAll(async () => {
  emu = await startEmulators({ kinesis: false, s3: false });
  aws = createAwsClients(emu.clientOptions);
  await ensureTables(aws.dynamodb, { checkpointTable: CP, stateTable: STATE });
});
afterAll(async () => {
  if (aws) await deleteResources(aws, { tables: [CP, STATE] });
  aws?.destroy();
  await emu?.stop();
});

const query = `q-${randomUUID().slice(0, 8)}`;
const dynamoDbLog = (partitionId: string): BatchBlameLog => new DynamoDbCheckpoint({ client: aws.dynamodb, checkpointTable: CP, stateTable: STATE, queryName: query, partitionId }).blameLog;
const memoryLogs = new Map<string, MemoryBatchBlameLog>();
const memoryLog = (partitionId: string): BatchBlameLog => memoryLogs.get(partitionId) ?? memoryLogs.set(partitionId, new MemoryBatchBlameLog()).get(partitionId)!;

const entry = (batchId: number, withheld: number, passingThrough: string | null = null): BatchBlame => ({
  formatVersion: BATCH_BLAME_FORMAT_VERSION, batchId, offsets: { kinesis: { sequenceNumber: `${batchId}999`, firstSequenceNumber: `${batchId}000` } },
  withheld: Array.from({ length: withheld }, (_, i) => [String(49650000000000000000000000000000000000000000000000000n + BigInt(i) * 7919n), `ARITHMETIC_OVERFLOW: record ${i}`] as const),
  passingThrough, failingThrough: null, screened: true,
});

describe.each([['DynamoDB Local', dynamoDbLog], ['memory', memoryLog]] as const)('BatchBlameLog on %s', (_name, logOf) => {
  it('keeps one entry per batch id, replaced by the next put, apart per partition; removed once the batch committed', async () => {
    const log = logOf(`shardId-${_name.length}-1`);
    const other = logOf(`shardId-${_name.length}-2`);
    expect(await log.get(4)).toBeUndefined();
    await log.put(entry(4, 2));
    await log.put(entry(4, 3, 'x'));
    await log.put(entry(5, 1));
    expect(await log.get(4)).toEqual(entry(4, 3, 'x'));
    expect(await log.get(5)).toEqual(entry(5, 1));
    expect(await other.get(4)).toBeUndefined();
    await log.remove(4);
    expect(await log.get(4)).toBeUndefined();
    expect(await log.get(5)).toEqual(entry(5, 1));
  });

  it('an entry is for its own plan only: the same batch id with other end offsets does not match', async () => {
    const e = entry(7, 1);
    expect(blameIsFor(e, 7, new Map([['kinesis', { firstSequenceNumber: '7000', sequenceNumber: '7999' }]]))).toBe(true);
    expect(blameIsFor(e, 7, new Map([['kinesis', { firstSequenceNumber: '7000', sequenceNumber: '7998' }]]))).toBe(false);
    expect(blameIsFor(e, 8, new Map([['kinesis', { firstSequenceNumber: '7000', sequenceNumber: '7999' }]]))).toBe(false);
  });
});

describe('BatchBlameLog on DynamoDB Local: the item', () => {
  it('holds 10,000 withheld records (a full Kinesis batch) in one item, compressed', async () => {
    const log = dynamoDbLog('shardId-big');
    const big = entry(9, 10_000);
    await log.put(big);
    expect(await log.get(9)).toEqual(big);
    const item = await aws.dynamodb.send(new GetItemCommand({ TableName: CP, Key: { pk: { S: `${query}#shardId-big` }, sk: { S: 'blame#000000000009' } } }));
    expect(item.Item?.entry?.B?.byteLength).toBeLessThan(400 * 1024);
    expect(item.Item?.expiresAt?.N).toBeDefined();
  });

  it('ignores an entry of a newer format (the search starts over: slower, never wrong)', async () => {
    await aws.dynamodb.send(new PutItemCommand({ TableName: CP, Item: { pk: { S: `${query}#shardId-new` }, sk: { S: 'blame#000000000001' }, fmt: { N: String(BATCH_BLAME_FORMAT_VERSION + 1) }, entry: { B: Buffer.from('?') } } }));
    expect(await dynamoDbLog('shardId-new').get(1)).toBeUndefined();
  });
});
