/**
 * `sluice redrive <query> --query-module m` for a one-stage stateful query (no repartition stage:
 * its state lives in each source shard's own partition), on the emulators: the dead letters run as
 * a re-drive batch of the real shard's partition (lib/aws/redrive-batch.ts), inside the
 * exactly-once protocol. The sink equals the in-memory answer over every record, each counted
 * once; a re-drive killed after planning its batch is finished by the live handler, the scheduled
 * function or the next re-drive, once; the live handler racing the re-drive loses or wins a
 * conditional write and nothing is applied twice.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetItemCommand, PutItemCommand, TransactWriteItemsCommand, type TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { defineQuery, type QueryDefinition } from '../../lib/query/query-definition.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import type { DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';
import type { QueryStatus } from '../../lib/aws/query-inspection.js';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { KinesisShardReader, listStreamShards } from '../../lib/aws/kinesis-shard-reader.js';
import { DynamoDbCheckpoint } from '../../lib/aws/dynamodb-checkpoint.js';
import { reprocessDeadLetters, type ReprocessReport } from '../../lib/aws/dead-letter-reprocess.js';
import { runtimeConfigOf } from '../../lib/aws/replay.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { asKinesisOffset } from '../../lib/sources/kinesis-shard-source.js';
import { importQueryModule } from '../../lib/query/query-module.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';
import { emulatorCliEnv, PROJECT_ROOT, runSluice } from '../support/sluice-cli.js';

const QUERY = 'redrive-hourly';
const FIXED = join(PROJECT_ROOT, 'test/bin/fixtures/redrive-hourly-fixed.ts');
/** Two stores on each shard of a two-shard stream (MD5 of the partition key). */
const STORES = ['north', 'south', 'east', 'west'];
/** Event times hours in the past: a record too far ahead of its arrival is dead-lettered (event-time skew). */
const HOUR = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3 * 3_600_000;
interface Sale { store_id: string; amount: number | string; ts: string }

const at = (minutes: number): string => new Date(HOUR + minutes * 60_000).toISOString();
const sales = (n: number, from: number, amount: (i: number) => number | string = (i) => 1 + i): Sale[] =>
  Array.from({ length: n }, (_, i) => ({ store_id: STORES[i % STORES.length]!, amount: amount(i), ts: at(from + i) }));

let emulators: EmulatorSet;
let dir: string;

beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-redrive-stateful-'));
});
afterAll(async () => {
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The deployed query: `amount long`, so a producer sending it as a string ("7") is dead-lettered. */
const deployed: QueryDefinition = defineQuery({
  name: QUERY, source: { schema: 'store_id string, amount long, ts timestamp', partitionKey: 'store_id' },
  transform: (df) => df.withWatermark('ts', '30 minutes')
    .groupBy(window(col('ts'), '1 hour'), col('store_id'))
    .agg(sum(col('amount')).as('total'), count('*').as('n')),
  outputMode: 'update', sink: { kind: 'dynamodb' },
});

/** The in-memory answer: per (store, hour), the sum and count of the sales given. */
function answer(all: readonly Sale[]): string[] {
  const groups = new Map<string, { total: number; n: number }>();
  for (const s of all) {
    const hour = new Date(Math.floor(Date.parse(s.ts) / 3_600_000) * 3_600_000).toISOString();
    const key = `${s.store_id}|${hour}`;
    const g = groups.get(key) ?? { total: 0, n: 0 };
    groups.set(key, { total: g.total + Number(s.amount), n: g.n + 1 });
  }
  return [...groups].map(([k, g]) => `${k}|${g.total}|${g.n}`).sort();
}

interface Setup {
  deployment: Deployment;
  descriptor: DeploymentDescriptor;
  cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }>;
  sink(): Promise<string[]>;
  put(list: readonly Sale[]): Promise<void>;
}

async function setUp(shards: number): Promise<Setup> {
  const deployment = await deploy(emulators, deployed, shards);
  const { clients, config } = deployment;
  const descriptor: DeploymentDescriptor = { ...config, sluiceQuery: QUERY };
  const descriptorFile = join(dir, `deployment-${config.checkpointTable}.json`);
  writeFileSync(descriptorFile, JSON.stringify(descriptor));
  return {
    deployment, descriptor,
    cli: (args) => runSluice([...args, '--deployment', descriptorFile,
      '--endpoint', `kinesis=${emulators.endpoints.kinesis}`, '--endpoint', `dynamodb=${emulators.endpoints.dynamodb}`,
      '--endpoint', `s3=${emulators.endpoints.s3}`], 120_000, emulatorCliEnv(emulators)),
    sink: async () => (await scanDynamoDbSink(clients.dynamodb, config.sinkTable!)).map((r) => {
      const w = r.window as { start: unknown };
      return `${String(r.store_id)}|${new Date(w.start as string).toISOString()}|${Number(r.total)}|${Number(r.n)}`;
    }).sort(),
    put: (list) => deployment.put(list.map((s) => ({ data: JSON.stringify(s), partitionKey: s.store_id }))),
  };
}

async function recordsIn(clients: AwsClients, stream: string): Promise<number> {
  let n = 0;
  for (const shard of await listStreamShards(clients.kinesis, stream)) n += (await new KinesisShardReader(clients.kinesis, stream).readAfter(shard.ShardId!, null)).records.length;
  return n;
}

const isCommit = (items: readonly TransactWriteItem[] | undefined): boolean => (items ?? []).some((i) => i.Put?.Item?.sk?.S?.startsWith('commit#'));
const plansRedrive = (items: readonly TransactWriteItem[] | undefined): boolean =>
  (items ?? []).some((i) => i.Put?.Item?.sk?.S?.startsWith('offset#') && i.Put.Item.entry?.S?.includes('"redrive"'));

/**
 * The deployment's clients with hooks on the DynamoDB client: `before(items)` runs before each
 * TransactWriteItems or PutItem is sent and may throw (a process that dies there) or do something first;
 * `after(command, output)` runs after each request returns.
 */
function hooked(
  before: (items: readonly TransactWriteItem[] | undefined) => Promise<void>,
  after: (command: unknown, output: unknown) => Promise<void> = async () => {},
): AwsClients {
  const clients = createAwsClients(emulators.clientOptions);
  const send = clients.dynamodb.send.bind(clients.dynamodb) as (c: unknown, ...r: unknown[]) => Promise<unknown>;
  const dynamodb = Object.assign(Object.create(clients.dynamodb) as AwsClients['dynamodb'], {
    send: async (command: unknown, ...rest: unknown[]) => {
      // A transaction's items, or a single put as one (a plan without a condition is a plain PutItem).
      if (command instanceof TransactWriteItemsCommand) await before(command.input.TransactItems);
      else if (command instanceof PutItemCommand) await before([{ Put: { TableName: command.input.TableName, Item: command.input.Item } }]);
      const output = await send(command, ...rest);
      await after(command, output);
      return output;
    },
  });
  return { kinesis: clients.kinesis, dynamodb, s3: clients.s3, destroy: () => clients.destroy() };
}

/** A re-drive process that dies right before its first commit after planning a re-drive batch (the batch stays planned). */
function dyingBeforeCommit(): AwsClients {
  let planned = false;
  let dead = false;
  return hooked(async (items) => {
    if (dead) throw new Error('injected: the process is dead');
    if (plansRedrive(items)) planned = true;
    else if (planned && isCommit(items)) {
      dead = true;
      throw new Error('injected: the process died before the commit');
    }
  });
}

/** The shards whose latest offset entry is a planned, uncommitted re-drive batch. */
async function pendingRedrives(setup: Setup): Promise<string[]> {
  const { clients, config } = setup.deployment;
  const pending: string[] = [];
  for (const shard of await listStreamShards(clients.kinesis, config.streamName)) {
    const checkpoint = new DynamoDbCheckpoint({
      client: clients.dynamodb, checkpointTable: config.checkpointTable, stateTable: config.stateTable, queryName: QUERY, partitionId: shard.ShardId!,
    });
    const [latest, commit] = await Promise.all([checkpoint.offsetLog.getLatest(), checkpoint.commitLog.getLatest()]);
    const offset = latest ? asKinesisOffset(Object.values(latest[1].offsets)[0] ?? null) : null;
    if (latest && commit?.[0] !== latest[0] && offset?.redrive) pending.push(shard.ShardId!);
  }
  return pending;
}

describe('sluice redrive --query-module (a one-stage stateful query)', () => {
  it('re-drives dead letters as a batch of the shard\'s own partition: state carries on, late rows are reported, each record once', async () => {
    const setup = await setUp(2);
    const { deployment } = setup;
    const good = sales(16, 0);
    // The producer's bug: amounts as strings. Three on time; one behind the watermark once it is re-driven.
    const bad = sales(3, 20, (i) => String(100 * (i + 1)));
    const late: Sale = { store_id: 'north', amount: '1000', ts: at(-110) };
    await setup.put([...good.slice(0, 8), bad[0]!, late, ...good.slice(8), bad[1]!, bad[2]!]);
    await deployment.drain();
    expect(await setup.sink()).toEqual(answer(good));
    const inStream = await recordsIn(deployment.clients, deployment.config.streamName);

    const first = await setup.cli(['redrive', QUERY, '--query-module', FIXED]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/re-drove 4 record\(s\)/);
    expect(first.stdout).toMatch(/batch \d+ of the shard's own partition/);
    expect(first.stdout).toMatch(/late rows \(behind the watermark, dropped as Spark drops late input\): 1$/m);
    // On-time re-driven sales join their groups' state; the late one is dropped, as Spark drops late input.
    expect(await setup.sink()).toEqual(answer([...good, ...bad]));
    expect(await recordsIn(deployment.clients, deployment.config.streamName)).toBe(inStream);

    // The shard reads on from its real position after the re-drive batch: the next sales, each once.
    const more = sales(8, 40);
    await setup.put(more);
    await deployment.drain({}, {}, await importQueryModule(FIXED));
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...more]));

    const again = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ reprocessed: 0, alreadyRedriven: 4, ofClosedShard: 0, runs: [] });
    const status = await setup.cli(['status', QUERY, '--json']);
    expect(status.code, status.stdout).toBe(0);
    expect((JSON.parse(status.stdout) as QueryStatus).partitions.map((p) => p.partitionId).some((id) => id.includes('@redrive:'))).toBe(false);
  }, 400_000);

  it('a re-drive killed after planning its batch is finished once: by the live handler, by the scheduled function, by the next re-drive', async () => {
    const setup = await setUp(1);
    const { deployment } = setup;
    const fixed = await importQueryModule(FIXED);
    const good = sales(8, 0);
    await setup.put(good);
    await deployment.drain();
    // Three waves of the producer's bug, dead-lettered by the deployed query; each round re-drives one
    // (the latest not re-driven: --since its first arrival), then the fixed query is what runs.
    const waves: { since: number; bad: Sale[] }[] = [];
    for (let w = 0; w < 3; w++) {
      const since = Date.now();
      const bad = sales(2, 10 + 5 * w, (i) => String(100 * (w + 1) + i));
      await setup.put(bad);
      await deployment.drain();
      waves.push({ since, bad });
    }
    expect(await setup.sink()).toEqual(answer(good));
    const applied: Sale[] = [...good];

    const finishers: { name: string; finish: (since: string) => Promise<void> }[] = [
      { name: 'the live handler', finish: async () => {
        const next = sales(4, 30);
        applied.push(...next);
        await setup.put(next);
        await deployment.drain({}, {}, fixed);
      } },
      { name: 'the scheduled function', finish: async () => { await deployment.tick(Date.now(), 'tick', fixed); } },
      { name: 'the next re-drive', finish: async (since) => {
        const resumed = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--since', since, '--json']);
        expect(resumed.code, resumed.stderr).toBe(0);
        expect((JSON.parse(resumed.stdout) as ReprocessReport).runs).toMatchObject([{ records: 2, resumed: true, committedElsewhere: false }]);
      } },
    ];
    for (const [round, { name, finish }] of finishers.entries()) {
      const wave = waves[waves.length - 1 - round]!;
      const since = new Date(wave.since).toISOString();
      const dying = dyingBeforeCommit();
      await expect(reprocessDeadLetters(dying, setup.descriptor, { definition: fixed, config: runtimeConfigOf(setup.descriptor), sinceMs: wave.since }), name)
        .rejects.toThrow(/died before the commit|process is dead/);
      dying.destroy();
      // Planned, its output written (idempotent by batch id), not committed: it must run again exactly so.
      expect(await pendingRedrives(setup), name).toHaveLength(1);

      await finish(since);
      applied.push(...wave.bad);
      expect(await pendingRedrives(setup), name).toEqual([]);
      expect(await setup.sink(), name).toEqual(answer(applied));
      // The run is done: a re-drive closes it (or finds nothing), the next finds nothing, and the sink stays.
      const after = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--since', since, '--json']);
      expect(after.code, after.stderr).toBe(0);
      const report = JSON.parse(after.stdout) as ReprocessReport;
      expect(report.reprocessed, name).toBe(round === 2 ? 0 : 2);
      if (round < 2) expect(report.runs, name).toMatchObject([{ resumed: true, committedElsewhere: true, lateRows: null }]);
      const last = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--since', since, '--json']);
      expect(JSON.parse(last.stdout), name).toMatchObject({ reprocessed: 0, alreadyRedriven: 2 * (round + 1), runs: [] });
      await deployment.drain({}, {}, fixed);
      expect(await setup.sink(), name).toEqual(answer(applied));
    }
  }, 600_000);

  it('the live handler racing the re-drive: it plans first, or it runs the re-drive\'s batch first; each record once', async () => {
    const setup = await setUp(1);
    const { deployment } = setup;
    const fixed = await importQueryModule(FIXED);
    const good = sales(8, 0);
    await setup.put(good);
    await deployment.drain();
    const applied: Sale[] = [...good];
    let round = 0;
    const raceOnce = async (when: 'before-plan' | 'before-commit') => {
      const bad = sales(2, 10 + 5 * round, (i) => String(100 * (round + 1) + i));
      const live = sales(3, 30 + 5 * round);
      round++;
      await setup.put(bad);
      await deployment.drain();
      await setup.put(live);
      let raced = false;
      let plans = 0;
      // The live handler runs in the middle of the re-drive: before it plans (the handler plans the
      // same batch id first) or after it planned and before it commits (the handler runs its batch).
      const racing = hooked(async (items) => {
        if (plansRedrive(items)) plans++;
        const point = when === 'before-plan' ? plansRedrive(items) : isCommit(items);
        if (raced || !point) return;
        raced = true;
        await deployment.drain({}, {}, fixed);
      });
      const report = await reprocessDeadLetters(racing, setup.descriptor, { definition: fixed, config: runtimeConfigOf(setup.descriptor) });
      racing.destroy();
      expect(raced).toBe(true);
      // Before the plan: the handler took the batch id, the re-drive's conditional put lost and it planned the next one.
      expect(plans).toBe(when === 'before-plan' ? 2 : 1);
      expect(report).toMatchObject({ reprocessed: 2, failedAgain: [] });
      expect(report.runs).toMatchObject([{ records: 2, committedElsewhere: when === 'before-commit' }]);
      applied.push(...bad, ...live);
      await deployment.drain({}, {}, fixed);
      expect(await setup.sink(), when).toEqual(answer(applied));
    };
    await raceOnce('before-plan');
    await raceOnce('before-commit');

    // And through the CLI process while the (fixed) handler drains new sales beside it.
    const bad = sales(2, 25, (i) => String(700 + i));
    await setup.put(bad);
    await deployment.drain();
    const live = sales(6, 45);
    await setup.put(live);
    const [cli] = await Promise.all([setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']), deployment.drain({}, {}, fixed)]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({ reprocessed: 2, failedAgain: [] });
    applied.push(...bad, ...live);
    await deployment.drain({}, {}, fixed);
    expect(await setup.sink()).toEqual(answer(applied));
    const last = await setup.cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(JSON.parse(last.stdout)).toMatchObject({ reprocessed: 0, alreadyRedriven: 6, failedAgain: [], runs: [] });
  }, 600_000);

  it('a re-drive resuming a run while the live handler commits it and reads on does not plan the run again', async () => {
    const setup = await setUp(1);
    const { deployment } = setup;
    const fixed = await importQueryModule(FIXED);
    const good = sales(8, 0);
    const bad = sales(2, 10, (i) => String(100 + i));
    await setup.put([...good, ...bad]);
    await deployment.drain();
    const dying = dyingBeforeCommit();
    await expect(reprocessDeadLetters(dying, setup.descriptor, { definition: fixed, config: runtimeConfigOf(setup.descriptor) })).rejects.toThrow(/died/);
    dying.destroy();
    expect(await pendingRedrives(setup)).toHaveLength(1);

    // The resuming re-drive reads its run open twice (before storing, before running); right after
    // the second read, the live handler commits the run's batch and a batch of new sales after it.
    const live = sales(3, 30);
    await setup.put(live);
    let runReads = 0;
    const resuming = hooked(async () => {}, async (command) => {
      if (command instanceof GetItemCommand && command.input.Key?.sk?.S?.startsWith('run#') && ++runReads === 2) await deployment.drain({}, {}, fixed);
    });
    const report = await reprocessDeadLetters(resuming, setup.descriptor, { definition: fixed, config: runtimeConfigOf(setup.descriptor) });
    resuming.destroy();
    expect(runReads).toBeGreaterThanOrEqual(3);
    await deployment.drain({}, {}, fixed);
    expect(await setup.sink()).toEqual(answer([...good, ...bad, ...live]));
    // Its plan of the run again was refused (the run is done): the handler's commit was the only one.
    expect(report.runs).toMatchObject([{ records: 2, resumed: true, committedElsewhere: true }]);
  }, 400_000);

  it('a query over several streams is refused before any AWS call, as a usage error that says what to do', async () => {
    const module = join(PROJECT_ROOT, 'test/bin/fixtures/redrive-two-streams.ts');
    const refused = await runSluice(['redrive', 'redrive-two-streams', '--query-module', module, '--deployment', join(dir, 'missing.json')], 60_000, emulatorCliEnv(emulators));
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toMatch(/reads several streams/);
    expect(refused.stderr).toMatch(/send those records again from their producer/);
  }, 120_000);
});
