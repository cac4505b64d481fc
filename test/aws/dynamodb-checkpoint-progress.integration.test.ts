/**
 * Recent progress records in the checkpoint table: batch N's record rides in commit N's item (no
 * request and no item of its own), the last PROGRESS_RECORDS.keep batches are read back, a commit
 * that is refused writes no record, and the ring of `progress#NN` items earlier versions wrote is
 * still read.
 */
import { randomUUID } from 'node:crypto';
import { PutItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AwsClients } from '../../lib/aws/clients.js';
import { DynamoDbCheckpoint } from '../../lib/aws/dynamodb-checkpoint.js';
import { itemSize } from '../../lib/aws/dynamodb-cost.js';
import { CHECKPOINT_FORMAT_VERSION } from '../../lib/checkpoint/checkpoint.js';
import { PROGRESS_RECORDS } from '../../lib/runtime/runtime-config.js';
import { checkpointTablesForFile } from '../support/checkpoint-tables.js';

const tables = checkpointTablesForFile('sluice-progress-ring-test');
const CP = tables.checkpointTable;
const STATE = tables.stateTable;
let aws: AwsClients;
beforeAll(() => { aws = tables.aws; });

const commit = (batchId: number) => ({ formatVersion: CHECKPOINT_FORMAT_VERSION, batchId, nextBatchWatermarkMs: batchId * 10 });

