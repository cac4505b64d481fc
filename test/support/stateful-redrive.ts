/**
 * What the tests of `sluice redrive --query-module` for a one-stage stateful query share
 * (test/bin/redrive-stateful*, redrive-resharded*): the deployed hourly query whose producer bug
 * (amounts as strings) dead-letters records, its fixed module, the in-memory answer, a deployment
 * with the CLI pointed at it, DynamoDB clients with a hook (a process that dies at a chosen write),
 * and the kill-after-planning step the crash tests repeat.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PutItemCommand, TransactWriteItemsCommand, type TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { expect } from 'vitest';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { reprocessDeadLetters, type ReprocessOptions } from '../../lib/aws/dead-letter-reprocess.js';
import { DynamoDbCheckpoint } from '../../lib/aws/dynamodb-checkpoint.js';
import { listStreamShards } from '../../lib/aws/kinesis-shard-reader.js';
import { runtimeConfigOf } from '../../lib/aws/replay.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import type { EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { defineQuery, type QueryDefinition } from '../../lib/query/query-definition.js';
import type { DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';
import { asKinesisOffset } from '../../lib/sources/kinesis-shard-source.js';
import { deploy, type Deployment, type InvocationWrapper } from './aws-pipeline.js';
import { emulatorCliEnv, PROJECT_ROOT, runSluice } from './sluice-cli.js';

export const QUERY = 'redrive-hourly';
export const FIXED = join(PROJECT_ROOT, 'test/bin/fixtures/redrive-hourly-fixed.ts');
/** Two stores in each half of the hash-key space (MD5 of the partition key): a split gives each child two. */
const STORES = ['north', 'south', 'east', 'west'];
/** Event times hours in the past: a record too far ahead of its arrival is dead-lettered (event-time skew). */
const HOUR = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3 * 3_600_000;
export interface Sale { store_id: string; amount: number | string; ts: string }

export const at = (minutes: number): string => new Date(HOUR + minutes * 60_000).toISOString();
export const sales = (n: number, from: number, amount: (i: number) => number | string = (i) => 1 + i): Sale[] =>
  Array.from({ length: n }, (_, i) => ({ store_id: STORES[i % STORES.length]!, amount: amount(i), ts: at(from + i) }));

/** The deployed query: `amount long`, so a producer sending it as a string ("7") is dead-lettered. */
export const deployed: QueryDefinition = defineQuery({
  name: QUERY, source: { schema: 'store_id string, amount long, ts timestamp', partitionKey: 'store_id' },
  transform: (df) => df.withWatermark('ts', '30 minutes')
    .groupBy(window(col('ts'), '1 hour'), col('store_id'))
    .agg(sum(col('amount')).as('total'), count('*').as('n')),
  outputMode: 'update', sink: { kind: 'dynamodb' },
});

/** The in-memory answer: per (store, hour), the sum and count of the sales given. */
export function answer(all: readonly Sale[]): string[] {
  const groups = new Map<string, { total: number; n: number }>();
  for (const s of all) {
    const hour = new Date(Math.floor(Date.parse(s.ts) / 3_600_000) * 3_600_000).toISOString();
    const key = `${s.store_id}|${hour}`;
    const g = groups.get(key) ?? { total: 0, n: 0 };
    groups.set(key, { total: g.total + Number(s.amount), n: g.n + 1 });
  }
  return [...groups].map(([k, g]) => `${k}|${g.total}|${g.n}`).sort();
}

export interface Setup {
  deployment: Deployment;
  descriptor: DeploymentDescriptor;
  cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }>;
  sink(): Promise<string[]>;
  put(list: readonly Sale[]): Promise<void>;
}

export async function setUp(emulators: EmulatorSet, dir: string, shards: number, asFunction?: InvocationWrapper): Promise<Setup> {
  const deployment = await deploy(emulators, deployed, shards, asFunction ? { asFunction } : {});
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

export const isCommit = (items: readonly TransactWriteItem[] | undefined): boolean => (items ?? []).some((i) => i.Put?.Item?.sk?.S?.startsWith('commit#'));
export const plansRedrive = (items: readonly TransactWriteItem[] | undefined): boolean =>
  (items ?? []).some((i) => i.Put?.Item?.sk?.S?.startsWith('offset#') && i.Put.Item.entry?.S?.includes('"redrive"'));

/**
 * The emulators' clients with hooks on the DynamoDB client: `before(items)` runs before each
 * TransactWriteItems or PutItem is sent and may throw (a process that dies there) or do something first;
 * `after(command, output)` runs after each request returns.
 */
export function hooked(
  emulators: EmulatorSet,
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
export function dyingBeforeCommit(emulators: EmulatorSet): AwsClients {
  let planned = false;
  let dead = false;
  return hooked(emulators, async (items) => {
    if (dead) throw new Error('injected: the process is dead');
    if (plansRedrive(items)) planned = true;
    else if (planned && isCommit(items)) {
      dead = true;
      throw new Error('injected: the process died before the commit');
    }
  });
}

/** The shards whose latest offset entry is a planned, uncommitted re-drive batch. */
export async function pendingRedrives(setup: Setup): Promise<string[]> {
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

/**
 * A re-drive of the dead letters through `fixed` killed right before its batch's commit: it
 * throws, and the batch stays planned (output written, idempotent by batch id) on `pending`
 * shard(s), for whoever finishes it.
 */
export async function killAfterPlanning(
  emulators: EmulatorSet, setup: Setup, fixed: QueryDefinition, options: Partial<ReprocessOptions> = {}, pending = 1, name?: string,
): Promise<void> {
  const dying = dyingBeforeCommit(emulators);
  await expect(reprocessDeadLetters(dying, setup.descriptor, { definition: fixed, config: runtimeConfigOf(setup.descriptor), ...options }), name)
    .rejects.toThrow(/died before the commit|process is dead/);
  dying.destroy();
  expect(await pendingRedrives(setup), name).toHaveLength(pending);
}
