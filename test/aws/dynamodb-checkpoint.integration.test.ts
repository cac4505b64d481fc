import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateTableCommand, PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { DynamoDbCheckpoint, type DynamoDbCheckpointOptions } from '../../lib/aws/dynamodb-checkpoint.js';
import { CHECKPOINT_TABLE_KEYS, ensureTables, tableDefinition } from '../../lib/aws/tables.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { deleteResources } from '../support/cleanup.js';
import { CHECKPOINT_FORMAT_VERSION, type CommitEntry, type OffsetSeq, type QueryMetadata } from '../../lib/checkpoint/checkpoint.js';
import { CheckpointError } from '../../lib/errors/sluice-error.js';
import { CostMeter } from '../../lib/core/cost-meter.js';

let emu: EmulatorSet;
let aws: AwsClients;
let client: DynamoDBClient;
const CP = 'sluice-checkpoint-test';
const STATE = 'sluice-checkpoint-test-state';

beforeAll(async () => {
  emu = await startEmulators({ kinesis: false, s3: false });
  aws = createAwsClients(emu.clientOptions);
  client = aws.dynamodb;
  await ensureTables(client, { checkpointTable: CP, stateTable: STATE, sinkTable: 'sluice-checkpoint-test-sink' });
});

afterAll(async () => {
  if (aws) await deleteResources(aws, { tables: [CP, STATE, 'sluice-checkpoint-test-sink', 'sluice-wrong-keys'] });
  aws?.destroy();
  await emu?.stop();
});

function checkpoint(overrides: Partial<DynamoDbCheckpointOptions> = {}): DynamoDbCheckpoint {
  return new DynamoDbCheckpoint({ client, checkpointTable: CP, stateTable: STATE, queryName: `q-${randomUUID().slice(0, 8)}`, partitionId: 'shardId-000000000000', ...overrides });
}

const offsets = (batchId: number, end: number): OffsetSeq => ({
  formatVersion: CHECKPOINT_FORMAT_VERSION, batchId, offsets: { kinesis: { seq: String(end) }, memory: null },
  batchWatermarkMs: batchId * 1000, batchTimestampMs: 1_714_572_000_000 + batchId, conf: { 'spark.sql.streaming.multipleWatermarkPolicy': 'min' },
});
const commit = (batchId: number): CommitEntry => ({ formatVersion: CHECKPOINT_FORMAT_VERSION, batchId, nextBatchWatermarkMs: batchId * 1000 + 500 });

describe('ensureTables', () => {
  it('is idempotent and refuses a table with other keys', async () => {
    await ensureTables(client, { checkpointTable: CP, stateTable: STATE });
    await client.send(new CreateTableCommand(tableDefinition('sluice-wrong-keys', { partitionKey: 'id' })));
    await expect(ensureTables(client, { checkpointTable: 'sluice-wrong-keys', stateTable: STATE })).rejects.toMatchObject({ code: 'TABLE_KEYS_MISMATCH' });
    expect(tableDefinition('x', CHECKPOINT_TABLE_KEYS).KeySchema).toEqual([{ AttributeName: 'pk', KeyType: 'HASH' }, { AttributeName: 'sk', KeyType: 'RANGE' }]);
  });
});

