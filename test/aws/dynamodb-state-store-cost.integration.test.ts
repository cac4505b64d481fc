/**
 * What state costs in DynamoDB: the packed delta/snapshot layout against a one-item-per-key
 * layout, for an aggregation over 10,000 keys fed 1,000-event batches. Prints the table that
 * docs/state-layout.md quotes:
 *
 *   npx vitest run test/aws/dynamodb-state-store-cost.integration.test.ts
 *
 * Units are counted twice: as DynamoDB (Local) reports them, and with AWS's published formula
 * from the item sizes (what Sluice's meter falls back to).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SluiceSession } from '../../lib/api/session.js';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { DynamoDbCheckpoint } from '../../lib/aws/dynamodb-checkpoint.js';
import { batchWriteAll, itemSize, queryAll } from '../../lib/aws/dynamodb-cost.js';
import { DynamoDbStateStoreProvider, StateCache } from '../../lib/aws/dynamodb-state-store.js';
import { ensureTables } from '../../lib/aws/tables.js';
import type { Checkpoint } from '../../lib/checkpoint/checkpoint.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { deleteResources } from '../support/cleanup.js';
import { count, sum } from '../../lib/plan/functions.js';
import { CostMeter } from '../../lib/core/cost-meter.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';

const KEYS = 10_000;
const EVENTS = 1_000;
const STEADY_BATCHES = 40;
const SNAPSHOT_EVERY = 20;
const PER_KEY_BATCHES = 5;

let emu: EmulatorSet;
const clients: AwsClients[] = [];
const CP = 'sluice-cost-cp';
const STATE = 'sluice-cost-state';
const PER_KEY = 'sluice-cost-per-key';

/** Units as reported, tallied per client; the meter then sees no ConsumedCapacity (formula). */
interface Tally { read: number; write: number }
function reportingClient(): { client: DynamoDBClient; tally: Tally } {
  const aws = createAwsClients(emu.clientOptions);
  clients.push(aws);
  const tally: Tally = { read: 0, write: 0 };
  aws.dynamodb.middlewareStack.add((next, context) => async (args) => {
    const result = await next(args);
    const out = result.output as { ConsumedCapacity?: { CapacityUnits?: number } | { CapacityUnits?: number }[] };
    const list = out.ConsumedCapacity === undefined ? [] : Array.isArray(out.ConsumedCapacity) ? out.ConsumedCapacity : [out.ConsumedCapacity];
    const units = list.reduce((a, c) => a + (c.CapacityUnits ?? 0), 0);
    if (/^(GetItem|Query|Scan|BatchGetItem|TransactGetItems)/.test(context.commandName ?? '')) tally.read += units;
    else tally.write += units;
    delete out.ConsumedCapacity;
    return result;
  }, { step: 'initialize', name: 'tallyConsumedCapacity' });
  return { client: aws.dynamodb, tally };
}

beforeAll(async () => {
  emu = await startEmulators({ kinesis: false, s3: false });
  const aws = createAwsClients(emu.clientOptions);
  clients.push(aws);
  // The per-key layout: a state-style table (pk, sk), one item per key.
  await ensureTables(aws.dynamodb, { checkpointTable: CP, stateTable: STATE });
  await ensureTables(aws.dynamodb, { checkpointTable: PER_KEY, stateTable: PER_KEY });
});

afterAll(async () => {
  if (clients[0]) await deleteResources(clients[0], { tables: [CP, STATE, PER_KEY] });
  for (const c of clients) c.destroy();
  await emu?.stop();
});

function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const keyName = (i: number): string => `store-${String(i).padStart(5, '0')}`;
const mean = (xs: number[]): number => xs.reduce((a, x) => a + x, 0) / Math.max(xs.length, 1);
const r1 = (x: number): number => Math.round(x * 10) / 10;

