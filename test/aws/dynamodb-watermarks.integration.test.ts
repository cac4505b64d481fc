import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { DynamoDbWatermarkCoordinator } from '../../lib/aws/dynamodb-watermarks.js';
import { ensureTables } from '../../lib/aws/tables.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { deleteResources } from '../support/cleanup.js';
import { CostMeter } from '../../lib/core/cost-meter.js';
import { DynamoDbCheckpoint } from '../../lib/aws/dynamodb-checkpoint.js';
import { CHECKPOINT_FORMAT_VERSION } from '../../lib/checkpoint/checkpoint.js';

let emu: EmulatorSet;
let aws: AwsClients;
let client: DynamoDBClient;
const CP = 'sluice-watermarks-test';

beforeAll(async () => {
  emu = await startEmulators({ kinesis: false, s3: false });
  aws = createAwsClients(emu.clientOptions);
  client = aws.dynamodb;
  await ensureTables(client, { checkpointTable: CP, stateTable: CP });
});

afterAll(async () => {
  if (aws) await deleteResources(aws, { tables: [CP] });
  aws?.destroy();
  await emu?.stop();
});

const IDLE_MS = 60_000;

function coordinator(clock: { now: number }, meter?: CostMeter, queryName = `q-${randomUUID().slice(0, 8)}`): DynamoDbWatermarkCoordinator {
  return new DynamoDbWatermarkCoordinator({ client, checkpointTable: CP, queryName, idleTimeoutMs: IDLE_MS, now: () => clock.now, ...(meter ? { meter } : {}) });
}

