/**
 * Real queries on the engine with DynamoDbCheckpoint as their checkpoint: the answers must be
 * those of the memory checkpoint, across restarts on new checkpoint instances (with the process
 * cache warm, and cold), and across a crash between the state commit and the commit log.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SluiceSession } from '../../lib/api/session.js';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { DynamoDbCheckpoint } from '../../lib/aws/dynamodb-checkpoint.js';
import { sharedStateCache } from '../../lib/aws/dynamodb-state-store.js';
import { ensureTables } from '../../lib/aws/tables.js';
import type { Checkpoint, CommitEntry, MetadataLog } from '../../lib/checkpoint/checkpoint.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import type { OutputMode } from '../../lib/core/output-mode.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { deleteResources } from '../support/cleanup.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { CostMeter } from '../../lib/core/cost-meter.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';

let emu: EmulatorSet;
let aws: AwsClients;
let client: DynamoDBClient;
const CP = 'sluice-engine-test-cp';
const STATE = 'sluice-engine-test-state';

beforeAll(async () => {
  emu = await startEmulators({ kinesis: false, s3: false });
  aws = createAwsClients(emu.clientOptions);
  client = aws.dynamodb;
  await ensureTables(client, { checkpointTable: CP, stateTable: STATE });
});

afterAll(async () => {
  if (aws) await deleteResources(aws, { tables: [CP, STATE] });
  aws?.destroy();
  await emu?.stop();
});

const at = (hhmm: string): number => parseTimestamp(`2024-05-01 ${hhmm}:00`)!;
const hour = (h: number): { start: number; end: number } => ({ start: at(`${h}:00`), end: at(`${h + 1}:00`) });

/** Seed 003: hourly revenue (and order count) with a 15-minute watermark. */
function hourlyRevenue() {
  const { stream, df } = new SluiceSession().memoryStream('amount long, ts timestamp');
  const revenue = df
    .withWatermark('ts', '15 minutes')
    .groupBy(window(col('ts'), '1 hour'))
    .agg(sum('amount').as('revenue'), count().as('orders'));
  return { stream, revenue };
}

/** The data, in rounds; the query is stopped and restarted (new checkpoint instance) after some. */
const ROUNDS: unknown[][][] = [
  [[15, at('14:40')], [10, at('14:30')], [30, at('15:10')]],
  [[20, at('15:20')]],
  [[99, at('14:50')], [5, at('15:40')], [7, at('16:10')]], // 14:50 is behind the watermark (15:05)
  [[1, at('17:30')], [2, at('16:59')]],
  [[3, at('18:20')]],
  [[4, at('18:21')], [8, at('19:45')]],
  [[6, at('21:00')]],
];

interface RunOptions {
  readonly mode: OutputMode;
  readonly checkpoint: () => Checkpoint;
  /** Restart (stop, new checkpoint instance) after these rounds. */
  readonly restartAfter?: readonly number[];
  /** Before each restart. */
  readonly beforeRestart?: () => void;
}

interface RunResult {
  batches: { batchId: number; rows: unknown[][] }[];
  watermarks: string[];
}

async function run(options: RunOptions): Promise<RunResult> {
  const { stream, revenue } = hourlyRevenue();
  const sink = new MemorySink();
  const batches: RunResult['batches'] = [];
  const watermarks: string[] = [];
  const start = () => revenue.writeStream.outputMode(options.mode).sink(sink).checkpoint(options.checkpoint()).start();
  let query = await start();
  let seen = -1;
  for (const [i, rows] of ROUNDS.entries()) {
    stream.addData(rows);
    await query.processAllAvailable();
    for (const p of query.recentProgress) if (p.batchId > seen) watermarks.push(`${p.batchId}:${p.eventTime.watermark}`);
    seen = query.lastProgress?.batchId ?? seen;
    if (options.restartAfter?.includes(i)) {
      await query.stop();
      options.beforeRestart?.();
      query = await start();
    }
  }
  await query.stop();
  for (let b = 0; b <= sink.latestBatchId; b++) {
    const rows = sink.rowsAfter(b - 1).length - sink.rowsAfter(b).length;
    if (rows >= 0) batches.push({ batchId: b, rows: sink.rowsAfter(b - 1).slice(0, rows).map((r) => [...r]).sort(byJson) });
  }
  return { batches, watermarks: [...new Set(watermarks)] };
}

const byJson = (a: unknown, b: unknown): number => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1);

function dynamo(queryName: string, extra: { snapshotEvery?: number; meter?: CostMeter } = {}): () => DynamoDbCheckpoint {
  return () => new DynamoDbCheckpoint({ client, checkpointTable: CP, stateTable: STATE, queryName, partitionId: 'shardId-000000000000', ...extra });
}

const newName = (): string => `revenue-${randomUUID().slice(0, 8)}`;

