/**
 * `sluice redrive <query> --skipped --query-module m` on the emulators, through the real CLI: the
 * records of a skipped source range run through the query itself (a pseudo-shard of their own, as
 * dead letters do), never back into the source stream that other consumers read. For a stateless
 * query and for one with a repartition stage: the source stream keeps its record count; the sink
 * equals the in-memory answer over every good record, each once; the undecodable record is
 * dead-lettered; a re-drive that dies before its commit is resumed once; a second re-drive finds
 * nothing; `sluice status` is healthy afterwards.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { PutRecordsCommand, type KinesisClient } from '@aws-sdk/client-kinesis';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import type { QueryStatus } from '../../lib/aws/query-inspection.js';
import { runtimeConfigOf } from '../../lib/aws/replay.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { readS3Files, scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { redriveSkippedBatches, sourceCheckOf, type SkippedRedriveReport } from '../../lib/aws/skipped-batch-redrive.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { importQueryModule } from '../../lib/query/query-module.js';
import type { DeploymentDescriptor, RuntimeConfig } from '../../lib/runtime/runtime-config.js';
import { deploy } from '../support/aws-pipeline.js';
import { PROJECT_ROOT } from '../support/sluice-cli.js';
import { cliFor, crashingRecords, inGivenUp, putEach, recordsIn } from '../support/skipped-ranges.js';

interface Sale { store_id: string; amount: number }
const stores = ['north', 'south', 'east'];
const sales: Sale[] = Array.from({ length: 24 }, (_, i) => ({ store_id: stores[(i * 5) % 3]!, amount: 1 + ((i * 7) % 11) }));
const UNDECODABLE = '{"store_id": "north", "amount": ';
/** Indexes (in `sales`, the undecodable record put before the second) whose records crash the function on every delivery. */
const CRASHING = [5, 17];

