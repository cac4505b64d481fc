/**
 * The internal stream of a repartition stage resharded between two PutRecords calls of one
 * stage-1 batch, on the emulators (kinesis-mock, DynamoDB Local). One fault is injected into
 * stage 1's Kinesis client: a PutRecords call to the internal stream writes only its first entry
 * and reports the others throttled, and the internal stream is merged (or split) before the call
 * returns, so the retry of the rest lands in a child shard. Stage 1 then sends the batch again by
 * the new shard list. The sink must equal the run without the fault. With progress kept per
 * (source shard, batch, part), the merge lost the second parent's rows of that batch and the split
 * lost the rows of the part the parent had not received.
 */
import { PutRecordsCommand, type KinesisClient, type PutRecordsCommandOutput } from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import type { AwsClients } from '../../lib/aws/clients.js';
import { createAwsClients } from '../../lib/aws/clients.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { reshardStream, type ReshardStep } from '../../lib/local/kinesis-admin.js';
import { col, count, max, sum, window } from '../../lib/plan/functions.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const TIMEOUT = Number(process.env.RESHARD_TEST_TIMEOUT_MS ?? 300_000);
let runs = 0;

interface Injection {
  /** The PutRecords call to the internal stream (with at least two entries) that the fault hits, from 1. */
  readonly call: number;
  readonly step: ReshardStep;
}

/**
 * Stage 1's Kinesis client with the one fault: the `call`-th multi-entry PutRecords to the
 * internal stream writes its first entry, reshards the stream, and reports the rest throttled.
 */
function withReshardBetweenPuts(clients: AwsClients, internalStream: string, injection: Injection, happened: { at: number | null }): AwsClients {
  const real = clients.kinesis;
  let calls = 0;
  const send = async (command: unknown, ...rest: unknown[]): Promise<unknown> => {
    if (command instanceof PutRecordsCommand && command.input.StreamName === internalStream && (command.input.Records?.length ?? 0) >= 2
      && ++calls === injection.call && happened.at === null) {
      const records = command.input.Records!;
      const first = await real.send(new PutRecordsCommand({ ...command.input, Records: records.slice(0, 1) }));
      await reshardStream(real, internalStream, [injection.step]);
      happened.at = calls;
      const throttled = records.slice(1).map(() => ({ ErrorCode: 'ProvisionedThroughputExceededException', ErrorMessage: 'injected between PutRecords calls' }));
      return { ...first, FailedRecordCount: throttled.length, Records: [...(first.Records ?? []), ...throttled] } satisfies PutRecordsCommandOutput;
    }
    return (real.send as (...args: unknown[]) => Promise<unknown>)(command, ...rest);
  };
  const kinesis = new Proxy(real, {
    get(target, prop) {
      if (prop === 'send') return send;
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  }) as KinesisClient;
  return { ...clients, kinesis, destroy: () => clients.destroy() };
}

async function run(
  definition: StreamingQueryDefinition, events: readonly { data: string; partitionKey: string }[], internalShards: number, batchSize: number,
  injection: Injection | null,
): Promise<{ rows: string[]; d: Deployment; happened: number | null }> {
  const d = await deploy(emulators, definition, 1, { repartitionShards: internalShards, expectedShardCount: undefined });
  await d.put(events);
  const happened = { at: null as number | null };
  const clients = injection ? withReshardBetweenPuts(createAwsClients(emulators.clientOptions), d.config.repartitionStreamName!, injection, happened) : undefined;
  try {
    await d.drain({ batchSize }, clients ? { clients } : {});
    // Stage 2's children after their parents, and anything Lambda would retry later.
    await d.drain({ batchSize });
  } finally {
    clients?.destroy();
  }
  const rows = (await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!)).map((r) => JSON.stringify(r)).sort();
  return { rows, d, happened: happened.at };
}

const stores = ['north', 'south', 'east', 'west', 'central', 'harbor', 'airport', 'mall', 'station', 'campus'];

describe('the internal stream resharded between two PutRecords calls of one stage-1 batch', () => {
  it('merged after the first internal shard got the batch and before the second did: the sink equals the run without it', async () => {
    const definition = (n: number) => defineQuery({
      name: `hop-merge-between-puts-${n}`,
      source: { schema: 'order_id string, store_id string, amount long, ts timestamp' },
      transform: (df) => df.groupBy(window(col('ts'), '1 hour'), col('store_id')).agg(sum('amount').as('revenue'), count('*').as('orders')),
      outputMode: 'update',
      sink: { kind: 'dynamodb' },
    });
    const events = Array.from({ length: 60 }, (_, i) => ({
      data: JSON.stringify({ order_id: `o${i}`, store_id: stores[(i * 7) % stores.length], amount: 1 + ((i * 13) % 29), ts: new Date(Date.UTC(2024, 4, 1, 14) + i * 6 * 60_000).toISOString() }),
      partitionKey: `o${i}`,
    }));
    const [baseline, faulted] = await Promise.all([
      run(definition(++runs), events, 2, 10, null),
      run(definition(++runs), events, 2, 10, { call: 3, step: { merge: 'first-adjacent' } }),
    ]);
    expect(faulted.happened).toBe(3);
    expect(baseline.rows.length).toBeGreaterThan(0);
    expect(faulted.rows).toEqual(baseline.rows);
    // The merged child ran, and stage 1 sent the interrupted batch again (REPARTITION_RESHARDED).
    expect(faulted.d.results.some((r) => r.shardId === 'shardId-000000000002' && r.result.progress.length > 0)).toBe(true);
  }, TIMEOUT);

  it('split between the two records of a batch too large for one: the sink equals the run without it', async () => {
    // Rows of about 80 KB: a stage-1 batch of 15 goes to the internal shard as two records.
    const definition = (n: number) => defineQuery({
      name: `hop-split-between-puts-${n}`,
      source: { schema: 'order_id string, store_id string, note string' },
      transform: (df) => df.groupBy(col('store_id')).agg(count('*').as('orders'), max('note').as('last_note')),
      outputMode: 'update',
      sink: { kind: 'dynamodb' },
    });
    const events = Array.from({ length: 45 }, (_, i) => ({
      data: JSON.stringify({ order_id: `o${i}`, store_id: stores[(i * 7) % stores.length], note: `${String(i).padStart(3, '0')}${'x'.repeat(80_000)}` }),
      partitionKey: `o${i}`,
    }));
    const [baseline, faulted] = await Promise.all([
      run(definition(++runs), events, 1, 15, null),
      run(definition(++runs), events, 1, 15, { call: 2, step: { split: 'first-open' } }),
    ]);
    expect(faulted.happened).toBe(2);
    const summary = (rows: string[]) => rows.map((r) => { const { store_id, orders, last_note } = JSON.parse(r) as Record<string, string>; return `${store_id}:${orders}:${String(last_note).slice(0, 3)}`; });
    expect(summary(baseline.rows)).toHaveLength(stores.length);
    expect(summary(faulted.rows)).toEqual(summary(baseline.rows));
    expect(faulted.rows).toEqual(baseline.rows);
    expect(faulted.d.results.some((r) => r.shardId !== 'shardId-000000000000' && r.result.progress.length > 0)).toBe(true);
  }, TIMEOUT);
});
