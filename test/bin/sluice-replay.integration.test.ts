/**
 * `sluice replay` through the real CLI, against a query that runs through the real Kinesis handler
 * on the emulators: the deployed query has a bug (it drops sales of 20 or more); a replay of the
 * fixed query recomputes the stream's history in a shadow while the live run goes on, survives a
 * crash, is refused a second start and an early cutover, and after the cutover the answer readers
 * find is the fixed query's over the whole history, the old one kept beside it.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import type { DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { readS3Snapshots, scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { deleteResources } from '../support/cleanup.js';
import { reshardStream } from '../../lib/local/kinesis-admin.js';
import { liveSinkPrefix } from '../../lib/aws/replay.js';
import { listKeys } from '../../lib/aws/s3-util.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import type { Sink, SinkBatch } from '../../lib/sinks/sink.js';
import { DynamoDbCheckpoint } from '../../lib/aws/dynamodb-checkpoint.js';
import { namespaceFence } from '../../lib/aws/query-namespace.js';
import { CHECKPOINT_FORMAT_VERSION } from '../../lib/checkpoint/checkpoint.js';
import { createScheduledTriggerHandler, type ScheduledTriggerSummary } from '../../lib/aws/scheduled-trigger-handler.js';
import { METRIC, METRIC_DIMENSION_QUERY } from '../../lib/runtime/metric-names.js';
import type { QueryStatus } from '../../lib/aws/query-inspection.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';
import { PROJECT_ROOT, runSluice, emulatorCliEnv } from '../support/sluice-cli.js';
import fixed from './fixtures/replay-sales-fixed.js';
import buggy from './fixtures/replay-sales-buggy.js';
import hopFixed from './fixtures/replay-sales-hop-fixed.js';

const QUERY = 'replay-sales';
const FIXED_MODULE = 'test/bin/fixtures/replay-sales-fixed.ts';
const BUGGY_MODULE = 'test/bin/fixtures/replay-sales-buggy.ts';

interface Sale { store_id: string; amount: number; ts: string }
const stores = ['north', 'south', 'east', 'west', 'central'];
const wave = (n: number, from: number): Sale[] => Array.from({ length: n }, (_, k) => {
  const i = from + k;
  return { store_id: stores[(i * 7) % stores.length]!, amount: 1 + ((i * 13) % 37), ts: new Date(Date.UTC(2024, 4, 1, 14, 0) + i * 7 * 60_000).toISOString() };
});

/** The answer the query should give over `sales`: per (hour, store), the total and the count. */
function answerOver(sales: readonly Sale[], keep: (s: Sale) => boolean): Record<string, [number, number]> {
  const out: Record<string, [number, number]> = {};
  for (const s of sales.filter(keep)) {
    const key = `${s.ts.slice(0, 13)}|${s.store_id}`;
    const [total, orders] = out[key] ?? [0, 0];
    out[key] = [total + s.amount, orders + 1];
  }
  return out;
}
const all = () => true;
const belowTwenty = (s: Sale) => s.amount < 20;

function answerOf(rows: readonly Record<string, unknown>[]): Record<string, [number, number]> {
  const out: Record<string, [number, number]> = {};
  for (const r of rows) {
    const start = (r.window as { start: string }).start;
    const key = `${start.slice(0, 13)}|${r.store_id as string}`;
    if (out[key]) throw new Error(`group ${key} twice in the sink`);
    out[key] = [Number(r.sales), Number(r.orders)];
  }
  return out;
}

let emulators: EmulatorSet;
let dir: string;
let cliEnv: Record<string, string>;

