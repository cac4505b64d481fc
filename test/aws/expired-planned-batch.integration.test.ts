/**
 * A planned batch whose records expire from the stream before it commits (issue 11, chaos F1): the
 * shard must move on. The batch runs over the records the stream still holds, keeping its planned
 * end; the expired ones are a lost range that `sluice status` lists, unhealthy until acknowledged;
 * the re-drive of the range the mapping skipped does not count them as committed by the batch.
 *
 * Retention is simulated by a proxy in front of kinesis-mock (test/support/trimming-kinesis-proxy.ts)
 * that the functions' and the CLI's Kinesis clients go through; the event source mapping reads
 * kinesis-mock directly (it only reads records newer than the trim point).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutRecordCommand } from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import type { Sink } from '../../lib/sinks/sink.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { createOnFailureHandler } from '../../lib/aws/on-failure-handler.js';
import { isExpiredPlanned, SkippedBatchStore } from '../../lib/aws/skipped-batches.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { deliverToOnFailureHandler } from '../../lib/local/on-failure-destination.js';
import type { QueryStatus } from '../../lib/aws/query-inspection.js';
import type { SkippedRedriveReport } from '../../lib/aws/skipped-batch-redrive.js';
import type { DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';
import { deploy } from '../support/aws-pipeline.js';
import { emulatorCliEnv, runSluice } from '../support/sluice-cli.js';
import { startTrimmingKinesisProxy, type TrimmingKinesisProxy } from '../support/trimming-kinesis-proxy.js';

const QUERY = 'expired-planned';
const SCHEMA = 'store_id string, amount long, ts timestamp';
const hourlySales = (df: DataFrame): DataFrame => df
  .withWatermark('ts', '15 minutes')
  .groupBy(window(col('ts'), '1 hour'), col('store_id'))
  .agg(sum('amount').as('revenue'), count('*').as('orders'));
const definition = defineQuery({ name: QUERY, source: { schema: SCHEMA, partitionKey: 'store_id' }, transform: hourlySales, outputMode: 'update', sink: { kind: 'dynamodb' } });

interface Sale { store_id: string; amount: number; ts: string }
const sale = (i: number): Sale => ({ store_id: ['north', 'south'][i % 2]!, amount: 10 * i + 1, ts: new Date(Date.UTC(2024, 4, 1, 14, i)).toISOString() });

/** The engine in memory over these sales (complete mode: every group's final value). */
async function inMemoryAnswer(sales: readonly Sale[]): Promise<string[]> {
  const { stream, df } = new SluiceSession().memoryStream(SCHEMA);
  const result = hourlySales(df);
  const sink = new MemorySink();
  const q = await result.writeStream.outputMode('complete').sink(sink).start();
  stream.addData(sales.map((s) => [s.store_id, s.amount, parseTimestamp(s.ts)]));
  await q.processAllAvailable();
  await q.stop();
  const schema = result.plan.output.map((a) => ({ name: a.name, type: a.type }));
  return canonical(sink.allRows().map((r) => toExternalRow(r, schema)));
}
const canonical = (rows: Record<string, unknown>[]): string[] =>
  rows.map((r) => JSON.stringify({ window: r.window, store_id: r.store_id, revenue: Number(r.revenue), orders: Number(r.orders) })).sort();

let emulators: EmulatorSet;
let dir: string;
let proxy: TrimmingKinesisProxy;