describe('seed 003 on DynamoDbCheckpoint', () => {
  for (const mode of ['append', 'update', 'complete'] as const) {
    it(`${mode}: same answers as the memory checkpoint, across restarts on new checkpoint instances`, async () => {
      const memoryCheckpoint = new MemoryCheckpoint();
      const expected = await run({ mode, checkpoint: () => memoryCheckpoint, restartAfter: [1, 3] });
      const warm = await run({ mode, checkpoint: dynamo(newName(), { snapshotEvery: 3 }), restartAfter: [1, 3] });
      const cold = await run({ mode, checkpoint: dynamo(newName(), { snapshotEvery: 3 }), restartAfter: [1, 3, 4], beforeRestart: () => sharedStateCache.clear() });
      expect(warm).toEqual(expected);
      expect(cold).toEqual(expected);
      expect(expected.batches.length).toBeGreaterThanOrEqual(7);
    });
  }

  it('append: the seed\'s answer, with the late row dropped', async () => {
    const result = await run({ mode: 'append', checkpoint: dynamo(newName()), restartAfter: [2], beforeRestart: () => sharedStateCache.clear() });
    const all = result.batches.flatMap((b) => b.rows);
    expect(all).toContainEqual([hour(14), 25, 2]);
    expect(all).toContainEqual([hour(15), 55, 3]);
    expect(all).toContainEqual([hour(16), 9, 2]);
    expect(all).toContainEqual([hour(17), 1, 1]);
  });

  it('a crash between the state commit and the commit log: the batch re-runs and nothing is counted twice', async () => {
    const name = newName();
    const base = dynamo(name, { snapshotEvery: 2 });
    let failOnce = 3;
    /** Fails commit-log writes of batch 3 once: the state of version 4 is already written then. */
    const crashing = (): Checkpoint => {
      const cp = base();
      const commitLog: MetadataLog<CommitEntry> = {
        add: async (batchId, entry) => {
          if (batchId === failOnce) {
            failOnce = -1;
            throw new Error('simulated crash before the commit log write');
          }
          return cp.commitLog.add(batchId, entry);
        },
        get: (b) => cp.commitLog.get(b),
        getLatest: () => cp.commitLog.getLatest(),
        purge: (b) => cp.commitLog.purge(b),
      };
      return { offsetLog: cp.offsetLog, commitLog, stateStore: cp.stateStore, readQueryMetadata: () => cp.readQueryMetadata(), writeQueryMetadata: (m) => cp.writeQueryMetadata(m) };
    };
    const memoryCheckpoint = new MemoryCheckpoint();
    const expected = await run({ mode: 'update', checkpoint: () => memoryCheckpoint });

    const { stream, revenue } = hourlyRevenue();
    const sink = new MemorySink();
    let query = await revenue.writeStream.outputMode('update').sink(sink).checkpoint(crashing()).start();
    let crashed = false;
    for (const rows of ROUNDS) {
      stream.addData(rows);
      try {
        await query.processAllAvailable();
      } catch (error) {
        expect((error as Error).message).toMatch(/simulated crash/);
        crashed = true;
        // A new process: the cache holds version 4 of a batch that did not commit.
        query = await revenue.writeStream.outputMode('update').sink(new MemorySink()).checkpoint(crashing()).start();
        await query.processAllAvailable();
      }
    }
    await query.stop();
    expect(crashed).toBe(true);
    const verify = base();
    expect((await verify.commitLog.getLatest())?.[0]).toBe(expected.batches.at(-1)!.batchId);
    // The final state equals the memory run's: open the latest version in a fresh provider.
    sharedStateCache.clear();
    const latest = (await verify.commitLog.getLatest())![0] + 1;
    const state = await verify.stateStore.open<[unknown[], unknown[]]>({ operatorId: 0, storeName: 'default' }, latest);
    const memoryState = await memoryCheckpoint.stateStore.open<[unknown[], unknown[]]>({ operatorId: 0, storeName: 'default' }, latest);
    expect(new Map(state.entries())).toEqual(new Map(memoryState.entries()));
  });

  it('state holding undefined (rows with missing values) survives a cold restart exactly', async () => {
    const answers = async (checkpoint: () => Checkpoint, cold: boolean): Promise<unknown[][]> => {
      const { stream, df } = new SluiceSession().memoryStream('key string, amount long');
      const totals = df.groupBy('key').agg(sum('amount').as('total'), count().as('n'));
      const sink = new MemorySink();
      let query = await totals.writeStream.outputMode('complete').sink(sink).checkpoint(checkpoint()).start();
      stream.addData([['a'], ['b', undefined], [undefined, 3], [null, 4]]);
      await query.processAllAvailable();
      await query.stop();
      if (cold) sharedStateCache.clear();
      query = await totals.writeStream.outputMode('complete').sink(sink).checkpoint(checkpoint()).start();
      stream.addData([['a', 5], ['b', undefined], [undefined, 1]]);
      await query.processAllAvailable();
      await query.stop();
      // Complete mode has no row order (as in Spark, without orderBy): compare the result as a set.
      const text = (row: unknown[]): string => JSON.stringify(row, (_, v: unknown) => (v === undefined ? '#undefined' : Number.isNaN(v) ? '#NaN' : v));
      return sink.allRows().sort((x, y) => text(x).localeCompare(text(y)));
    };
    const memoryCheckpoint = new MemoryCheckpoint();
    const expected = await answers(() => memoryCheckpoint, false);
    const actual = await answers(dynamo(newName()), true);
    expect(actual).toEqual(expected);
    expect(expected.some((r) => r.includes(undefined))).toBe(true);
  });

  it('reports the cost of every batch on the meter', async () => {
    const meter = new CostMeter();
    const name = newName();
    const { stream, revenue } = hourlyRevenue();
    const query = await revenue.writeStream.outputMode('update').sink(new MemorySink()).checkpoint(dynamo(name, { meter })()).start();
    const perBatch: Record<string, number>[] = [];
    for (const rows of ROUNDS.slice(0, 4)) {
      stream.addData(rows);
      const before = meter.snapshot();
      await query.processAllAvailable();
      perBatch.push(meter.since(before));
    }
    await query.stop();
    for (const cost of perBatch) {
      expect(cost.dynamoDbWriteUnits).toBeGreaterThanOrEqual(3); // offset + state delta + commit (transactional)
      expect(cost.stateBytesWritten).toBeGreaterThan(0);
    }
  });
});
