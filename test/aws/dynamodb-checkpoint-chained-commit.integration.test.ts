/**
 * The watermark row records the commit it was written with, so the next commit's row Update proves
 * commit N-1 instead of a ConditionCheck of its own (2 write units less per batch); every refusal
 * the ConditionCheck gave still happens: a gap, a commit that exists, a row that disagrees.
 */
import { randomUUID } from 'node:crypto';
import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AwsClients } from '../../lib/aws/clients.js';
import { DynamoDbCheckpoint } from '../../lib/aws/dynamodb-checkpoint.js';
import { DynamoDbWatermarkCoordinator } from '../../lib/aws/dynamodb-watermarks.js';
import { fenceUnfencedWriters } from '../../lib/aws/query-namespace.js';
import { CHECKPOINT_FORMAT_VERSION, type CommitEntry } from '../../lib/checkpoint/checkpoint.js';
import { CostMeter } from '../../lib/core/cost-meter.js';
import { checkpointTablesForFile } from '../support/checkpoint-tables.js';

const tables = checkpointTablesForFile('sluice-chained-commit-test');
const CP = tables.checkpointTable;
const STATE = tables.stateTable;
const SHARD = 'shardId-000000000000';
let aws: AwsClients;
beforeAll(() => { aws = tables.aws; });

const entry = (batchId: number): CommitEntry => ({ formatVersion: CHECKPOINT_FORMAT_VERSION, batchId, nextBatchWatermarkMs: batchId * 10 });

/** A query's checkpoint and coordinator on one partition, the transactions' item kinds recorded. */
function partition(query = `q-${randomUUID().slice(0, 8)}`) {
  const meter = new CostMeter();
  const checkpoint = new DynamoDbCheckpoint({ client: aws.dynamodb, checkpointTable: CP, stateTable: STATE, queryName: query, partitionId: SHARD, meter });
  const watermarks = new DynamoDbWatermarkCoordinator({ client: aws.dynamodb, checkpointTable: CP, queryName: query, idleTimeoutMs: 60_000, meter });
  /** Commits batch N as an invocation does: prefetch the rows, then the commit with the row folded in. */
  const commit = async (batchId: number, prefetch = true): Promise<boolean> => {
    if (prefetch) watermarks.prefetch(SHARD);
    return checkpoint.commitLog.addWithSideWrites!(batchId, entry(batchId), [watermarks.publishWithCommit(SHARD, batchId * 10, batchId, true)]);
  };
  return { query, meter, checkpoint, watermarks, commit };
}

/** The kinds of the items of every transaction sent while `run` runs (C: ConditionCheck, P: Put, U: Update). */
async function transactions(run: () => Promise<unknown>): Promise<string[]> {
  const sent: string[] = [];
  const name = `record-${randomUUID()}`;
  aws.dynamodb.middlewareStack.add((next) => async (args) => {
    const items = (args.input as { TransactItems?: Record<string, unknown>[] }).TransactItems;
    if (items) sent.push(items.map((i) => (i.ConditionCheck ? 'C' : i.Put ? 'P' : i.Update ? 'U' : '?')).join(''));
    return next(args);
  }, { step: 'initialize', name });
  try {
    await run();
  } finally {
    aws.dynamodb.middlewareStack.remove(name);
  }
  return sent;
}