beforeAll(async () => {
  emulators = await startEmulators();
  proxy = await startTrimmingKinesisProxy(emulators.endpoints.kinesis!);
  dir = mkdtempSync(join(tmpdir(), 'sluice-expired-planned-'));
});
afterAll(async () => {
  await proxy?.close();
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('a planned batch whose records expired before it committed', () => {
  it('runs over the records still held, the shard moves on, and the loss is listed until acknowledged', async () => {
    const d = await deploy(emulators, definition, 1);
    const { clients, config } = d;
    const put = async (i: number): Promise<string> => (await clients.kinesis.send(new PutRecordCommand({
      StreamName: config.streamName, PartitionKey: sale(i).store_id, Data: Buffer.from(JSON.stringify(sale(i))),
    }))).SequenceNumber!;
    const seqs: string[] = [];
    for (let i = 0; i < 6; i++) seqs.push(await put(i));

    // Batch 0 (records 0..2) commits; batch 1 (records 3..5) is planned, then its sink write fails
    // until the mapping gives it up (recorded as a skipped range): planned, never committed.
    let sinkFails = false;
    const failingSink = (sink: Sink): Sink => Object.assign(Object.create(sink) as Sink, {
      addBatch: async (batch: Parameters<Sink['addBatch']>[0]) => {
        if (sinkFails) throw new Error('sink unavailable');
        return sink.addBatch(batch);
      },
    });
    const onFailure = createOnFailureHandler(definition, { config, clientOptions: emulators.clientOptions, observability: createQuietObservability(QUERY) });
    await d.drain({
      batchSize: 3, maximumRetryAttempts: 0, bisectBatchOnFunctionError: false,
      hooks: { afterInvoke: () => { sinkFails = true; } },
      onFailure: (info) => deliverToOnFailureHandler(onFailure, info),
    }, { decorateSink: failingSink });
    expect(d.results.map((r) => /sink unavailable/.test(r.result.error?.message ?? ''))).toEqual([false, true]);

    // Retention passes records 3 and 4; record 5 is still held. New records arrive.
    proxy.trimBefore(seqs[5]!);
    sinkFails = false;
    for (let i = 6; i < 9; i++) seqs.push(await put(i));
    const throughProxy = { ...emulators.clientOptions, endpoints: { ...emulators.clientOptions.endpoints, kinesis: proxy.endpoint } };
    // The mapping resumes after the range it gave up, as a persisted mapping would.
    await d.drain({
      batchSize: 3, maximumRetryAttempts: 0, bisectBatchOnFunctionError: false, initialCheckpoints: { 'shardId-000000000000': seqs[5]! },
      onFailure: (info) => deliverToOnFailureHandler(onFailure, info),
    },
      { clientOptions: throughProxy });
    const later = d.results.slice(2);
    expect(later.map((r) => r.result.error?.message ?? null)).toEqual([null]);
    expect(later[0]!.result.committed?.sequenceNumber).toBe(seqs[8]);
    // Batch 1 ran over record 5 alone, then batch 2 over records 6..8.
    expect(later[0]!.result.progress.map((p) => [p.batchId, p.numInputRows])).toEqual([[1, 1], [2, 3]]);

    const retained = [0, 1, 2, 5, 6, 7, 8].map(sale);
    expect(canonical(await scanDynamoDbSink(clients.dynamodb, config.sinkTable!))).toEqual(await inMemoryAnswer(retained));

    const descriptorFile = join(dir, 'deployment.json');
    writeFileSync(descriptorFile, JSON.stringify({ ...config, sluiceQuery: QUERY } satisfies DeploymentDescriptor));
    const cli = (args: string[]) => runSluice([...args, '--deployment', descriptorFile, '--endpoint', `kinesis=${proxy.endpoint}`,
      '--endpoint', `dynamodb=${emulators.endpoints.dynamodb}`, '--endpoint', `s3=${emulators.endpoints.s3}`], 60_000, emulatorCliEnv(emulators));
    const status = async (): Promise<{ code: number | null; status: QueryStatus }> => {
      const out = await cli(['status', QUERY, '--json']);
      return { code: out.code, status: JSON.parse(out.stdout) as QueryStatus };
    };
    const lastExpired = String(BigInt(seqs[5]!) - 1n);
    const before = await status();
    expect(before.code).toBe(1);
    expect(before.status.lostRanges).toMatchObject([{
      firstSequenceNumber: seqs[3], lastSequenceNumber: lastExpired, outcome: { expired: 2, expiredRange: { first: seqs[3], last: lastExpired } },
    }]);
    expect(before.status.problems.filter((p) => /planned batch records .* lost/.test(p))).toHaveLength(1);

    // The mapping's skipped range 3..5: record 5 was committed by batch 1, records 3 and 4 were not.
    const redrive = await cli(['redrive', QUERY, '--skipped', '--json']);
    const report = JSON.parse(redrive.stdout) as SkippedRedriveReport;
    expect(report.ranges.map((r) => [r.first, r.outcome])).toEqual([
      [seqs[3], { redriven: 0, deadLettered: 0, alreadyCommitted: 1, expired: 2, skippedAgain: 0, expiredRange: { first: seqs[3], last: lastExpired } }],
    ]);

    const ack = await cli(['redrive', QUERY, '--acknowledge', `shardId-000000000000#${seqs[3]}`, '--reason', 'outage longer than retention', '--by', 'oncall', '--json']);
    expect(ack.code, ack.stderr).toBe(0);
    const after = await status();
    expect(after.code).toBe(0);
    expect(after.status.healthy).toBe(true);
    expect(after.status.lostRanges.every((r) => r.acknowledgement?.by === 'oncall')).toBe(true);
  }, 300_000);

  it('when the trim advances between two runs, the loss record grows to what the committing run left out, and the earlier run cannot overwrite its answer', async () => {
    const d = await deploy(emulators, definition, 1);
    const { clients, config } = d;
    const shard = 'shardId-000000000000';
    const put = async (s: Sale): Promise<string> => (await clients.kinesis.send(new PutRecordCommand({
      StreamName: config.streamName, PartitionKey: s.store_id, Data: Buffer.from(JSON.stringify(s)),
    }))).SequenceNumber!;
    const seqs: string[] = [];
    for (let i = 0; i < 8; i++) seqs.push(await put(sale(i)));
    // Records after batch 1 of a store of their own: the next batch writes no key batch 1 wrote.
    const west = (i: number): Sale => ({ ...sale(i), store_id: 'west' });

    // Batch 0 (records 0..3) commits; batch 1 (4..7) is planned and its sink write fails.
    let sinkFails = false;
    let inner: Sink | undefined;
    const failedRuns: Parameters<Sink['addBatch']>[0][] = [];
    const failingSink = (sink: Sink): Sink => {
      inner = sink;
      return Object.assign(Object.create(sink) as Sink, {
        addBatch: async (batch: Parameters<Sink['addBatch']>[0]) => {
          if (sinkFails) {
            failedRuns.push(batch);
            throw new Error('sink unavailable');
          }
          return sink.addBatch(batch);
        },
      });
    };
    await d.drain({ batchSize: 4, maximumRetryAttempts: 0, bisectBatchOnFunctionError: false, hooks: { afterInvoke: () => { sinkFails = true; } } },
      { decorateSink: failingSink });
    expect(d.results.map((r) => /sink unavailable/.test(r.result.error?.message ?? ''))).toEqual([false, true]);

    const throughProxy = { ...emulators.clientOptions, endpoints: { ...emulators.clientOptions.endpoints, kinesis: proxy.endpoint } };
    const later: string[] = [];
    for (let i = 8; i < 10; i++) later.push(await put(west(i)));
    const resume = { batchSize: 4, maximumRetryAttempts: 0, bisectBatchOnFunctionError: false, initialCheckpoints: { [shard]: seqs[7]! } };
    // Run A: record 4 has expired; it runs over 5..7 and its sink write fails again.
    proxy.trimBefore(seqs[5]!);
    await d.drain(resume, { clientOptions: throughProxy, decorateSink: failingSink });
    expect(d.results.slice(2).map((r) => /sink unavailable/.test(r.result.error?.message ?? ''))).toEqual([true]);
    const runA = failedRuns.at(-1)!;
    expect([runA.batchId, runA.revision]).toEqual([1, 1]);
    // Run B: records 4 and 5 have expired; it runs over 6..7 and commits.
    proxy.trimBefore(seqs[6]!);
    sinkFails = false;
    await d.drain(resume, { clientOptions: throughProxy, decorateSink: failingSink });
    const runB = d.results.slice(3);
    expect(runB.map((r) => r.result.error?.message ?? null)).toEqual([null]);
    expect(runB[0]!.result.progress.map((p) => [p.batchId, p.numInputRows])).toEqual([[1, 2], [2, 2]]);

    // The record holds what run B left out (4 and 5), not what run A did, and can no longer grow.
    const store = new SkippedBatchStore({ client: clients.dynamodb, checkpointTable: config.checkpointTable, queryName: QUERY });
    const lastLost = String(BigInt(seqs[6]!) - 1n);
    expect((await store.list()).filter(isExpiredPlanned)).toMatchObject([{
      firstSequenceNumber: seqs[4], lastSequenceNumber: lastLost, batchSize: 2, outcome: { expired: 2, expiredRange: { first: seqs[4], last: lastLost } },
    }]);
    await expect(store.recordExpiredPlanned(shard, config.streamName, {
      shardId: shard, batchId: 1, firstSequenceNumber: seqs[4]!, lastSequenceNumber: seqs[6]!, count: 3,
    })).rejects.toThrow(/can no longer grow/);

    // Run A wakes and writes its answer (with record 5) last: the sink keeps run B's.
    await inner!.addBatch(runA);
    const retained = [0, 1, 2, 3, 6, 7].map(sale).concat([8, 9].map(west));
    expect(canonical(await scanDynamoDbSink(clients.dynamodb, config.sinkTable!))).toEqual(await inMemoryAnswer(retained));
  }, 300_000);
});
