/**
 * `sluice redrive <query> --query-module m` on the emulators: dead letters run through the fixed
 * query in the CLI's process, never back into the source stream (which other consumers read), for
 * a query with a repartition stage (stage 1's routing, then stage 2 applies them once under their
 * pseudo-shard's own progress entry). A re-drive that stops after stage 1 sent its rows and before
 * its commit is resumed by the next one without a duplicate.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutRecordsCommand, type KinesisClient } from '@aws-sdk/client-kinesis';
import { TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { col, count, sum } from '../../lib/plan/functions.js';
import type { DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';
import type { QueryStatus } from '../../lib/aws/query-inspection.js';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { KinesisShardReader, listStreamShards } from '../../lib/aws/kinesis-shard-reader.js';
import { reprocessDeadLetters, type ReprocessReport } from '../../lib/aws/dead-letter-reprocess.js';
import { runtimeConfigOf } from '../../lib/aws/replay.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { importQueryModule } from '../../lib/query/query-module.js';
import { deploy } from '../support/aws-pipeline.js';
import { emulatorCliEnv, PROJECT_ROOT, runSluice } from '../support/sluice-cli.js';

const QUERY = 'redrive-sales';
const FIXED = join(PROJECT_ROOT, 'test/bin/fixtures/redrive-sales-fixed.ts');
const stores = ['north', 'south', 'east'];
interface Sale { store_id: string; amount: number | string }
const good: Sale[] = Array.from({ length: 12 }, (_, i) => ({ store_id: stores[i % 3]!, amount: 1 + i }));
/** The producer's bug: amounts as strings, which the deployed query (amount long) dead-letters. */
const bad: Sale[] = [{ store_id: 'north', amount: '100' }, { store_id: 'south', amount: '200' }, { store_id: 'north', amount: '300' }];

let emulators: EmulatorSet;
let dir: string;

beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-redrive-query-'));
});
afterAll(async () => {
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function expectedRows(all: readonly Sale[]): string[] {
  const groups = new Map<string, { total: number; n: number }>();
  for (const s of all) {
    const g = groups.get(s.store_id) ?? { total: 0, n: 0 };
    groups.set(s.store_id, { total: g.total + Number(s.amount), n: g.n + 1 });
  }
  return [...groups].map(([k, g]) => `${k}|${g.total}|${g.n}`).sort();
}

async function recordsIn(kinesis: KinesisClient, stream: string): Promise<number> {
  let n = 0;
  for (const shard of await listStreamShards(kinesis, stream)) n += (await new KinesisShardReader(kinesis, stream).readAfter(shard.ShardId!, null)).records.length;
  return n;
}

/** The deployment's clients with one fault: the first checkpoint transaction after stage 1's hop write fails (a crash before the commit). */
function crashingBeforeCommit(clients: AwsClients, internalStream: string): AwsClients {
  let sent = false;
  let crashed = false;
  const kinesisSend = clients.kinesis.send.bind(clients.kinesis);
  const dynamodbSend = clients.dynamodb.send.bind(clients.dynamodb);
  const kinesis = Object.assign(Object.create(clients.kinesis) as KinesisClient, {
    send: async (command: unknown, ...rest: unknown[]) => {
      const out = await (kinesisSend as (c: unknown, ...r: unknown[]) => Promise<unknown>)(command, ...rest);
      if (command instanceof PutRecordsCommand && command.input.StreamName === internalStream) sent = true;
      return out;
    },
  });
  const dynamodb = Object.assign(Object.create(clients.dynamodb) as AwsClients['dynamodb'], {
    send: async (command: unknown, ...rest: unknown[]) => {
      if (sent && !crashed && command instanceof TransactWriteItemsCommand) {
        crashed = true;
        throw new Error('injected: the process died before the commit');
      }
      return (dynamodbSend as (c: unknown, ...r: unknown[]) => Promise<unknown>)(command, ...rest);
    },
  });
  return { kinesis, dynamodb, s3: clients.s3, destroy: () => clients.destroy() };
}

describe('sluice redrive --query-module (a query with a repartition stage)', () => {
  it('runs the dead letters through the fixed query once, writes nothing into the source stream, and resumes a stopped re-drive', async () => {
    const definition = defineQuery({
      name: QUERY, source: { schema: 'store_id string, amount long' }, outputMode: 'update', sink: { kind: 'dynamodb' },
      transform: (df) => df.groupBy(col('store_id')).agg(sum(col('amount')).as('total'), count('*').as('n')),
    });
    const deployment = await deploy(emulators, definition, 2, { repartitionShards: 1 });
    const { clients, config } = deployment;
    const descriptor: DeploymentDescriptor = { ...config, sluiceQuery: QUERY };
    const descriptorFile = join(dir, 'deployment.json');
    writeFileSync(descriptorFile, JSON.stringify(descriptor));
    const cli = (args: string[]) => runSluice([...args, '--deployment', descriptorFile,
      '--endpoint', `kinesis=${emulators.endpoints.kinesis}`, '--endpoint', `dynamodb=${emulators.endpoints.dynamodb}`,
      '--endpoint', `s3=${emulators.endpoints.s3}`], 120_000, emulatorCliEnv(emulators));
    const sink = async () => (await scanDynamoDbSink(clients.dynamodb, config.sinkTable!)).map((r) => `${String(r.store_id)}|${Number(r.total)}|${Number(r.n)}`).sort();

    await deployment.put([...good.slice(0, 6), bad[0]!, ...good.slice(6), bad[1]!].map((s, i) => ({ data: JSON.stringify(s), partitionKey: `p${i}` })));
    await deployment.drain();
    expect(await sink()).toEqual(expectedRows(good));
    const inStream = await recordsIn(clients.kinesis, config.streamName);
    expect(inStream).toBe(good.length + 2);

    // No query module: refused (a usage error), nothing written.
    const bare = await cli(['redrive', QUERY]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toMatch(/--query-module/);

    const first = await cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(first.code, first.stderr).toBe(0);
    const r1 = JSON.parse(first.stdout) as ReprocessReport;
    expect(r1).toMatchObject({ reprocessed: 2, alreadyRedriven: 0, failedAgain: [] });
    // Stage 2 applies the hop's rows of the re-drive's own partition: each sale once.
    await deployment.drain();
    expect(await sink()).toEqual(expectedRows([...good, bad[0]!, bad[1]!]));
    expect(await recordsIn(clients.kinesis, config.streamName)).toBe(inStream);
    const again = await cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ reprocessed: 0, alreadyRedriven: 2 });

    // A re-drive that dies after stage 1 sent its rows and before its commit: the next one finishes it, once.
    await deployment.put([{ data: JSON.stringify(bad[2]), partitionKey: 'p-late' }]);
    await deployment.drain();
    const fixed = await importQueryModule(FIXED);
    const faulty = crashingBeforeCommit(createAwsClients(emulators.clientOptions), config.repartitionStreamName!);
    await expect(reprocessDeadLetters(faulty, descriptor, { definition: fixed, config: runtimeConfigOf(descriptor) })).rejects.toThrow(/run again to resume/);
    faulty.destroy();
    const resumed = await cli(['redrive', QUERY, '--query-module', FIXED, '--json']);
    expect(resumed.code, resumed.stderr).toBe(0);
    const r3 = JSON.parse(resumed.stdout) as ReprocessReport;
    expect(r3.runs).toMatchObject([{ records: 1, resumed: true }]);
    expect(r3).toMatchObject({ reprocessed: 1, alreadyRedriven: 2, failedAgain: [] });
    await deployment.drain();
    await deployment.drain();
    expect(await sink()).toEqual(expectedRows([...good, ...bad]));
    expect(await recordsIn(clients.kinesis, config.streamName)).toBe(inStream + 1);

    // The re-drives' partitions are not shards: status is healthy and lists only the stream's.
    const status = await cli(['status', QUERY, '--json']);
    expect(status.code, status.stdout).toBe(0);
    expect((JSON.parse(status.stdout) as QueryStatus).partitions.some((p) => p.partitionId.includes('@redrive:'))).toBe(false);
  }, 400_000);
});