describe('progress ring in the checkpoint table', () => {
  it('keeps the last 20 batches\' records, written as attributes of the commit item (no request, no item of their own)', async () => {
    const cp = new DynamoDbCheckpoint({ client: aws.dynamodb, checkpointTable: CP, stateTable: STATE, queryName: `q-${randomUUID().slice(0, 8)}`, partitionId: 'shardId-000000000000' });
    const total = PROGRESS_RECORDS.keep + 5;
    const sent: string[] = [];
    const transactItems: number[] = [];
    aws.dynamodb.middlewareStack.add((next, context) => async (args) => {
      sent.push(context.commandName ?? '?');
      const items = (args.input as { TransactItems?: unknown[] }).TransactItems;
      if (items) transactItems.push(items.length);
      return next(args);
    }, { step: 'initialize', name: 'countRequests' });
    for (let b = 0; b < total; b++) {
      cp.stageProgress(b, { batchId: b, numInputRows: b * 3 });
      expect(await cp.commitLog.add(b, commit(b))).toBe(true);
    }
    // One request per commit, and no transaction item for the record: the check of N-1 (batch 0: that
    // no replay pointer exists) and the commit.
    aws.dynamodb.middlewareStack.remove('countRequests');
    expect(sent).toEqual(Array(total).fill('TransactWriteItemsCommand'));
    expect(transactItems).toEqual(Array(total).fill(2));
    const ring = await cp.readRecentProgress<{ batchId: number; numInputRows: number }>();
    expect(ring.map((p) => p.batchId)).toEqual(Array.from({ length: PROGRESS_RECORDS.keep }, (_, i) => total - PROGRESS_RECORDS.keep + i));
    expect(ring.at(-1)).toEqual({ batchId: total - 1, numInputRows: (total - 1) * 3 });
    const progressItems = await aws.dynamodb.send(new QueryCommand({
      TableName: CP, KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)', ExpressionAttributeValues: { ':pk': { S: cp.pk }, ':p': { S: 'progress#' } },
    }));
    expect(progressItems.Items).toEqual([]);
    // The commit log still reads its entries as before.
    expect(await cp.commitLog.getLatest()).toEqual([total - 1, commit(total - 1)]);
  });

  it('a refused commit writes no record, and a record staged for another batch is not written', async () => {
    const cp = new DynamoDbCheckpoint({ client: aws.dynamodb, checkpointTable: CP, stateTable: STATE, queryName: `q-${randomUUID().slice(0, 8)}`, partitionId: 'shardId-000000000001' });
    cp.stageProgress(0, { batchId: 0, run: 'first' });
    expect(await cp.commitLog.add(0, commit(0))).toBe(true);
    cp.stageProgress(0, { batchId: 0, run: 'stale writer' });
    expect(await cp.commitLog.add(0, commit(0))).toBe(false);
    cp.stageProgress(7, { batchId: 7 });
    expect(await cp.commitLog.add(1, commit(1))).toBe(true);
    expect(await cp.readRecentProgress()).toEqual([{ batchId: 0, run: 'first' }]);
  });

  it('stores a deployed-size record compressed in the commit item, which stays under 1 KB (2 write units in the transaction), and reads it back whole', async () => {
    const cp = new DynamoDbCheckpoint({ client: aws.dynamodb, checkpointTable: CP, stateTable: STATE, queryName: `q-${randomUUID().slice(0, 8)}`, partitionId: 'shardId-000000000002' });
    const offset = (seq: string, first: string) => ({ shardId: 'shardId-000000000002', sequenceNumber: seq, firstSequenceNumber: first, recordCount: 1000 });
    const progress = {
      id: randomUUID(), runId: randomUUID(), name: 'hourly-sales-live', timestamp: '2026-12-05T01:32:01.206Z', batchId: 0, batchDuration: 54,
      numInputRows: 1000, inputRowsPerSecond: 8064.5161290322585, processedRowsPerSecond: 18518.51851851852,
      durationMs: { addBatch: 29, triggerExecution: 54 }, eventTime: { max: '2024-05-01T00:10:00.000Z', min: '2024-05-01T00:08:01.000Z', watermark: '2024-05-01T00:08:00.000Z' },
      batchWatermarkMs: 1714521480000,
      stateOperators: [{ operatorName: 'stateStoreSave', numRowsTotal: 3965, numRowsUpdated: 957, numRowsRemoved: 0, numRowsDroppedByWatermark: 0, numOutputRows: 3965, numShufflePartitions: 1, numStateStoreInstances: 1, customMetrics: {} }],
      sources: [{
        description: 'kinesis',
        startOffset: offset('49654839173946301839274610293847561029384756102938475610', '49654839173946301839274610293847561029384756102938471203'),
        endOffset: offset('49654839173946301839274610293847561029384756102938479934', '49654839173946301839274610293847561029384756102938475622'),
        numInputRows: 1000, inputRowsPerSecond: 8064.5161290322585, processedRowsPerSecond: 18518.51851851852,
      }],
      sink: { description: 'S3SnapshotSink[s3://hourly-sales-live-sink/complete-s3-snapshot/]', numOutputRows: 3965 },
      numDeadLetteredRows: 0, numRowsNullEventTime: 0,
      cost: { dynamoDbReadUnits: 4, dynamoDbWriteUnits: 10, s3Gets: 1, s3Puts: 2, stateBytesWritten: 9209, s3Lists: 1 },
    };
    expect(JSON.stringify(progress).length).toBeGreaterThan(1024);
    cp.stageProgress(0, progress);
    expect(await cp.commitLog.add(0, commit(0))).toBe(true);
    const items = await aws.dynamodb.send(new QueryCommand({
      TableName: CP, KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)', ExpressionAttributeValues: { ':pk': { S: cp.pk }, ':p': { S: 'commit#' } },
    }));
    expect(items.Items).toHaveLength(1);
    // The commit item with its record: 2 write units in the transaction, as the commit alone.
    expect(itemSize(items.Items![0]!)).toBeLessThan(1024);
    expect(await cp.readRecentProgress()).toEqual([progress]);
  });

  it('still reads a ring item of format 1 (the JSON as a string), written before an upgrade', async () => {
    const cp = new DynamoDbCheckpoint({ client: aws.dynamodb, checkpointTable: CP, stateTable: STATE, queryName: `q-${randomUUID().slice(0, 8)}`, partitionId: 'shardId-000000000003' });
    await aws.dynamodb.send(new PutItemCommand({
      TableName: CP,
      Item: { pk: { S: cp.pk }, sk: { S: 'progress#04' }, fmt: { N: '1' }, batchId: { N: '4' }, entry: { S: JSON.stringify({ batchId: 4, numInputRows: 12 }) } },
    }));
    expect(await cp.commitLog.add(0, commit(0))).toBe(true);
    cp.stageProgress(1, { batchId: 1, numInputRows: 7 });
    expect(await cp.commitLog.add(1, commit(1))).toBe(true);
    expect(await cp.readRecentProgress()).toEqual([{ batchId: 1, numInputRows: 7 }, { batchId: 4, numInputRows: 12 }]);
    // A ring item and a commit of the same batch: the commit's record.
    await aws.dynamodb.send(new PutItemCommand({
      TableName: CP,
      Item: { pk: { S: cp.pk }, sk: { S: 'progress#01' }, fmt: { N: '1' }, batchId: { N: '1' }, entry: { S: JSON.stringify({ batchId: 1, numInputRows: 99 }) } },
    }));
    expect(await cp.readRecentProgress()).toEqual([{ batchId: 1, numInputRows: 7 }, { batchId: 4, numInputRows: 12 }]);
  });
});