describe(`state cost: ${KEYS} keys, ${EVENTS}-event batches`, () => {
  it('packed deltas + snapshots against one item per key', async () => {
    const logs = reportingClient();
    const state = reportingClient();
    const logMeter = new CostMeter();
    const stateMeter = new CostMeter();
    const queryName = 'cost';
    const cp = new DynamoDbCheckpoint({ client: logs.client, checkpointTable: CP, stateTable: STATE, queryName, partitionId: 'shard-0', meter: logMeter });
    const cache = new StateCache();
    const stateStore = new DynamoDbStateStoreProvider({ client: state.client, table: STATE, queryName, partitionId: 'shard-0', meter: stateMeter, snapshotEvery: SNAPSHOT_EVERY, cache });
    const checkpoint: Checkpoint = {
      offsetLog: cp.offsetLog, commitLog: cp.commitLog, stateStore,
      readQueryMetadata: () => cp.readQueryMetadata(), writeQueryMetadata: (m) => cp.writeQueryMetadata(m),
    };

    const { stream, df } = new SluiceSession().memoryStream('key string, amount long');
    const totals = df.groupBy('key').agg(sum('amount').as('total'), count().as('n'));
    const query = await totals.writeStream.outputMode('update').sink(new MemorySink()).checkpoint(checkpoint).start();
    const random = mulberry32(42);

    interface BatchCost { stateW: number; stateWReported: number; stateR: number; stateBytes: number; logW: number; logWReported: number; logR: number; changed: string[] }
    const runBatch = async (events: unknown[][]): Promise<BatchCost> => {
      const s0 = stateMeter.snapshot();
      const l0 = logMeter.snapshot();
      const t0 = { ...state.tally };
      const lt0 = { ...logs.tally };
      stream.addData(events);
      await query.processAllAvailable();
      const s = stateMeter.since(s0);
      const l = logMeter.since(l0);
      return {
        stateW: s.dynamoDbWriteUnits ?? 0, stateWReported: state.tally.write - t0.write, stateR: s.dynamoDbReadUnits ?? 0, stateBytes: s.stateBytesWritten ?? 0,
        logW: l.dynamoDbWriteUnits ?? 0, logWReported: logs.tally.write - lt0.write, logR: l.dynamoDbReadUnits ?? 0,
        changed: [...new Set(events.map((e) => e[0] as string))],
      };
    };

    // Fill: 10 batches of 1,000 new keys (versions 1-10).
    for (let b = 0; b < KEYS / EVENTS; b++) {
      await runBatch(Array.from({ length: EVENTS }, (_, i) => [keyName(b * EVENTS + i), 1 + Math.floor(random() * 100)]));
    }
    // Steady state: 1,000 events on random keys of the 10,000.
    const steady: BatchCost[] = [];
    for (let b = 0; b < STEADY_BATCHES; b++) {
      steady.push(await runBatch(Array.from({ length: EVENTS }, () => [keyName(Math.floor(random() * KEYS)), 1 + Math.floor(random() * 100)])));
    }
    await query.stop();
    const lastVersion = KEYS / EVENTS + STEADY_BATCHES;
    // Which steady batches wrote a snapshot (their version is a multiple of SNAPSHOT_EVERY).
    const isSnapshot = (i: number): boolean => (KEYS / EVENTS + i + 1) % SNAPSHOT_EVERY === 0;
    const deltas = steady.filter((_, i) => !isSnapshot(i));
    const snapshots = steady.filter((_, i) => isSnapshot(i));
    expect(snapshots.length).toBe(2);

    // Cold start: a new container opens the latest version (snapshot + deltas, no cache).
    const coldMeter = new CostMeter();
    const cold = reportingClient();
    const coldProvider = new DynamoDbStateStoreProvider({ client: cold.client, table: STATE, queryName, partitionId: 'shard-0', meter: coldMeter, cache: null });
    const coldStore = await coldProvider.open<unknown>({ operatorId: 0, storeName: 'default' }, lastVersion);
    expect(coldStore.size).toBe(KEYS);
    const coldCost = coldMeter.snapshot();
    // Warm: the same open through the cache costs nothing.
    const warmMeter = new CostMeter();
    const warmProvider = new DynamoDbStateStoreProvider({ client: state.client, table: STATE, queryName, partitionId: 'shard-0', meter: warmMeter, cache });
    const warmStore = await warmProvider.open<unknown>({ operatorId: 0, storeName: 'default' }, lastVersion);
    expect(warmMeter.snapshot().dynamoDbReadUnits).toBeUndefined();

    // One item per key, for comparison: the same values, one PutItem per changed key.
    const perKey = reportingClient();
    const perKeyMeter = new CostMeter();
    const pk = `${queryName}#shard-0#0/default`;
    // The store's key of a group is the engine's encoding of the key values: map the raw keys.
    const storeKeyOf = new Map([...warmStore.entries()].map(([k, v]) => [(v as [unknown[]])[0][0] as string, k]));
    const item = (key: string) => ({ pk: { S: pk }, sk: { S: key }, v: { S: JSON.stringify(warmStore.get(key)) } });
    const all = [...warmStore.entries()].map(([k]) => item(k));
    await batchWriteAll(perKey.client, PER_KEY, all.map((Item) => ({ PutRequest: { Item } })), undefined);
    const perKeyWrites: number[] = [];
    const perKeyWritesReported: number[] = [];
    for (const batch of steady.slice(0, PER_KEY_BATCHES)) {
      const before = perKeyMeter.snapshot().dynamoDbWriteUnits ?? 0;
      const reportedBefore = perKey.tally.write;
      await batchWriteAll(perKey.client, PER_KEY, batch.changed.map((k) => ({ PutRequest: { Item: item(storeKeyOf.get(k)!) } })), perKeyMeter);
      perKeyWrites.push((perKeyMeter.snapshot().dynamoDbWriteUnits ?? 0) - before);
      perKeyWritesReported.push(perKey.tally.write - reportedBefore);
    }
    const perKeyReadMeter = new CostMeter();
    const reportedReadBefore = perKey.tally.read;
    const perKeyItems = await queryAll(perKey.client, {
      TableName: PER_KEY, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: pk } }, ConsistentRead: true,
    }, perKeyReadMeter);
    expect(perKeyItems.length).toBe(KEYS);
    const perKeyColdRead = perKeyReadMeter.snapshot().dynamoDbReadUnits ?? 0;
    const perKeyColdReadReported = perKey.tally.read - reportedReadBefore;
    const avgItem = mean(all.map(itemSize));
    const changedPerBatch = mean(steady.map((b) => b.changed.length));

    const deltaW = mean(deltas.map((b) => b.stateW));
    const snapW = mean(snapshots.map((b) => b.stateW));
    const amortized = mean(steady.map((b) => b.stateW));
    const rows: [string, string, string][] = [
      ['changed keys per batch (of 10,000)', r1(changedPerBatch).toString(), ''],
      ['packed: state write units, delta batch', `${r1(deltaW)}`, `${r1(mean(deltas.map((b) => b.stateWReported)))}`],
      ['packed: state write units, snapshot batch (incl. purge)', `${r1(snapW)}`, `${r1(mean(snapshots.map((b) => b.stateWReported)))}`],
      [`packed: state write units per batch, averaged over ${STEADY_BATCHES}`, `${r1(amortized)}`, `${r1(mean(steady.map((b) => b.stateWReported)))}`],
      ['packed: state bytes written, delta batch', `${Math.round(mean(deltas.map((b) => b.stateBytes)))}`, ''],
      ['packed: state bytes written, snapshot batch', `${Math.round(mean(snapshots.map((b) => b.stateBytes)))}`, ''],
      ['packed: state read units per batch (warm cache)', `${r1(mean(steady.map((b) => b.stateR)))}`, ''],
      ['packed: state read units, cold open (snapshot + deltas)', `${r1(coldCost.dynamoDbReadUnits ?? 0)}`, `${r1(cold.tally.read)}`],
      ['packed: bytes read, cold open', `${coldCost.stateBytesRead ?? 0}`, ''],
      ['checkpoint logs: write units per batch (offset + commit)', `${r1(mean(steady.map((b) => b.logW)))}`, `${r1(mean(steady.map((b) => b.logWReported)))}`],
      ['checkpoint logs: read units per batch', `${r1(mean(steady.map((b) => b.logR)))}`, ''],
      ['per-key: item size (bytes)', `${Math.round(avgItem)}`, ''],
      ['per-key: write units per batch', `${r1(mean(perKeyWrites))}`, `${r1(mean(perKeyWritesReported))}`],
      ['per-key: read units, cold load (Query of all keys)', `${r1(perKeyColdRead)}`, `${r1(perKeyColdReadReported)}`],
    ];
    const width = Math.max(...rows.map((r) => r[0].length));
    console.log(`\n${'measure'.padEnd(width)} | AWS formula | DynamoDB Local reported\n${rows.map(([a, b, c]) => `${a.padEnd(width)} | ${b.padStart(11)} | ${c}`).join('\n')}\n`);

    // The point of the layout: far fewer write units than one item per key.
    expect(amortized * 10).toBeLessThan(mean(perKeyWrites));
  });
});