describe('commits chained through the watermark row', () => {
  it('the row records each commit and proves commit N-1 to the next: no ConditionCheck, 4 write units instead of 6', async () => {
    const p = partition();
    const sent = await transactions(async () => {
      for (let b = 0; b < 5; b++) expect(await p.commit(b)).toBe(true);
    });
    // Batch 0 checks only that no replay pointer exists (the fence of writers that read none) and
    // records itself on the row; each later batch finds N-1 there.
    expect(sent).toEqual(['PCU', 'PU', 'PU', 'PU', 'PU']);
    const row = (await p.watermarks.list()).find((r) => r.partitionId === SHARD);
    expect(row?.commit).toEqual({ pk: p.checkpoint.pk, batchId: 4 });
    expect(row?.watermarkMs).toBe(40);
    // Within one invocation (one prefetch), the row's own publication is known too.
    const warm = await transactions(async () => {
      p.watermarks.prefetch(SHARD);
      for (let b = 5; b < 8; b++) expect(await p.commit(b, false)).toBe(true);
    });
    expect(warm).toEqual(['PU', 'PU', 'PU']);
    const meter = new CostMeter();
    const metered = new DynamoDbCheckpoint({ ...p.checkpoint.options, meter });
    p.watermarks.prefetch(SHARD);
    expect(await metered.commitLog.addWithSideWrites!(8, entry(8), [p.watermarks.publishWithCommit(SHARD, 80, 8, true)])).toBe(true);
    expect(meter.snapshot().dynamoDbWriteUnits).toBe(4);
  });

  it('refuses a gap and a commit that exists, as the ConditionCheck did', async () => {
    const p = partition();
    // Commits and a row written before this version (no commit recorded on the row): the first
    // commit after the upgrade checks commit N-1 as before, and records itself for the next.
    for (let b = 0; b < 2; b++) {
      expect(await p.checkpoint.commitLog.add(b, entry(b))).toBe(true);
      await p.watermarks.publish(SHARD, b * 10, b, true);
    }
    expect(await transactions(async () => {
      for (let b = 2; b < 4; b++) expect(await p.commit(b)).toBe(true);
    })).toEqual(['CPU', 'PU']);
    // Batch 3 again: commit 3 exists.
    expect(await p.commit(3)).toBe(false);
    // Batch 5 with 4 never committed: the row (at 3) proves nothing, the ConditionCheck refuses.
    await expect(p.commit(5)).rejects.toMatchObject({ code: 'COMMIT_LOG_GAP' });
    expect((await p.checkpoint.commitLog.getLatest())?.[0]).toBe(3);
  });

  it('a row that no longer holds commit N-1 (moved after the prefetch) is not trusted: the commit retries with the ConditionCheck', async () => {
    const p = partition();
    for (let b = 0; b < 3; b++) expect(await p.commit(b)).toBe(true);
    p.watermarks.prefetch(SHARD);
    await p.watermarks.combine(SHARD, 0); // the prefetched rows are in
    await aws.dynamodb.send(new UpdateItemCommand({
      TableName: CP, Key: { pk: { S: p.watermarks.pk }, sk: { S: SHARD } },
      UpdateExpression: 'SET committedBatchId = :x', ExpressionAttributeValues: { ':x': { N: '99' } },
    }));
    const sent = await transactions(async () => expect(await p.commit(3, false)).toBe(true));
    expect(sent).toEqual(['PU', 'CPU']);
    expect((await p.watermarks.list())[0]?.commit?.batchId).toBe(3);
    // Another query's commits on a row with the same partition id prove nothing for this one.
    const other = partition();
    await aws.dynamodb.send(new UpdateItemCommand({
      TableName: CP, Key: { pk: { S: other.watermarks.pk }, sk: { S: SHARD } },
      UpdateExpression: 'SET commitPk = :pk, committedBatchId = :b, batchId = :b', ExpressionAttributeValues: { ':pk': { S: p.checkpoint.pk }, ':b': { N: '0' } },
    }));
    await expect(other.commit(1)).rejects.toMatchObject({ code: 'COMMIT_LOG_GAP' });
  });

  it('a publish outside a commit records no commit on the row', async () => {
    const p = partition();
    expect(await p.commit(0)).toBe(true);
    await p.watermarks.publish(SHARD, 99, 5, true);
    const row = (await p.watermarks.list())[0];
    expect(row?.batchId).toBe(5);
    expect(row?.commit).toEqual({ pk: p.checkpoint.pk, batchId: 0 });
  });

  it('a writer that read no replay pointer is refused once replay start marked its row, though the row would prove N-1', async () => {
    const p = partition();
    for (let b = 0; b < 3; b++) expect(await p.commit(b)).toBe(true);
    expect(await fenceUnfencedWriters(aws.dynamodb, CP, p.query, [SHARD], 'run-1')).toBe(1);
    // Its prefetched row holds commit 2: without the row's mark the proof would let batch 3 through.
    const sent: string[] = [];
    const outcome = await transactions(async () => p.commit(3).catch((error: unknown) => sent.push((error as { code?: string }).code ?? String(error))));
    expect(sent).toEqual(['NAMESPACE_RETIRED']);
    expect(outcome).toEqual(['PU', 'CPU']);
    expect(await p.checkpoint.commitLog.get(3)).toBeUndefined();
  });
});