let emulators: EmulatorSet;
let dir: string;
beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-skipped-query-'));
});
afterAll(async () => {
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The deployment's clients with one fault: the first checkpoint transaction after the stage wrote its output dies (the process killed before the commit). */
function dyingBeforeCommit(clients: AwsClients, wroteOutput: (command: unknown) => boolean): AwsClients {
  let wrote = false;
  let died = false;
  const watched = <C extends KinesisClient | S3Client>(client: C): C => {
    const send = (client.send as (c: unknown, ...r: unknown[]) => Promise<unknown>).bind(client);
    return Object.assign(Object.create(client) as C, {
      send: async (command: unknown, ...rest: unknown[]) => {
        const out = await send(command, ...rest);
        if (wroteOutput(command)) wrote = true;
        return out;
      },
    });
  };
  const dynamodbSend = (clients.dynamodb.send as (c: unknown, ...r: unknown[]) => Promise<unknown>).bind(clients.dynamodb);
  const dynamodb = Object.assign(Object.create(clients.dynamodb) as AwsClients['dynamodb'], {
    send: async (command: unknown, ...rest: unknown[]) => {
      if (wrote && !died && command instanceof TransactWriteItemsCommand) {
        died = true;
        throw new Error('injected: the process died before the commit');
      }
      return dynamodbSend(command, ...rest);
    },
  });
  return { kinesis: watched(clients.kinesis), dynamodb, s3: watched(clients.s3), destroy: () => clients.destroy() };
}

interface Case {
  readonly module: string;
  readonly shards: number;
  readonly repartitionShards?: number;
  /** The sink as sorted strings, and the in-memory answer over `sales` in the same form. */
  readonly sink: (clients: AwsClients, config: RuntimeConfig) => Promise<string[]>;
  readonly expected: (sales: readonly Sale[]) => string[];
  /** The stage's output write the injected death comes after. */
  readonly wroteOutput: (config: RuntimeConfig) => (command: unknown) => boolean;
}

const largeSales: Case = {
  module: 'test/bin/fixtures/skipsrc-large-sales.ts',
  shards: 1,
  sink: async (clients, config) => (await readS3Files(clients.s3, config.sinkBucket!, config.sinkPrefix!)).map((r) => `${String(r.store_id)}|${Number(r.amount)}`).sort(),
  expected: (all) => all.filter((s) => s.amount > 3).map((s) => `${s.store_id}|${s.amount}`).sort(),
  wroteOutput: (config) => (command) => command instanceof PutObjectCommand && command.input.Bucket === config.sinkBucket,
};

const byStore: Case = {
  module: 'test/bin/fixtures/skipsrc-by-store.ts',
  shards: 2,
  repartitionShards: 1,
  sink: async (clients, config) => (await scanDynamoDbSink(clients.dynamodb, config.sinkTable!)).map((r) => `${String(r.store_id)}|${Number(r.total)}|${Number(r.n)}`).sort(),
  expected: (all) => {
    const groups = new Map<string, { total: number; n: number }>();
    for (const s of all) {
      const g = groups.get(s.store_id) ?? { total: 0, n: 0 };
      groups.set(s.store_id, { total: g.total + s.amount, n: g.n + 1 });
    }
    return [...groups].map(([k, g]) => `${k}|${g.total}|${g.n}`).sort();
  },
  wroteOutput: (config) => (command) => command instanceof PutRecordsCommand && command.input.StreamName === config.repartitionStreamName,
};

async function skippedRangesRunThroughTheQuery(c: Case): Promise<void> {
  const definition = await importQueryModule(join(PROJECT_ROOT, c.module));
  const query = definition.name;
  const crash = crashingRecords();
  const deployment = await deploy(emulators, definition, c.shards, { asFunction: crash.asFunction, ...(c.repartitionShards ? { repartitionShards: c.repartitionShards } : {}) });
  const { clients, config } = deployment;
  const descriptor: DeploymentDescriptor = { ...config, sluiceQuery: query };
  const cli = cliFor(emulators, config, query, dir, { timeoutMs: 120_000 });
  const sink = () => c.sink(clients, config);

  // The undecodable record goes just before the second crashing sale; both crash, so both are given up.
  const inputs = sales.map((s, i) => ({ data: JSON.stringify(s), partitionKey: `p${i}` }));
  inputs.splice(CRASHING[1]!, 0, { data: UNDECODABLE, partitionKey: `p${CRASHING[1]}` });
  const placed = await putEach(clients.kinesis, config.streamName, inputs);
  for (const index of [CRASHING[0]!, CRASHING[1]!, CRASHING[1]! + 1]) crash.crashing.add(placed[index]!.sequenceNumber);
  const saleAt = (i: number): number => (i < CRASHING[1]! ? i : i + 1);
  // Each drain reads the stream from its start (a new local mapping): the same batches crash and are given up again, recorded once.
  const drain = () => deployment.drain({ batchSize: 4, bisectBatchOnFunctionError: false, ...crash.drainOptions(definition, config, emulators) });
  await drain();
  const gaveUp = [...crash.gaveUp];

  // Whole batches were given up around the crashing records: the sink lacks exactly their sales.
  expect(gaveUp.length).toBeGreaterThanOrEqual(2);
  const skippedSales = sales.filter((_, i) => inGivenUp(gaveUp, placed[saleAt(i)]!));
  expect(skippedSales.length).toBeGreaterThanOrEqual(2);
  expect(await sink()).toEqual(c.expected(sales.filter((_, i) => !inGivenUp(gaveUp, placed[saleAt(i)]!))));
  const inStream = await recordsIn(clients.kinesis, config.streamName);
  expect(inStream).toBe(inputs.length);
  const waiting = await cli(['status', query, '--json']);
  expect(waiting.code, waiting.stdout).toBe(1);
  expect((JSON.parse(waiting.stdout) as QueryStatus).skippedRanges).toHaveLength(gaveUp.length);

  // Without a way to re-drive (no query module, no --into-stream): the ranges wait, nothing written.
  const bare = await cli(['redrive', query, '--skipped', '--json']);
  expect(bare.code, bare.stderr).toBe(1);
  expect((JSON.parse(bare.stdout) as SkippedRedriveReport).ranges.every((r) => r.outcome === null && /--query-module/.test(r.note ?? ''))).toBe(true);

  // A re-drive that dies after the stage wrote its output and before its commit.
  const faulty = dyingBeforeCommit(createAwsClients(emulators.clientOptions), c.wroteOutput(config));
  await expect(redriveSkippedBatches(faulty, descriptor, {
    check: sourceCheckOf(definition, descriptor), throughQuery: { definition, config: runtimeConfigOf(descriptor) },
  })).rejects.toThrow(/run again to resume/);
  faulty.destroy();

  const resumed = await cli(['redrive', query, '--skipped', '--query-module', c.module, '--json']);
  expect(resumed.code, resumed.stderr).toBe(0);
  const report = JSON.parse(resumed.stdout) as SkippedRedriveReport;
  expect(report).toMatchObject({ into: 'query', redriven: skippedSales.length, deadLettered: 1, expired: 0, alreadyCommitted: 0, skippedAgain: 0, alreadyRedriven: 0 });
  expect(report.ranges.flatMap((r) => r.runs ?? []).filter((r) => r.resumed)).toHaveLength(1);
  expect(report.ranges.flatMap((r) => r.runs ?? []).reduce((n, r) => n + r.records, 0)).toBe(skippedSales.length);
  const letters = await readDeadLetters(clients.s3, config.deadLetterBucket, `dead-letter/${query}/`);
  expect(letters.map((l) => Buffer.from(l.dataBase64, 'base64').toString())).toEqual([UNDECODABLE]);

  // Stage 2 (if any) applies the re-drive's rows; the source stream was not written.
  await drain();
  expect(await sink()).toEqual(c.expected(sales));
  expect(await recordsIn(clients.kinesis, config.streamName)).toBe(inStream);

  // Once: a second re-drive finds every range done, and runs nothing.
  const again = await cli(['redrive', query, '--skipped', '--query-module', c.module, '--json']);
  expect(again.code, again.stderr).toBe(0);
  expect(JSON.parse(again.stdout)).toMatchObject({ redriven: 0, deadLettered: 0, alreadyRedriven: gaveUp.length, ranges: [] });
  await drain();
  expect(await sink()).toEqual(c.expected(sales));
  const status = await cli(['status', query, '--json']);
  expect(status.code, status.stdout).toBe(0);
  const healthy = JSON.parse(status.stdout) as QueryStatus;
  expect(healthy.skippedRanges).toEqual([]);
  expect(healthy.partitions.some((p) => p.partitionId.includes('@redrive:'))).toBe(false);
}

describe('sluice redrive --skipped --query-module: skipped source ranges through the query', () => {
  it('a stateless query (append → S3 files): once, the stream unchanged, a stopped re-drive resumed', async () => {
    await skippedRangesRunThroughTheQuery(largeSales);
  }, 400_000);

  it('a query with a repartition stage: once, the stream unchanged, a stopped re-drive resumed', async () => {
    await skippedRangesRunThroughTheQuery(byStore);
  }, 400_000);
});