describe('DynamoDbCheckpoint logs', () => {
  it('offset log: add refuses an existing batch, get/getLatest read back, purge removes older entries', async () => {
    const cp = checkpoint();
    expect(await cp.offsetLog.getLatest()).toBeUndefined();
    expect(await cp.offsetLog.get(0)).toBeUndefined();
    expect(await cp.offsetLog.add(0, offsets(0, 10))).toBe(true);
    expect(await cp.offsetLog.add(0, offsets(0, 99))).toBe(false);
    expect(await cp.offsetLog.get(0)).toEqual(offsets(0, 10));
    for (let b = 1; b <= 11; b++) expect(await cp.offsetLog.add(b, offsets(b, 10 + b))).toBe(true);
    expect(await cp.offsetLog.getLatest()).toEqual([11, offsets(11, 21)]);
    await cp.offsetLog.purge(10);
    expect(await cp.offsetLog.get(9)).toBeUndefined();
    expect(await cp.offsetLog.get(10)).toEqual(offsets(10, 20));
    expect(await cp.offsetLog.getLatest()).toEqual([11, offsets(11, 21)]);
    // The commit log is a separate sequence in the same item collection.
    expect(await cp.commitLog.getLatest()).toBeUndefined();
  });

  it('commit log: commit N requires commit N-1 and never overwrites', async () => {
    const cp = checkpoint();
    await expect(cp.commitLog.add(1, commit(1))).rejects.toThrow(CheckpointError);
    await expect(cp.commitLog.add(1, commit(1))).rejects.toMatchObject({ code: 'COMMIT_LOG_GAP' });
    await expect(cp.commitLog.add(1, commit(1))).rejects.toThrow(/batch 0 is not in the commit log/);
    expect(await cp.commitLog.add(0, commit(0))).toBe(true);
    expect(await cp.commitLog.add(0, { ...commit(0), nextBatchWatermarkMs: 1 })).toBe(false);
    expect(await cp.commitLog.add(1, commit(1))).toBe(true);
    expect(await cp.commitLog.add(1, commit(1))).toBe(false);
    await expect(cp.commitLog.add(3, commit(3))).rejects.toMatchObject({ code: 'COMMIT_LOG_GAP' });
    expect(await cp.commitLog.getLatest()).toEqual([1, commit(1)]);
    expect(await cp.commitLog.get(0)).toEqual(commit(0));
  });

  it('a new instance on the same partition sees the same logs', async () => {
    const cp = checkpoint();
    await cp.offsetLog.add(0, offsets(0, 5));
    await cp.commitLog.add(0, commit(0));
    await cp.offsetLog.add(1, offsets(1, 6));
    const again = checkpoint({ queryName: cp.options.queryName });
    expect(await again.offsetLog.getLatest()).toEqual([1, offsets(1, 6)]);
    expect(await again.commitLog.getLatest()).toEqual([0, commit(0)]);
    // Another partition of the same query is another checkpoint.
    const other = checkpoint({ queryName: cp.options.queryName, partitionId: 'shardId-000000000001' });
    expect(await other.offsetLog.getLatest()).toBeUndefined();
  });

  it('concurrent writers on one partition: exactly one wins every planned and every committed batch', async () => {
    const name = `q-${randomUUID().slice(0, 8)}`;
    const writers = [0, 1, 2, 3].map(() => checkpoint({ queryName: name }));
    for (let b = 0; b < 8; b++) {
      const planned = await Promise.all(writers.map((w, i) => w.offsetLog.add(b, offsets(b, 1000 * i + b))));
      expect(planned.filter(Boolean)).toHaveLength(1);
      const winner = planned.indexOf(true);
      expect(await writers[(winner + 1) % 4]!.offsetLog.get(b)).toEqual(offsets(b, 1000 * winner + b));
      const committed = await Promise.all(writers.map((w) => w.commitLog.add(b, commit(b))));
      expect(committed.filter(Boolean)).toHaveLength(1);
    }
    expect(await writers[0]!.commitLog.getLatest()).toEqual([7, commit(7)]);
  });

  it('query metadata: written once; the same metadata again is accepted, other metadata is refused', async () => {
    const cp = checkpoint();
    const meta: QueryMetadata = {
      formatVersion: CHECKPOINT_FORMAT_VERSION, queryId: randomUUID(),
      fingerprint: { outputMode: 'append', sink: 'MemorySink', sources: ['memory'], statefulOperators: [{ operatorId: 0, kind: 'aggregate', stateSchema: 's' }] },
    };
    expect(await cp.readQueryMetadata()).toBeUndefined();
    await cp.writeQueryMetadata(meta);
    await cp.writeQueryMetadata(meta);
    expect(await checkpoint({ queryName: cp.options.queryName }).readQueryMetadata()).toEqual(meta);
    await expect(cp.writeQueryMetadata({ ...meta, queryId: randomUUID() })).rejects.toMatchObject({ code: 'CONCURRENT_QUERY' });
  });

  it('refuses entries written by a newer format', async () => {
    const cp = checkpoint();
    await client.send(new PutItemCommand({
      TableName: CP, Item: { pk: { S: cp.pk }, sk: { S: 'offset#000000000000' }, fmt: { N: '99' }, batchId: { N: '0' }, entry: { S: '{}' } },
    }));
    await expect(cp.offsetLog.getLatest()).rejects.toMatchObject({ code: 'CHECKPOINT_FORMAT_TOO_NEW' });
  });

  it('meters every request on the CostMeter', async () => {
    const meter = new CostMeter();
    const cp = checkpoint({ meter });
    await cp.offsetLog.add(0, offsets(0, 1));
    const afterPut = meter.snapshot();
    expect(afterPut.dynamoDbWriteUnits).toBe(1);
    await cp.offsetLog.add(0, offsets(0, 1)); // refused: AWS charges it all the same
    await cp.commitLog.add(0, commit(0));
    await cp.commitLog.add(1, commit(1)).catch(() => undefined);
    await cp.offsetLog.get(0);
    await cp.commitLog.getLatest();
    const total = meter.snapshot();
    expect(total.dynamoDbWriteUnits).toBeGreaterThanOrEqual(4);
    expect(total.dynamoDbReadUnits).toBeGreaterThanOrEqual(2);
  });
});