describe('DynamoDbWatermarkCoordinator', () => {
  it('combines to the minimum over the live partitions; the caller uses its own local watermark', async () => {
    const clock = { now: 1_000_000 };
    const meter = new CostMeter();
    const wm = coordinator(clock, meter);
    expect(await wm.combine('p0', 500)).toBe(500); // alone
    await wm.publish('p0', 100, 0, true);
    await wm.publish('p1', 50, 3, true);
    await wm.publish('p2', 200, 7, true);
    expect(await wm.combine('p0', 120)).toBe(50);
    expect(await wm.combine('p1', 60)).toBe(60);
    expect(await wm.combine('p3', 300)).toBe(50);
    expect(meter.snapshot().dynamoDbWriteUnits).toBe(3);
    expect(meter.snapshot().dynamoDbReadUnits).toBeGreaterThanOrEqual(3); // DynamoDB Local reports 0 for an empty Query
    const rows = await wm.list();
    expect(rows.map((r) => [r.partitionId, r.watermarkMs, r.batchId, r.idle, r.lastDataAtMs])).toEqual([
      ['p0', 100, 0, false, 1_000_000], ['p1', 50, 3, false, 1_000_000], ['p2', 200, 7, false, 1_000_000],
    ]);
  });

  it('leaves out a partition confirmed caught up and quiet for idleTimeoutMs, until it has data again', async () => {
    const clock = { now: 1_000_000 };
    const wm = coordinator(clock);
    await wm.publish('p0', 100, 0, true);
    await wm.publish('p1', 50, 0, true);
    // Caught up, but it had data just now: not idle yet.
    clock.now += IDLE_MS / 2;
    expect(await wm.confirmCaughtUp('p1', clock.now)).toBe(false);
    expect(await wm.combine('p0', 120)).toBe(50);
    expect((await wm.list()).find((r) => r.partitionId === 'p1')?.caughtUpAtMs).toBe(clock.now);
    // A no-data batch does not reset the quiet time.
    await wm.publish('p1', 50, 1, false);
    clock.now += IDLE_MS / 2;
    expect(await wm.confirmCaughtUp('p1', clock.now)).toBe(true);
    expect(await wm.combine('p0', 120)).toBe(120);
    // Another no-data batch keeps it idle; a batch with data makes it live again.
    await wm.publish('p1', 50, 2, false);
    expect(await wm.combine('p0', 120)).toBe(120);
    await wm.publish('p1', 70, 3, true);
    expect(await wm.combine('p0', 120)).toBe(70);
    const p1 = (await wm.list()).find((r) => r.partitionId === 'p1')!;
    expect(p1.idle).toBe(false);
    expect(p1.caughtUpAtMs).toBeUndefined();
    // A partition that never published is not created by confirmCaughtUp.
    expect(await wm.confirmCaughtUp('p9', clock.now + 10 * IDLE_MS)).toBe(false);
    expect((await wm.list()).map((r) => r.partitionId)).toEqual(['p0', 'p1']);
  });

  it('never moves a partition back: a stale publish (lower batch id) is ignored', async () => {
    const clock = { now: 1_000_000 };
    const wm = coordinator(clock);
    await wm.publish('p0', 300, 5, true);
    await wm.publish('p0', 100, 4, true);
    await wm.publish('p0', 90, 0, true);
    expect((await wm.list())[0]).toMatchObject({ partitionId: 'p0', watermarkMs: 300, batchId: 5 });
    // The same batch published again (a re-run) is accepted.
    await wm.publish('p0', 300, 5, true);
    await wm.publish('p0', 400, 6, false);
    expect((await wm.list())[0]).toMatchObject({ watermarkMs: 400, batchId: 6 });
    // Two coordinators racing: the higher batch id wins whatever the order.
    const other = coordinator(clock, undefined, wm.pk.replace(/#watermarks$/, ''));
    await Promise.all([wm.publish('p0', 800, 8, true), other.publish('p0', 700, 7, true)]);
    expect((await wm.list())[0]).toMatchObject({ watermarkMs: 800, batchId: 8 });
  });

  it('leaves out a partition closed by a reshard', async () => {
    const clock = { now: 1_000_000 };
    const wm = coordinator(clock);
    await wm.publish('parent', 10, 9, true);
    await wm.publish('child', 500, 0, true);
    expect(await wm.combine('child', 500)).toBe(10);
    await wm.markClosed('parent');
    expect(await wm.combine('child', 500)).toBe(500);
    // A late publish of the closed parent does not bring it back.
    await wm.publish('parent', 20, 10, true);
    expect(await wm.combine('child', 500)).toBe(500);
    expect((await wm.list()).find((r) => r.partitionId === 'parent')).toMatchObject({ closed: true, idle: true, watermarkMs: 20 });
  });

  describe('published in the commit transaction', () => {
    const commitEntry = (batchId: number) => ({ formatVersion: CHECKPOINT_FORMAT_VERSION, batchId, nextBatchWatermarkMs: batchId * 100 });
    function pair(clock: { now: number }) {
      const wm = coordinator(clock);
      const queryName = wm.pk.replace(/#watermarks$/, '');
      const cp = new DynamoDbCheckpoint({ client, checkpointTable: CP, stateTable: CP, queryName, partitionId: 'p0', stateCache: null });
      return { wm, cp };
    }

    it('writes the row with the commit, and not at all when the commit is refused', async () => {
      const clock = { now: 1_000_000 };
      const { wm, cp } = pair(clock);
      expect(await cp.commitLog.addWithSideWrites!(0, commitEntry(0), [wm.publishWithCommit('p0', 100, 0, true)])).toBe(true);
      expect(await wm.list()).toMatchObject([{ partitionId: 'p0', watermarkMs: 100, batchId: 0, idle: false }]);
      // Commit 0 exists: the whole transaction is refused, the row keeps batch 0's watermark.
      expect(await cp.commitLog.addWithSideWrites!(0, commitEntry(0), [wm.publishWithCommit('p0', 999, 0, true)])).toBe(false);
      expect((await wm.list())[0]).toMatchObject({ watermarkMs: 100, batchId: 0 });
      // A gap in the commit log is refused as before, and writes no row either.
      await expect(cp.commitLog.addWithSideWrites!(2, commitEntry(2), [wm.publishWithCommit('p0', 300, 2, true)])).rejects.toMatchObject({ code: 'COMMIT_LOG_GAP' });
      expect((await wm.list())[0]).toMatchObject({ watermarkMs: 100, batchId: 0 });
    });

    it('a row already at a later batch is left alone and the commit still succeeds (a stale publish is dropped)', async () => {
      const clock = { now: 1_000_000 };
      const { wm, cp } = pair(clock);
      await wm.publish('p0', 500, 7, true);
      expect(await cp.commitLog.addWithSideWrites!(0, commitEntry(0), [wm.publishWithCommit('p0', 100, 0, true)])).toBe(true);
      expect(await cp.commitLog.getLatest()).toEqual([0, commitEntry(0)]);
      expect((await wm.list())[0]).toMatchObject({ watermarkMs: 500, batchId: 7 });
    });

    it('combine after prefetch reads once and sees this partition\'s own commits', async () => {
      const clock = { now: 1_000_000 };
      const meter = new CostMeter();
      const queryName = `q-${randomUUID().slice(0, 8)}`;
      const wm = new DynamoDbWatermarkCoordinator({ client, checkpointTable: CP, queryName, idleTimeoutMs: IDLE_MS, now: () => clock.now, meter });
      await wm.publish('p0', 100, 0, true);
      await wm.publish('p1', 400, 0, true);
      const cp = new DynamoDbCheckpoint({ client, checkpointTable: CP, stateTable: CP, queryName, partitionId: 'p1', stateCache: null });
      wm.prefetch('p1');
      const readsBefore = meter.snapshot().dynamoDbReadUnits ?? 0;
      expect(await wm.combine('p1', 400)).toBe(100);
      // Another partition (another container) moves on after the prefetch.
      await coordinator(clock, undefined, queryName).publish('p0', 300, 1, true);
      expect(await cp.commitLog.addWithSideWrites!(0, commitEntry(0), [wm.publishWithCommit('p1', 450, 0, true)])).toBe(true);
      // The prefetched reading (p0 at 100) with p1's own commit applied; one Query in all.
      expect(await wm.combine('p1', 450)).toBe(100);
      expect((meter.snapshot().dynamoDbReadUnits ?? 0) - readsBefore).toBeLessThanOrEqual(1);
      // Without a prefetch for this partition, combine reads afresh.
      expect(await wm.combine('p0', 300)).toBe(300);
    });
  });
});
