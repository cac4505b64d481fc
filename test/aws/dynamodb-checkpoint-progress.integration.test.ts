/**
 * The ring of recent progress records in the checkpoint table: batch N's record rides in commit N's
 * transaction (no request of its own), the ring keeps the last PROGRESS_RECORDS.keep batches, each
 * item has its TTL, and a commit that is refused writes no record.
 */
import { randomUUID } from 'node:crypto';
import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { DynamoDbCheckpoint } from '../../lib/aws/dynamodb-checkpoint.js';
import { ensureTables } from '../../lib/aws/tables.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { CHECKPOINT_FORMAT_VERSION } from '../../lib/checkpoint/checkpoint.js';
import { PROGRESS_RECORDS } from '../../lib/runtime/runtime-config.js';
import { deleteResources } from '../support/cleanup.js';

let emu: EmulatorSet;
let aws: AwsClients;
const CP = 'sluice-progress-ring-test';
const STATE = 'sluice-progress-ring-test-state';

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

const commit = (batchId: number) => ({ formatVersion: CHECKPOINT_FORMAT_VERSION, batchId, nextBatchWatermarkMs: batchId * 10 });

describe('progress ring in the checkpoint table', () => {
  it('keeps the last 20 batches\' records, written inside the commit transaction, with a TTL', async () => {
    const cp = new DynamoDbCheckpoint({ client: aws.dynamodb, checkpointTable: CP, stateTable: STATE, queryName: `q-${randomUUID().slice(0, 8)}`, partitionId: 'shardId-000000000000' });
    const total = PROGRESS_RECORDS.keep + 5;
    const sent: string[] = [];
    aws.dynamodb.middlewareStack.add((next, context) => async (args) => {
      sent.push(context.commandName ?? '?');
      return next(args);
    }, { step: 'initialize', name: 'countRequests' });
    for (let b = 0; b < total; b++) {
      cp.stageProgress(b, { batchId: b, numInputRows: b * 3 });
      expect(await cp.commitLog.add(b, commit(b))).toBe(true);
    }
    // One request per commit: the record adds none.
    aws.dynamodb.middlewareStack.remove('countRequests');
    expect(sent).toEqual(Array(total).fill('TransactWriteItemsCommand'));
    const ring = await cp.readRecentProgress<{ batchId: number; numInputRows: number }>();
    expect(ring.map((p) => p.batchId)).toEqual(Array.from({ length: PROGRESS_RECORDS.keep }, (_, i) => total - PROGRESS_RECORDS.keep + i));
    expect(ring.at(-1)).toEqual({ batchId: total - 1, numInputRows: (total - 1) * 3 });
    const items = await aws.dynamodb.send(new QueryCommand({
      TableName: CP, KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)', ExpressionAttributeValues: { ':pk': { S: cp.pk }, ':p': { S: 'progress#' } },
    }));
    const now = Date.now() / 1000;
    for (const item of items.Items ?? []) {
      const expires = Number(item[PROGRESS_RECORDS.ttlAttribute]?.N);
      expect(expires).toBeGreaterThan(now + PROGRESS_RECORDS.ttlSeconds - 120);
      expect(expires).toBeLessThan(now + PROGRESS_RECORDS.ttlSeconds + 1);
    }
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
});