function cliFor(descriptorFile: string) {
  const args = (more: string[]) => [...more, '--deployment', descriptorFile,
    '--endpoint', `kinesis=${emulators.endpoints.kinesis}`, '--endpoint', `dynamodb=${emulators.endpoints.dynamodb}`,
    '--endpoint', `s3=${emulators.endpoints.s3}`];
  return {
    run: (more: string[]) => runSluice(args(more), 120_000, cliEnv),
    /** Starts the command and kills it (SIGKILL, no clean-up) once its output matches `when`. */
    killWhen: (more: string[], when: RegExp) => new Promise<{ killed: boolean; stdout: string }>((done, fail) => {
      const child = spawn(process.execPath, ['--conditions=sluice-source', '--import', 'tsx', join(PROJECT_ROOT, 'bin/sluice.ts'), ...args(more)],
        { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...cliEnv } });
      let stdout = '';
      let killed = false;
      child.stdout.on('data', (c: Buffer) => {
        stdout += c.toString();
        if (!killed && when.test(stdout)) { killed = true; child.kill('SIGKILL'); }
      });
      const timer = setTimeout(() => { child.kill('SIGKILL'); fail(new Error(`no match in time:\n${stdout}`)); }, 120_000);
      child.on('exit', () => { clearTimeout(timer); done({ killed, stdout }); });
    }),
  };
}

async function deployed(): Promise<{ deployment: Deployment; cli: ReturnType<typeof cliFor>; descriptor: DeploymentDescriptor }> {
  const deployment = await deploy(emulators, buggy, 2);
  // As the construct describes an S3-sink query: no sink table (the emulator deployment creates one for every query).
  const { sinkTable: _unused, ...withoutSinkTable } = deployment.config;
  const descriptor: DeploymentDescriptor = { ...(buggy.sink.kind === 'dynamodb' ? deployment.config : withoutSinkTable), sluiceQuery: QUERY };
  const file = join(dir, `deployment-${deployment.config.checkpointTable}.json`);
  writeFileSync(file, JSON.stringify(descriptor));
  return { deployment, cli: cliFor(file), descriptor };
}

/** Runs `run` with Powertools printing its metrics (EMF documents), and returns them. */
async function withEmittedMetrics<T>(run: () => Promise<T>): Promise<{ summary: T; docs: Record<string, unknown>[] }> {
  const saved = { dev: process.env.POWERTOOLS_DEV, disabled: process.env.POWERTOOLS_METRICS_DISABLED };
  process.env.POWERTOOLS_DEV = 'true';
  process.env.POWERTOOLS_METRICS_DISABLED = 'false';
  const lines: string[] = [];
  const spies = [vi.spyOn(console, 'log').mockImplementation((text: unknown) => { lines.push(String(text)); }),
    ...(['info', 'warn', 'error', 'debug'] as const).map((level) => vi.spyOn(console, level).mockImplementation(() => {}))];
  try {
    const summary = await run();
    return { summary, docs: lines.filter((l) => l.startsWith('{') && l.includes('"_aws"')).map((l) => JSON.parse(l) as Record<string, unknown>) };
  } finally {
    for (const spy of spies) spy.mockRestore();
    if (saved.dev === undefined) delete process.env.POWERTOOLS_DEV; else process.env.POWERTOOLS_DEV = saved.dev;
    if (saved.disabled === undefined) delete process.env.POWERTOOLS_METRICS_DISABLED; else process.env.POWERTOOLS_METRICS_DISABLED = saved.disabled;
  }
}

const put = (deployment: Deployment, sales: readonly Sale[]) => deployment.put(sales.map((s) => ({ data: JSON.stringify(s), partitionKey: s.store_id })));

beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-replay-test-'));
  cliEnv = emulatorCliEnv(emulators);
});
afterAll(async () => {
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('sluice replay', () => {
  it('recomputes the history with the fixed query beside the live run, through a crash, and cuts over only once caught up', async () => {
    const { deployment, cli, descriptor } = await deployed();
    const bucket = descriptor.sinkBucket!;
    const readLive = async () => answerOf(await readS3Snapshots(deployment.clients.s3, bucket, await liveSinkPrefix(deployment.clients, bucket, 'results/')));
    const from = new Date(Date.now() - 60_000).toISOString();
    const first = wave(30, 0);
    await put(deployment, first);
    await deployment.drain();
    expect(await readLive()).toEqual(answerOver(first, belowTwenty));

    // start: the shadow's namespace and prefix; a second start is refused
    const started = await cli.run(['replay', 'start', QUERY, '--from', from, '--query-module', FIXED_MODULE, '--json']);
    expect(started.code, started.stderr).toBe(0);
    const run = JSON.parse(started.stdout) as { runId: string; namespace: string; sinkPrefix: string; drivenBy: string };
    expect(run.namespace).toBe(`${QUERY}@${run.runId}`);
    expect(run.sinkPrefix).toBe(`results/_replay/${run.runId}/`);
    expect(run.drivenBy).toBe('cli');
    const twice = await cli.run(['replay', 'start', QUERY, '--from', from, '--query-module', FIXED_MODULE]);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toMatch(new RegExp(`A replay of '${QUERY}' is already running \\(run ${run.runId}`));
    // A live writer that began before the start read no pointer, so it carries no fence: the start
    // has marked each live partition's latest commit, and its next commit is refused (a first
    // commit, batch 0, finds the pointer there).
    const unfenced = (partitionId: string) => new DynamoDbCheckpoint({
      client: deployment.clients.dynamodb, checkpointTable: descriptor.checkpointTable, stateTable: descriptor.stateTable,
      queryName: QUERY, partitionId, stateCache: null,
    });
    for (const shard of ['shardId-000000000000', 'shardId-000000000001']) {
      const [before] = (await unfenced(shard).commitLog.getLatest())!;
      await expect(unfenced(shard).commitLog.add(before + 1, { formatVersion: CHECKPOINT_FORMAT_VERSION, batchId: before + 1, nextBatchWatermarkMs: 0 }))
        .rejects.toMatchObject({ code: 'NAMESPACE_RETIRED' });
    }
    await expect(unfenced('shardId-000000000009').commitLog.add(0, { formatVersion: CHECKPOINT_FORMAT_VERSION, batchId: 0, nextBatchWatermarkMs: 0 }))
      .rejects.toMatchObject({ code: 'NAMESPACE_RETIRED' });

    // status: every record the live run committed is still to be read; the cutover is refused
    const waiting = await cli.run(['replay', 'status', QUERY, '--json']);
    expect(waiting.code).toBe(1);
    const w = JSON.parse(waiting.stdout) as { ready: boolean; shards: { shardId: string; behind: number; shadowBatch: number | null }[] };
    expect(w.ready).toBe(false);
    expect(w.shards.reduce((n, s) => n + s.behind, 0)).toBe(first.length);
    const early = await cli.run(['replay', 'cutover', QUERY]);
    expect(early.code).toBe(1);
    expect(early.stderr).toMatch(/has not caught up with the live run: shardId-\S+ \d+ record\(s\) behind/);

    // a crash of the shadow mid-run: killed after its first batch
    const crashed = await cli.killWhen(['replay', 'run', QUERY, '--query-module', FIXED_MODULE, '--batch-size', '3'], /shadow shardId-\S+ batch 0:/);
    expect(crashed.killed).toBe(true);
    const afterCrash = JSON.parse((await cli.run(['replay', 'status', QUERY, '--json'])).stdout) as typeof w;
    const behindAfterCrash = afterCrash.shards.reduce((n, s) => n + s.behind, 0);
    expect(behindAfterCrash).toBeGreaterThan(0);
    expect(behindAfterCrash).toBeLessThan(first.length);

    // the live run goes on meanwhile, its answer untouched by the shadow
    const second = wave(20, 30);
    await put(deployment, second);
    await deployment.drain();
    expect(await readLive()).toEqual(answerOver([...first, ...second], belowTwenty));

    // the shadow resumes from its checkpoint and catches up with the live run
    const resumed = await cli.run(['replay', 'run', QUERY, '--query-module', FIXED_MODULE, '--batch-size', '4']);
    expect(resumed.code, resumed.stderr + resumed.stdout).toBe(0);
    expect(resumed.stdout).toMatch(/caught up with the live run/);
    const ready = await cli.run(['replay', 'status', QUERY]);
    expect(ready.code, ready.stdout).toBe(0);
    expect(ready.stdout).toMatch(/READY/);
    // Exactly once through the crash: the shadow holds the fixed answer over both waves; the live one is still the bug's.
    expect(answerOf(await readS3Snapshots(deployment.clients.s3, bucket, run.sinkPrefix))).toEqual(answerOver([...first, ...second], all));
    expect(await readLive()).toEqual(answerOver([...first, ...second], belowTwenty));

    // cutover: the fixed query's namespace is live; readers follow the pointer object
    const cut = await cli.run(['replay', 'cutover', QUERY, '--json']);
    expect(cut.code, cut.stderr).toBe(0);
    const c = JSON.parse(cut.stdout) as { namespace: string; retired: string; readerPointer: { key: string; prefix: string } };
    expect(c).toMatchObject({ namespace: run.namespace, retired: QUERY, readerPointer: { key: 'results/_sluice_active.json', prefix: run.sinkPrefix } });

    // A writer of the old namespace that read the pointer before the cutover cannot commit any more.
    const stale = new DynamoDbCheckpoint({
      client: deployment.clients.dynamodb, checkpointTable: descriptor.checkpointTable, stateTable: descriptor.stateTable,
      queryName: QUERY, partitionId: w.shards[0]!.shardId, stateCache: null, commitFence: namespaceFence(descriptor.checkpointTable, QUERY, QUERY),
    });
    const [latest] = (await stale.commitLog.getLatest())!;
    await expect(stale.commitLog.add(latest + 1, { formatVersion: CHECKPOINT_FORMAT_VERSION, batchId: latest + 1, nextBatchWatermarkMs: 0 }))
      .rejects.toMatchObject({ code: 'NAMESPACE_RETIRED' });

    // The fixed query is deployed: new records extend the replayed answer.
    const third = wave(15, 50);
    await put(deployment, third);
    await deployment.drain({}, {}, fixed);
    const history = [...first, ...second, ...third];
    expect(await readLive()).toEqual(answerOver(history, all));
    // The retired namespace's answer is kept for a rollback, as it was at the cutover.
    expect(answerOf(await readS3Snapshots(deployment.clients.s3, bucket, 'results/'))).toEqual(answerOver([...first, ...second], belowTwenty));
    // status reads the live namespace now: its last batches are the fixed query's, past the retired ones.
    const status = JSON.parse((await cli.run(['status', QUERY, '--json'])).stdout) as QueryStatus;
    for (const p of status.partitions) {
      const inNamespace = async (namespace: string) => (await new DynamoDbCheckpoint({
        client: deployment.clients.dynamodb, checkpointTable: descriptor.checkpointTable, stateTable: descriptor.stateTable,
        queryName: namespace, partitionId: p.partitionId, stateCache: null,
      }).commitLog.getLatest())?.[0];
      expect(p.lastCommittedBatch).toBe(await inNamespace(run.namespace));
      expect(p.lastCommittedBatch).toBeGreaterThan((await inNamespace(QUERY))!);
    }
    const after = await cli.run(['replay', 'status', QUERY]);
    expect(after.code).toBe(1);
    expect(after.stdout).toMatch(new RegExp(`no replay of ${QUERY} is running; live namespace: ${run.namespace} \\(retired: ${QUERY}\\)`));
  }, 480_000);

  it('the scheduled function drives a replay of the deployed code from --from; abort removes the shadow and a new replay can start', async () => {
    const { deployment, cli, descriptor } = await deployed();
    // Records that arrived before --from are not replayed (AT_TIMESTAMP), on either shard.
    const before = wave(10, 100);
    await put(deployment, before);
    await new Promise((r) => setTimeout(r, 1_500));
    const from = new Date().toISOString();
    await new Promise((r) => setTimeout(r, 1_500));
    const sales = wave(16, 0);
    await put(deployment, sales);
    await deployment.drain();

    const started = await cli.run(['replay', 'start', QUERY, '--from', from, '--json']);
    expect(started.code, started.stderr).toBe(0);
    const run = JSON.parse(started.stdout) as { runId: string; namespace: string; sinkPrefix: string; drivenBy: string };
    expect(run.drivenBy).toBe('scheduled-function');
    // One tick of the deployed scheduled function, with the metrics it really publishes.
    const { summary, docs } = await withEmittedMetrics(() => createScheduledTriggerHandler(buggy, {
      config: deployment.config, clients: deployment.clients,
    })({ mode: 'tick' }));
    expect(summary.replay?.runId).toBe(run.runId);
    expect(summary.replay!.shards.reduce((n, s) => n + s.batches, 0)).toBeGreaterThan(0);
    // The shadow's batches are metered under its own namespace, not in the live query's figures.
    const inputRows = (query: string) => docs.filter((d) => d[METRIC_DIMENSION_QUERY] === query)
      .reduce((n, d) => n + [d[METRIC.inputRows] ?? []].flat().reduce((a: number, v) => a + Number(v), 0), 0);
    expect(inputRows(run.namespace)).toBe(sales.length);
    expect(inputRows(QUERY)).toBe(0);
    const ready = await cli.run(['replay', 'status', QUERY]);
    expect(ready.code, ready.stdout).toBe(0);
    expect(answerOf(await readS3Snapshots(deployment.clients.s3, descriptor.sinkBucket!, run.sinkPrefix))).toEqual(answerOver(sales, belowTwenty));

    // A shadow batch in flight during the abort: held inside its sink write until the abort is done.
    await put(deployment, wave(6, 40));
    let reached!: () => void;
    let release!: () => void;
    const atSink = new Promise<void>((r) => { reached = r; });
    const gate = new Promise<void>((r) => { release = r; });
    const straggler = createScheduledTriggerHandler(buggy, {
      config: deployment.config, clients: deployment.clients, observability: createQuietObservability(QUERY),
      decorateSink: (sink) => Object.assign(Object.create(sink) as Sink, {
        addBatch: async (batch: SinkBatch) => { reached(); await gate; return sink.addBatch(batch); },
      }),
    })({ mode: 'replay' });
    await atSink;
    const aborted = await cli.run(['replay', 'abort', QUERY, '--json']);
    expect(aborted.code, aborted.stderr).toBe(0);
    const a = JSON.parse(aborted.stdout) as { runId: string; checkpointItems: number; stateItems: number; sinkObjects: number };
    expect(a.runId).toBe(run.runId);
    expect(a.checkpointItems).toBeGreaterThan(0);
    expect(a.stateItems).toBeGreaterThan(0);
    expect(a.sinkObjects).toBeGreaterThan(0);
    release();
    // Its commit is refused, but its sink objects were written after the abort deleted the prefix.
    expect((await straggler).replay!.shards.some((s) => s.error !== undefined)).toBe(true);
    expect(await listKeys(deployment.clients.s3, descriptor.sinkBucket!, run.sinkPrefix)).not.toEqual([]);
    // The sweep waits until no writer that began before the abort can still run; then deletes again.
    const tooSoon = await cli.run(['replay', 'sweep', QUERY]);
    expect(tooSoon.code, tooSoon.stderr).toBe(0);
    expect(tooSoon.stdout).toMatch(new RegExp(`replay ${run.runId} aborted .*: too recent`));
    expect(await listKeys(deployment.clients.s3, descriptor.sinkBucket!, run.sinkPrefix)).not.toEqual([]);
    const swept = await cli.run(['replay', 'sweep', QUERY, '--older-than', '0', '--json']);
    expect(swept.code, swept.stderr).toBe(0);
    const sw = JSON.parse(swept.stdout) as { swept: { runId: string; sinkObjects: number }[]; pending: unknown[] };
    expect(sw.swept.map((r) => r.runId)).toEqual([run.runId]);
    expect(sw.swept[0]!.sinkObjects).toBeGreaterThan(0);
    expect(sw.pending).toEqual([]);
    for (const table of [descriptor.checkpointTable, descriptor.stateTable]) {
      const left = await deployment.clients.dynamodb.send(new ScanCommand({ TableName: table, ConsistentRead: true }));
      expect((left.Items ?? []).filter((i) => i.pk!.S!.startsWith(`${run.namespace}#`))).toEqual([]);
      expect((left.Items ?? []).some((i) => i.pk!.S!.startsWith(`${QUERY}#`))).toBe(true);
    }
    expect(await listKeys(deployment.clients.s3, descriptor.sinkBucket!, run.sinkPrefix)).toEqual([]);
    expect((await cli.run(['replay', 'sweep', QUERY])).stdout).toMatch(/no aborted replay of replay-sales to sweep/);
    expect(answerOf(await readS3Snapshots(deployment.clients.s3, descriptor.sinkBucket!, 'results/'))).toEqual(answerOver([...before, ...sales], belowTwenty));
    const again = await cli.run(['replay', 'abort', QUERY]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/No replay of 'replay-sales' to abort/);
    const restarted = await cli.run(['replay', 'start', QUERY, '--from', from]);
    expect(restarted.code, restarted.stderr).toBe(0);
  }, 300_000);

  it('rolls a cutover back: the retired namespace catches up with what the new one processed since, then is live again, fenced the same way', async () => {
    const { deployment, cli, descriptor } = await deployed();
    const bucket = descriptor.sinkBucket!;
    const readLive = async () => answerOf(await readS3Snapshots(deployment.clients.s3, bucket, await liveSinkPrefix(deployment.clients, bucket, 'results/')));
    const from = new Date(Date.now() - 60_000).toISOString();
    const first = wave(20, 0);
    await put(deployment, first);
    await deployment.drain();
    const never = await cli.run(['replay', 'rollback', QUERY]);
    expect(never.code).toBe(1);
    expect(never.stderr).toMatch(/Cannot roll 'replay-sales' back: it was never cut over/);

    const started = JSON.parse((await cli.run(['replay', 'start', QUERY, '--from', from, '--query-module', FIXED_MODULE, '--json'])).stdout) as { namespace: string };
    expect((await cli.run(['replay', 'run', QUERY, '--query-module', FIXED_MODULE])).code).toBe(0);
    expect((await cli.run(['replay', 'cutover', QUERY])).code).toBe(0);
    // The fixed query runs live for a while: the retired namespace does not see these records.
    const second = wave(12, 20);
    await put(deployment, second);
    await deployment.drain({}, {}, fixed);
    expect(await readLive()).toEqual(answerOver([...first, ...second], all));

    const rolled = await cli.run(['replay', 'rollback', QUERY, '--query-module', BUGGY_MODULE, '--batch-size', '5', '--json']);
    expect(rolled.code, rolled.stderr + rolled.stdout).toBe(0);
    expect(JSON.parse(rolled.stdout)).toMatchObject({ namespace: QUERY, retired: started.namespace, readerPointer: { prefix: 'results/' } });
    // Gap-free: the old namespace read the records the fixed one processed after the cutover.
    expect(await readLive()).toEqual(answerOver([...first, ...second], belowTwenty));
    // The rolled-back-from namespace is fenced off, as a cutover fences the one it retires.
    const stale = new DynamoDbCheckpoint({
      client: deployment.clients.dynamodb, checkpointTable: descriptor.checkpointTable, stateTable: descriptor.stateTable,
      queryName: started.namespace, partitionId: 'shardId-000000000000', stateCache: null, commitFence: namespaceFence(descriptor.checkpointTable, QUERY, started.namespace),
    });
    const [latest] = (await stale.commitLog.getLatest())!;
    await expect(stale.commitLog.add(latest + 1, { formatVersion: CHECKPOINT_FORMAT_VERSION, batchId: latest + 1, nextBatchWatermarkMs: 0 }))
      .rejects.toMatchObject({ code: 'NAMESPACE_RETIRED' });
    const third = wave(8, 32);
    await put(deployment, third);
    await deployment.drain();
    expect(await readLive()).toEqual(answerOver([...first, ...second, ...third], belowTwenty));
    const status = await cli.run(['replay', 'status', QUERY]);
    expect(status.stdout).toMatch(new RegExp(`live namespace: ${QUERY} \\(retired: ${started.namespace}\\)`));
  }, 480_000);

  it('a DynamoDB-sink query replays into a table of its own, which becomes the live one at the cutover', async () => {
    const update = defineQuery({ ...buggy, outputMode: 'update', sink: { kind: 'dynamodb' } });
    const deployment = await deploy(emulators, update, 2);
    const descriptor: DeploymentDescriptor = { ...deployment.config, sinkBucket: undefined, sluiceQuery: QUERY };
    const file = join(dir, `deployment-${deployment.config.checkpointTable}.json`);
    writeFileSync(file, JSON.stringify(descriptor));
    const cli = cliFor(file);
    const from = new Date(Date.now() - 60_000).toISOString();
    const sales = wave(16, 0);
    await put(deployment, sales);
    await deployment.drain();
    const liveTable = descriptor.sinkTable!;
    const shadowTable = `${liveTable}-fixed`;
    const tableAnswer = async (table: string) => answerOf(await scanDynamoDbSink(deployment.clients.dynamodb, table));
    const liveBefore = await tableAnswer(liveTable);
    expect(liveBefore).toEqual(answerOver(sales, belowTwenty));

    const refused = await cli.run(['replay', 'start', QUERY, '--from', from]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/a replay needs a table of its own.*--sink-table/s);
    const started = await cli.run(['replay', 'start', QUERY, '--from', from, '--sink-table', shadowTable, '--json']);
    expect(started.code, started.stderr).toBe(0);
    expect(JSON.parse(started.stdout)).toMatchObject({ sinkTable: shadowTable, drivenBy: 'scheduled-function' });
    await deployment.tick(Date.now(), 'tick');
    expect(await tableAnswer(shadowTable)).toEqual(answerOver(sales, belowTwenty));
    expect(await tableAnswer(liveTable)).toEqual(liveBefore);

    const cut = await cli.run(['replay', 'cutover', QUERY]);
    expect(cut.code, cut.stderr).toBe(0);
    expect(cut.stdout).toMatch(new RegExp(`readers: the live sink table is ${shadowTable}`));
    const more = wave(10, 16);
    await put(deployment, more);
    await deployment.drain();
    expect(await tableAnswer(shadowTable)).toEqual(answerOver([...sales, ...more], belowTwenty));
    expect(await tableAnswer(liveTable)).toEqual(liveBefore);
    // A rollback needs the retired namespace's answer: with its table gone it is refused, nothing changed.
    await deleteResources(deployment.clients, { tables: [liveTable] });
    const rollback = await cli.run(['replay', 'rollback', QUERY]);
    expect(rollback.code).toBe(1);
    expect(rollback.stderr).toMatch(new RegExp(`Cannot roll 'replay-sales' back to replay-sales: its sink table ${liveTable} no longer exists`));
    expect((await cli.run(['replay', 'status', QUERY])).stdout).toMatch(/no replay of replay-sales is running/);
    await deleteResources(deployment.clients, { tables: [shadowTable] });
  }, 300_000);

  it('replays across a reshard: the closed parent shard first, then its children seeded from it', async () => {
    const update = defineQuery({ ...buggy, outputMode: 'update', sink: { kind: 'dynamodb' } });
    const deployment = await deploy(emulators, update, 1);
    const descriptor: DeploymentDescriptor = { ...deployment.config, sinkBucket: undefined, sluiceQuery: QUERY };
    const file = join(dir, `deployment-${deployment.config.checkpointTable}.json`);
    writeFileSync(file, JSON.stringify(descriptor));
    const cli = cliFor(file);
    const from = new Date(Date.now() - 60_000).toISOString();
    const first = wave(16, 0);
    await put(deployment, first);
    await deployment.drain();
    const [children] = await reshardStream(deployment.clients.kinesis, descriptor.streamName, [{ split: 'first-open' }]);
    const second = wave(16, 16);
    await put(deployment, second);
    await deployment.drain();
    const expected = answerOver([...first, ...second], belowTwenty);
    const tableAnswer = async (table: string) => answerOf(await scanDynamoDbSink(deployment.clients.dynamodb, table));
    expect(await tableAnswer(descriptor.sinkTable!)).toEqual(expected);

    const shadowTable = `${descriptor.sinkTable!}-replayed`;
    const started = await cli.run(['replay', 'start', QUERY, '--from', from, '--sink-table', shadowTable]);
    expect(started.code, started.stderr).toBe(0);
    const summary = await deployment.tick(Date.now(), 'tick') as ScheduledTriggerSummary;
    const shards = summary.replay!.shards;
    // Parents first: the closed parent, then both children, each with batches of its own.
    expect(shards.map((s) => s.shardId)).toEqual(['shardId-000000000000', ...children!]);
    for (const s of shards) expect(s.batches, JSON.stringify(s)).toBeGreaterThan(0);
    const ready = await cli.run(['replay', 'status', QUERY, '--json']);
    expect(ready.code, ready.stdout).toBe(0);
    expect((JSON.parse(ready.stdout) as { shards: unknown[] }).shards).toHaveLength(3);
    expect(await tableAnswer(shadowTable)).toEqual(expected);
    await deleteResources(deployment.clients, { tables: [shadowTable] });
  }, 300_000);
  it('replays a query with a repartition stage: its records share the internal stream, tagged, and neither run applies the other\'s', async () => {
    const HOP_QUERY = 'replay-sales-hop';
    const hopBuggy = defineQuery({ ...buggy, name: HOP_QUERY, source: { format: 'json', schema: 'store_id string, amount double, ts timestamp' } });
    const deployment = await deploy(emulators, hopBuggy, 2, { repartitionShards: 2, expectedShardCount: undefined });
    const descriptor: DeploymentDescriptor = { ...deployment.config, sluiceQuery: HOP_QUERY };
    const file = join(dir, `deployment-${deployment.config.checkpointTable}.json`);
    writeFileSync(file, JSON.stringify(descriptor));
    const cli = cliFor(file);
    const module = 'test/bin/fixtures/replay-sales-hop-fixed.ts';
    const bucket = descriptor.sinkBucket!;
    const readLive = async () => answerOf(await readS3Snapshots(deployment.clients.s3, bucket, await liveSinkPrefix(deployment.clients, bucket, 'results/')));
    // Partition keys unrelated to the grouping key: a store's sales reach both source shards, so only stage 2 sees a group whole.
    const putSpread = (sales: readonly Sale[], from: number) => deployment.put(sales.map((s, i) => ({ data: JSON.stringify(s), partitionKey: `order-${from + i}` })));
    const from = new Date(Date.now() - 60_000).toISOString();
    const first = wave(30, 0);
    await putSpread(first, 0);
    await deployment.drain();
    expect(await readLive()).toEqual(answerOver(first, belowTwenty));

    const started = await cli.run(['replay', 'start', HOP_QUERY, '--from', from, '--query-module', module, '--json']);
    expect(started.code, started.stderr).toBe(0);
    const run = JSON.parse(started.stdout) as { runId: string; namespace: string; sinkPrefix: string };
    const waiting = JSON.parse((await cli.run(['replay', 'status', HOP_QUERY, '--json'])).stdout) as {
      ready: boolean; shards: { partition: string; label: string; behind: number }[];
    };
    // Two source shards and the internal stream's two shards (stage 2's partitions).
    expect(waiting.shards.map((s) => s.partition).filter((p) => p.startsWith('state.'))).toHaveLength(2);
    expect(waiting.shards.filter((s) => !s.partition.startsWith('state.')).reduce((n, s) => n + s.behind, 0)).toBe(first.length);
    expect(waiting.ready).toBe(false);

    // Smaller batches than the live run's: the shadow's batch ids go past the live ones, so a live
    // stage 2 that took the shadow's records would apply them (and the reverse).
    const replayed = await cli.run(['replay', 'run', HOP_QUERY, '--query-module', module, '--batch-size', '2']);
    expect(replayed.code, replayed.stderr + replayed.stdout).toBe(0);
    expect(answerOf(await readS3Snapshots(deployment.clients.s3, bucket, run.sinkPrefix))).toEqual(answerOver(first, all));
    // The live run goes on, its stage 2 reading past the shadow's records without applying them.
    const second = wave(20, 30);
    await putSpread(second, 30);
    await deployment.drain();
    expect(await readLive()).toEqual(answerOver([...first, ...second], belowTwenty));
    const early = await cli.run(['replay', 'cutover', HOP_QUERY]);
    expect(early.code).toBe(1);
    expect(early.stderr).toMatch(/has not caught up with the live run/);

    const resumed = await cli.run(['replay', 'run', HOP_QUERY, '--query-module', module, '--batch-size', '3']);
    expect(resumed.code, resumed.stderr + resumed.stdout).toBe(0);
    expect(answerOf(await readS3Snapshots(deployment.clients.s3, bucket, run.sinkPrefix))).toEqual(answerOver([...first, ...second], all));
    const cut = await cli.run(['replay', 'cutover', HOP_QUERY, '--json']);
    expect(cut.code, cut.stderr).toBe(0);

    // The fixed query deployed: its stage 1 tags the records with the new live namespace, and its stage 2 applies them.
    const third = wave(15, 50);
    await putSpread(third, 50);
    await deployment.drain({}, {}, hopFixed);
    expect(await readLive()).toEqual(answerOver([...first, ...second, ...third], all));
    expect(answerOf(await readS3Snapshots(deployment.clients.s3, bucket, 'results/'))).toEqual(answerOver([...first, ...second], belowTwenty));
  }, 480_000);
});
