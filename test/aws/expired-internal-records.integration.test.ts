/**
 * A planned stage-2 batch whose internal records expire before it commits (issue 11): stage 2 must
 * not block its shard. As a one-stage query's planned batch does, it runs over the internal records
 * still held, keeping its planned end, and records the loss first: the internal range, and which
 * stage-1 batches (and so which source records) the lost records carried rows of. `sluice status`
 * lists it, unhealthy until acknowledged.
 *
 * Retention is simulated by a proxy in front of kinesis-mock (test/support/trimming-kinesis-proxy.ts)
 * that stage 2's Kinesis client goes through; the event source mappings read kinesis-mock directly.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutRecordCommand } from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import type { Sink } from '../../lib/sinks/sink.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { createKinesisTriggerHandler, createRepartitionTriggerHandler, type KinesisTriggerOptions } from '../../lib/aws/kinesis-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { LocalEventSourceMapping } from '../../lib/local/event-source-mapping.js';
import type { ShardInvocationResult } from '../../lib/query/shard-invocation.js';
import type { QueryStatus } from '../../lib/aws/query-inspection.js';
import type { SkippedRedriveReport } from '../../lib/aws/skipped-batch-redrive.js';
import { createOnFailureHandler } from '../../lib/aws/on-failure-handler.js';
import { deliverToOnFailureHandler } from '../../lib/local/on-failure-destination.js';
import type { DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';
import { deploy } from '../support/aws-pipeline.js';
import { SALES_SCHEMA, canonicalSales, hourlySales, inMemoryHourlySales, type Sale } from '../support/hourly-sales.js';
import { emulatorCliEnv, runSluice } from '../support/sluice-cli.js';
import { startTrimmingKinesisProxy, type TrimmingKinesisProxy } from '../support/trimming-kinesis-proxy.js';

const QUERY = 'expired-internal';
// No declared partition key: the aggregate runs in stage 2, after the internal stream.
const definition = defineQuery({ name: QUERY, source: { schema: SALES_SCHEMA }, transform: hourlySales, outputMode: 'update', sink: { kind: 'dynamodb' } });

const sale = (i: number): Sale => ({ store_id: ['north', 'south'][i % 2]!, amount: 10 * i + 1, ts: new Date(Date.UTC(2024, 4, 1, 14, i)).toISOString() });

let emulators: EmulatorSet;
let dir: string;
let proxy: TrimmingKinesisProxy;

beforeAll(async () => {
  emulators = await startEmulators();
  proxy = await startTrimmingKinesisProxy(emulators.endpoints.kinesis!);
  dir = mkdtempSync(join(tmpdir(), 'sluice-expired-internal-'));
});
afterAll(async () => {
  await proxy?.close();
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('a planned stage-2 batch whose internal records expired before it committed', () => {
  it('runs over the internal records still held, the shard moves on, and the loss names the source records it carried', async () => {
    const d = await deploy(emulators, definition, 1, { repartitionShards: 1, expectedShardCount: undefined });
    const { clients, config } = d;
    const shard = 'shardId-000000000000';
    const observability = createQuietObservability(QUERY);
    const sourceSeqs: string[] = [];
    const put = async (from: number, to: number): Promise<void> => {
      for (let i = from; i < to; i++) {
        const out = await clients.kinesis.send(new PutRecordCommand({
          StreamName: config.streamName, PartitionKey: `k${i}`, Data: Buffer.from(JSON.stringify(sale(i))),
        }));
        sourceSeqs.push(out.SequenceNumber!);
      }
    };
    // Stage 1: one source record per batch, so each internal record holds one stage-1 batch's rows.
    const stage1 = async (): Promise<void> => {
      await new LocalEventSourceMapping({
        kinesis: clients.kinesis, streamName: config.streamName, batchSize: 1, pollIntervalMs: 50,
        handler: createKinesisTriggerHandler(definition, { config, clientOptions: emulators.clientOptions, observability }),
      }).drain({ idleMs: 400 });
    };
    const stage2Results: ShardInvocationResult[] = [];
    const onFailure = createOnFailureHandler(definition, { config, clientOptions: emulators.clientOptions, observability });
    const internalSeqs = new Set<string>();
    const stage2 = async (handlerOptions: KinesisTriggerOptions, initialCheckpoints?: Record<string, string>): Promise<void> => {
      await new LocalEventSourceMapping({
        kinesis: clients.kinesis, streamName: config.repartitionStreamName!, batchSize: 3, pollIntervalMs: 50,
        maximumRetryAttempts: 0, bisectBatchOnFunctionError: false, ...(initialCheckpoints ? { initialCheckpoints } : {}),
        onFailure: (info) => deliverToOnFailureHandler(onFailure, info),
        hooks: { onInvocation: (entry) => { for (const s of entry.sequenceNumbers) internalSeqs.add(s); } },
        handler: createRepartitionTriggerHandler(definition, {
          config, clientOptions: emulators.clientOptions, observability, onInvocation: (_shard, result) => { stage2Results.push(result); }, ...handlerOptions,
        }),
      }).drain({ idleMs: 400 });
    };
    let sinkFails = false;
    const failingSink = (sink: Sink): Sink => Object.assign(Object.create(sink) as Sink, {
      addBatch: async (batch: Parameters<Sink['addBatch']>[0]) => {
        if (sinkFails) throw new Error('sink unavailable');
        return sink.addBatch(batch);
      },
    });

    // Stage-2 batch 0 (internal records 0..2) commits; batch 1 (internal records 3..5) is planned,
    // then its sink write fails until the mapping gives it up: planned, never committed.
    await put(0, 3);
    await stage1();
    await stage2({ decorateSink: failingSink });
    sinkFails = true;
    await put(3, 6);
    await stage1();
    await stage2({ decorateSink: failingSink });
    // A new mapping starts at the trim horizon: invocations of committed records only run nothing.
    const ran = (r: ShardInvocationResult): boolean => r.progress.length > 0 || r.error !== undefined;
    expect(stage2Results.filter(ran).map((r) => /sink unavailable/.test(r.error?.message ?? ''))).toEqual([false, true]);
    const phase3 = stage2Results.length;
    const seqs = [...internalSeqs].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
    expect(seqs).toHaveLength(6);

    // Retention passes internal records 3 and 4; record 5 is still held. New sales arrive.
    proxy.trimBefore(seqs[5]!);
    sinkFails = false;
    await put(6, 9);
    await stage1();
    const throughProxy = { ...emulators.clientOptions, endpoints: { ...emulators.clientOptions.endpoints, kinesis: proxy.endpoint } };
    // The mapping resumes after the range it gave up, as a persisted mapping would.
    await stage2({ clientOptions: throughProxy }, { [shard]: seqs[5]! });
    const later = stage2Results.slice(phase3).filter(ran);
    expect(later.map((r) => r.error?.message ?? null)).toEqual([null]);
    expect(later[0]!.committed?.sequenceNumber).toBe([...internalSeqs].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1)).at(-1));
    // Batch 1 ran over internal record 5 alone (one sale), then batch 2 over the next three.
    expect(later[0]!.progress.map((p) => [p.batchId, p.numInputRows])).toEqual([[1, 1], [2, 3]]);
    // What the handler logs and counts (ExpiredPlannedRecords).
    expect(later[0]!.expired).toMatchObject({ batchId: 1, count: 2, lostSources: [{ src: shard, fromBatch: 3, toBatch: 4 }] });

    const retained = [0, 1, 2, 5, 6, 7, 8].map(sale);
    expect(canonicalSales(await scanDynamoDbSink(clients.dynamodb, config.sinkTable!))).toEqual(await inMemoryHourlySales(retained));

    const descriptorFile = join(dir, 'deployment.json');
    writeFileSync(descriptorFile, JSON.stringify({ ...config, sluiceQuery: QUERY } satisfies DeploymentDescriptor));
    const cli = (args: string[]) => runSluice([...args, '--deployment', descriptorFile, '--endpoint', `kinesis=${proxy.endpoint}`,
      '--endpoint', `dynamodb=${emulators.endpoints.dynamodb}`, '--endpoint', `s3=${emulators.endpoints.s3}`], 60_000, emulatorCliEnv(emulators));
    const status = async (): Promise<{ code: number | null; stdout: string; status?: QueryStatus }> => {
      const json = await cli(['status', QUERY, '--json']);
      const text = await cli(['status', QUERY]);
      return { code: json.code, stdout: text.stdout, status: JSON.parse(json.stdout) as QueryStatus };
    };
    const lastExpired = String(BigInt(seqs[5]!) - 1n);
    const before = await status();
    expect(before.code).toBe(1);
    // The internal range, and what it carried: stage-1 batches 3 and 4 of the source shard, i.e. sales 3 and 4.
    expect(before.status!.lostRanges).toMatchObject([{
      partitionId: `state.${shard}`, streamName: config.repartitionStreamName,
      firstSequenceNumber: seqs[3], lastSequenceNumber: lastExpired, outcome: { expired: 2, expiredRange: { first: seqs[3], last: lastExpired } },
      lostSources: [{
        src: shard, fromBatch: 3, toBatch: 4, senderStream: config.streamName, senderShardId: shard,
        afterSequenceNumber: sourceSeqs[2], lastSequenceNumber: sourceSeqs[4],
      }],
    }]);
    expect(before.status!.problems.filter((p) => /planned batch records state\.shardId-000000000000 .* the rows they carried: .*batches 3\.\.4/.test(p))).toHaveLength(1);
    expect(before.stdout).toContain(`rows lost: ${shard} batches 3..4`);

    // The mapping's skipped range 3..5 of the internal stream: record 5 was committed by batch 1, records 3 and 4 expired.
    const redrive = await cli(['redrive', QUERY, '--skipped', '--json']);
    const report = JSON.parse(redrive.stdout) as SkippedRedriveReport;
    expect(report.ranges.map((r) => [r.partitionId, r.first, r.outcome?.alreadyCommitted, r.outcome?.expired, r.outcome?.redriven])).toEqual([
      [`state.${shard}`, seqs[3], 1, 2, 0],
    ]);

    const ack = await cli(['redrive', QUERY, '--acknowledge', `state.${shard}#${seqs[3]}`, '--reason', 'stage 2 down longer than retention', '--by', 'oncall', '--json']);
    expect(ack.code, ack.stderr).toBe(0);
    const after = await status();
    expect(after.code).toBe(0);
    expect(after.status!.lostRanges.every((r) => r.acknowledgement?.by === 'oncall')).toBe(true);
  }, 300_000);

  it('a re-run that held all its internal records kept them: after the trim it runs from the copy, with nothing lost', async () => {
    const keptDefinition = defineQuery({ ...definition, name: 'kept-internal' });
    const d = await deploy(emulators, keptDefinition, 1, { repartitionShards: 1, expectedShardCount: undefined });
    const { clients, config } = d;
    const shard = 'shardId-000000000000';
    const observability = createQuietObservability(keptDefinition.name);
    const put = async (from: number, to: number): Promise<void> => {
      for (let i = from; i < to; i++) {
        await clients.kinesis.send(new PutRecordCommand({ StreamName: config.streamName, PartitionKey: `k${i}`, Data: Buffer.from(JSON.stringify(sale(i))) }));
      }
    };
    const stage1 = () => new LocalEventSourceMapping({
      kinesis: clients.kinesis, streamName: config.streamName, batchSize: 1, pollIntervalMs: 50,
      handler: createKinesisTriggerHandler(keptDefinition, { config, clientOptions: emulators.clientOptions, observability }),
    }).drain({ idleMs: 400 });
    const results: ShardInvocationResult[] = [];
    const internalSeqs = new Set<string>();
    // One retry: the retry of the failed batch re-runs it holding all its records, and keeps them.
    const stage2 = (handlerOptions: KinesisTriggerOptions, retries: number, initialCheckpoints?: Record<string, string>) => new LocalEventSourceMapping({
      kinesis: clients.kinesis, streamName: config.repartitionStreamName!, batchSize: 3, pollIntervalMs: 50,
      maximumRetryAttempts: retries, bisectBatchOnFunctionError: false, ...(initialCheckpoints ? { initialCheckpoints } : {}),
      hooks: { onInvocation: (entry) => { for (const s of entry.sequenceNumbers) internalSeqs.add(s); } },
      handler: createRepartitionTriggerHandler(keptDefinition, {
        config, clientOptions: emulators.clientOptions, observability, onInvocation: (_shard, result) => { results.push(result); }, ...handlerOptions,
      }),
    }).drain({ idleMs: 400 });
    let sinkFails = false;
    const failingSink = (sink: Sink): Sink => Object.assign(Object.create(sink) as Sink, {
      addBatch: async (batch: Parameters<Sink['addBatch']>[0]) => {
        if (sinkFails) throw new Error('sink unavailable');
        return sink.addBatch(batch);
      },
    });
    await put(0, 3);
    await stage1();
    await stage2({ decorateSink: failingSink }, 0);
    sinkFails = true;
    await put(3, 6);
    await stage1();
    await stage2({ decorateSink: failingSink }, 1);
    const ran = (r: ShardInvocationResult): boolean => r.progress.length > 0 || r.error !== undefined;
    expect(results.filter(ran).map((r) => /sink unavailable/.test(r.error?.message ?? ''))).toEqual([false, true, true]);
    const seqs = [...internalSeqs].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
    expect(seqs).toHaveLength(6);

    // Retention passes internal records 3 and 4 (planned in batch 1); new sales arrive.
    proxy.trimBefore(seqs[5]!);
    sinkFails = false;
    await put(6, 9);
    await stage1();
    const before = results.length;
    const throughProxy = { ...emulators.clientOptions, endpoints: { ...emulators.clientOptions.endpoints, kinesis: proxy.endpoint } };
    await stage2({ clientOptions: throughProxy }, 0, { [shard]: seqs[5]! });
    const later = results.slice(before).filter(ran);
    expect(later.map((r) => r.error?.message ?? null)).toEqual([null]);
    // Batch 1 ran over all three of its internal records (from the kept copy), then batch 2.
    expect(later[0]!.progress.map((p) => [p.batchId, p.numInputRows])).toEqual([[1, 3], [2, 3]]);
    expect(later[0]!.expired).toBeUndefined();
    const all = [0, 1, 2, 3, 4, 5, 6, 7, 8].map(sale);
    expect(canonicalSales(await scanDynamoDbSink(clients.dynamodb, config.sinkTable!))).toEqual(await inMemoryHourlySales(all));
  }, 300_000);
});
