/**
 * A stage-2 batch the event source mapping gave up on, end to end on the emulators: a query with a
 * repartition stage; stage 2 crashes on every delivery of the internal-stream record that carries
 * one stage-1 batch, so the mapping skips it (the real on-failure handler records the range) and
 * goes on with the later stage-1 batches. Stage 2 has then moved past that source batch: the record
 * put back as it was would be dropped as a duplicate. `sluice redrive --skipped` puts it back tagged
 * with the range; stage 2 applies it once, and the sink holds every sale. A replay's shadow run
 * shares the internal stream and reads it itself: its records in a skipped range are left alone.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutRecordCommand } from '@aws-sdk/client-kinesis';
import type { KinesisStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { col, count, sum } from '../../lib/plan/functions.js';
import type { DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';
import type { QueryStatus } from '../../lib/aws/query-inspection.js';
import { createOnFailureHandler } from '../../lib/aws/on-failure-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import type { SkippedRedriveReport } from '../../lib/aws/skipped-batch-redrive.js';
import { deliverToOnFailureHandler } from '../../lib/local/on-failure-destination.js';
import { KinesisShardReader } from '../../lib/aws/kinesis-shard-reader.js';
import { decodeRepartitionRecord, encodeRepartitionRecord, REPARTITION_RECORD_VERSION } from '../../lib/sources/repartition-records.js';
import type { BatchFailureInfo } from '../../lib/local/event-source-mapping.js';
import { deploy, type InvocationWrapper } from '../support/aws-pipeline.js';
import { runSluice, emulatorCliEnv } from '../support/sluice-cli.js';

const QUERY = 'skipped-stage-two';
const stores = ['north', 'south', 'east', 'west', 'central'];
interface Sale { store_id: string; amount: number }
const sales: Sale[] = Array.from({ length: 40 }, (_, i) => ({ store_id: stores[(i * 7) % stores.length]!, amount: 1 + ((i * 13) % 29) }));
/** The sale whose stage-1 batch stage 2 crashes on (the marker is in its internal record's rows). */
const POISON = 'poison-store';

let emulators: EmulatorSet;
let dir: string;
let cliEnv: Record<string, string>;

beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-skipped-internal-'));
  cliEnv = emulatorCliEnv(emulators);
});
afterAll(async () => {
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function expectedRows(all: readonly Sale[]): string[] {
  const groups = new Map<string, { total: number; n: number }>();
  for (const s of all) {
    const g = groups.get(s.store_id) ?? { total: 0, n: 0 };
    groups.set(s.store_id, { total: g.total + s.amount, n: g.n + 1 });
  }
  return [...groups].map(([k, g]) => `${k}|${g.total}|${g.n}`).sort();
}

describe('a skipped batch of stage 2 (the internal stream)', () => {
  it('is put back by `sluice redrive --skipped` and applied once, although stage 2 moved past its source batch', async () => {
    const definition = defineQuery({
      name: QUERY, source: { schema: 'store_id string, amount long' }, outputMode: 'update', sink: { kind: 'dynamodb' },
      transform: (df) => df.groupBy(col('store_id')).agg(sum(col('amount')).as('total'), count('*').as('n')),
    });
    let crashing = true;
    const asFunction: InvocationWrapper = async (role, invoke, event) => {
      const records = (event as KinesisStreamEvent | undefined)?.Records ?? [];
      const poisoned = records.some((r) => Buffer.from(r.kinesis.data, 'base64').toString().includes(POISON));
      if (crashing && role === 'repartition' && poisoned) throw new Error('Runtime exited with error: signal: killed');
      return invoke();
    };
    const deployment = await deploy(emulators, definition, 2, { repartitionShards: 1, asFunction });
    const { clients, config } = deployment;
    const descriptorFile = join(dir, 'deployment.json');
    writeFileSync(descriptorFile, JSON.stringify({ ...config, sluiceQuery: QUERY } satisfies DeploymentDescriptor));
    const cli = (args: string[]) => runSluice([...args, '--deployment', descriptorFile,
      '--endpoint', `kinesis=${emulators.endpoints.kinesis}`, '--endpoint', `dynamodb=${emulators.endpoints.dynamodb}`,
      '--endpoint', `s3=${emulators.endpoints.s3}`], 60_000, cliEnv);

    const all = [...sales.slice(0, 20), { store_id: POISON, amount: 1000 }, ...sales.slice(20)];
    const onFailure = createOnFailureHandler(definition, { config, clientOptions: emulators.clientOptions, observability: createQuietObservability(QUERY) });
    const gaveUp: BatchFailureInfo[] = [];
    const mapping = {
      maximumRetryAttempts: 1, retryBackoffMs: 5, batchSize: 10,
      onFailure: async (info: BatchFailureInfo) => { gaveUp.push(info); await deliverToOnFailureHandler(onFailure, info); },
    };
    // Stage 1 sends one record per batch to the internal shard; the poison's batch is not the last.
    await deployment.put(all.map((s, i) => ({ data: JSON.stringify(s), partitionKey: `p${i}` })));
    await deployment.drain(mapping);

    expect(gaveUp).toHaveLength(1);
    expect(gaveUp[0]!.streamArn).toContain(config.repartitionStreamName);
    const sink = async () => (await scanDynamoDbSink(clients.dynamodb, config.sinkTable!)).map((r) => `${String(r.store_id)}|${Number(r.total)}|${Number(r.n)}`).sort();
    const skipped = await sink();
    expect(skipped.some((r) => r.startsWith(POISON))).toBe(false);
    expect(skipped).not.toEqual(expectedRows(sales));

    const status = JSON.parse((await cli(['status', QUERY, '--json'])).stdout) as QueryStatus;
    expect(status.skippedRanges).toHaveLength(1);
    expect(status.skippedRanges[0]).toMatchObject({ streamName: config.repartitionStreamName, state: 'waiting' });

    crashing = false;
    const redrive = await cli(['redrive', QUERY, '--skipped', '--json']);
    expect(redrive.code, redrive.stderr).toBe(0);
    const report = JSON.parse(redrive.stdout) as SkippedRedriveReport;
    expect(report).toMatchObject({ redriven: 1, deadLettered: 0, expired: 0, skippedAgain: 0, alreadyRedriven: 0 });
    const again = await cli(['redrive', QUERY, '--skipped', '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ redriven: 0, alreadyRedriven: 1 });

    // Stage 2 applies the put-back record under the range's own entry: every sale counted once.
    await deployment.drain(mapping);
    expect(await sink()).toEqual(expectedRows(all));
    // Once more: nothing changes.
    await deployment.drain(mapping);
    expect(await sink()).toEqual(expectedRows(all));
  }, 300_000);

  it('leaves the records of a replay\'s shadow run in the range alone (the shadow reads them itself)', async () => {
    const query = `${QUERY}-shadowed`;
    const definition = defineQuery({
      name: query, source: { schema: 'store_id string, amount long' }, outputMode: 'update', sink: { kind: 'dynamodb' },
      transform: (df) => df.groupBy(col('store_id')).agg(sum(col('amount')).as('total'), count('*').as('n')),
    });
    const SHADOW = `${query}-replay-1`;
    const asFunction: InvocationWrapper = async (role, invoke, event) => {
      const records = (event as KinesisStreamEvent | undefined)?.Records ?? [];
      if (role === 'repartition' && records.some((r) => Buffer.from(r.kinesis.data, 'base64').toString().includes(SHADOW))) throw new Error('Runtime exited with error');
      return invoke();
    };
    const deployment = await deploy(emulators, definition, 2, { repartitionShards: 1, asFunction });
    const { clients, config } = deployment;
    const internal = config.repartitionStreamName!;
    const descriptorFile = join(dir, 'deployment-shadowed.json');
    writeFileSync(descriptorFile, JSON.stringify({ ...config, sluiceQuery: query } satisfies DeploymentDescriptor));
    const cli = (args: string[]) => runSluice([...args, '--deployment', descriptorFile,
      '--endpoint', `kinesis=${emulators.endpoints.kinesis}`, '--endpoint', `dynamodb=${emulators.endpoints.dynamodb}`,
      '--endpoint', `s3=${emulators.endpoints.s3}`], 60_000, cliEnv);
    const onFailure = createOnFailureHandler(definition, { config, clientOptions: emulators.clientOptions, observability: createQuietObservability(query) });
    const mapping = { maximumRetryAttempts: 1, retryBackoffMs: 5, batchSize: 10, onFailure: (info: BatchFailureInfo) => deliverToOnFailureHandler(onFailure, info) };

    await deployment.put(sales.slice(0, 10).map((s, i) => ({ data: JSON.stringify(s), partitionKey: `p${i}` })));
    await deployment.drain(mapping);
    // A record of the shadow run (its own batch ids, one the live run has not reached; its namespace), on which the live stage 2 crashes.
    const shardId = (await clients.kinesis.send(new PutRecordCommand({
      StreamName: internal, PartitionKey: 'shadow', Data: encodeRepartitionRecord({
        v: REPARTITION_RECORD_VERSION, kind: 'rows', src: 'shardId-000000000000', batch: 1000, part: 0, parts: 1, maxEventTimeMs: null, rows: [['north', 5]], ns: SHADOW,
      }),
    }))).ShardId!;
    await deployment.put(sales.slice(10, 20).map((s, i) => ({ data: JSON.stringify(s), partitionKey: `q${i}` })));
    await deployment.drain(mapping);
    const waiting = JSON.parse((await cli(['status', query, '--json'])).stdout) as QueryStatus;
    expect(waiting.skippedRanges).toHaveLength(1);
    const range = waiting.skippedRanges[0]!;

    const redrive = await cli(['redrive', query, '--skipped', '--json']);
    expect(redrive.code, redrive.stderr).toBe(0);
    expect((JSON.parse(redrive.stdout) as SkippedRedriveReport).ranges[0]!.outcome!.alreadyCommitted).toBeGreaterThanOrEqual(1);
    // Nothing of the shadow's was put back: it would apply the copy as well as the original.
    const after = await new KinesisShardReader(clients.kinesis, internal).readAfter(shardId, range.lastSequenceNumber);
    expect(after.records.map((r) => decodeRepartitionRecord(Buffer.from(r.dataBase64, 'base64')).ns).filter((ns) => ns !== undefined)).toEqual([]);
    await deployment.drain(mapping);
    expect(await (async () => (await scanDynamoDbSink(clients.dynamodb, config.sinkTable!)).map((r) => `${String(r.store_id)}|${Number(r.total)}|${Number(r.n)}`).sort())())
      .toEqual(expectedRows(sales.slice(0, 20)));
  }, 300_000);
});
