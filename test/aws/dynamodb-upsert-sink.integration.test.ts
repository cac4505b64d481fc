/**
 * DynamoDbUpsertSink and scanDynamoDbSink against DynamoDB Local (real SDK calls). The one fault
 * (throttling) is injected with an SDK middleware on an otherwise real client.
 */
import {
  CreateTableCommand,
  DynamoDBClient,
  GetItemCommand,
  ProvisionedThroughputExceededException,
} from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbUpsertSink, encodeDynamoDbKey, writeUnitsFor } from '../../lib/aws/dynamodb-upsert-sink.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { deleteResourcesNamed } from '../support/cleanup.js';
import { WINDOW_STRUCT, type StructField } from '../../lib/plan/data-types.js';
import { CostMeter } from '../../lib/core/cost-meter.js';
import type { OutputMode } from '../../lib/core/output-mode.js';
import type { SinkBatch } from '../../lib/sinks/sink.js';

let emulators: EmulatorSet;
let clients: AwsClients;
let ddb: DynamoDBClient;
let tableCounter = 0;

beforeAll(async () => {
  emulators = await startEmulators({ kinesis: false, s3: false });
  clients = createAwsClients(emulators.clientOptions);
  ddb = clients.dynamodb;
});

afterAll(async () => {
  if (clients) await deleteResourcesNamed(clients, 'tables', `sink-${process.pid}-`);
  clients?.destroy();
  await emulators?.stop();
});

async function newTable(): Promise<string> {
  const tableName = `sink-${process.pid}-${++tableCounter}`;
  await ddb.send(new CreateTableCommand({
    TableName: tableName,
    AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
    KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    BillingMode: 'PAY_PER_REQUEST',
  }));
  return tableName;
}

const micros = (iso: string): number => Date.parse(iso) * 1000;
const win = (startIso: string, endIso: string): { start: number; end: number } => ({ start: micros(startIso), end: micros(endIso) });
const w14 = win('2024-05-01T14:00:00Z', '2024-05-01T15:00:00Z');
const w15 = win('2024-05-01T15:00:00Z', '2024-05-01T16:00:00Z');

const windowSchema: StructField[] = [
  { name: 'window', type: WINDOW_STRUCT },
  { name: 'store', type: 'string' },
  { name: 'revenue', type: 'long' },
  { name: 'last_seen', type: 'timestamp' },
];

function batch(
  partitionId: string, batchId: number, rows: unknown[][], schema: StructField[] = windowSchema, outputMode: OutputMode = 'update',
): SinkBatch {
  return { partitionId, batchId, rows, schema, columns: schema.map((f) => f.name), outputMode };
}

async function revenueOf(tableName: string, pk: string): Promise<number | undefined> {
  const { Item } = await ddb.send(new GetItemCommand({ TableName: tableName, Key: { pk: { S: pk } }, ConsistentRead: true }));
  return Item?.revenue?.N === undefined ? undefined : Number(Item.revenue.N);
}

const PK_14_NORTH = 'window.start=2024-05-01T14:00:00Z|window.end=2024-05-01T15:00:00Z|store=north';

describe('DynamoDbUpsertSink', () => {
  it('keys items by the flattened window struct and writes external values as attributes', async () => {
    const tableName = await newTable();
    const meter = new CostMeter();
    const sink = new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['window', 'store'], meter });
    expect(sink.supportedOutputModes).toEqual(['append', 'update', 'complete']);
    await sink.addBatch(batch('shardId-000000000000', 0, [
      [w14, 'north', 15, micros('2024-05-01T14:40:00Z') + 5],
      [w15, 'north', 7, micros('2024-05-01T15:10:00Z')],
    ]));
    expect(await scanDynamoDbSink(ddb, tableName, { includeInternal: true })).toEqual([
      {
        pk: PK_14_NORTH, _partition: 'shardId-000000000000', _batchId: 0,
        window: { start: '2024-05-01T14:00:00Z', end: '2024-05-01T15:00:00Z' }, store: 'north', revenue: 15,
        last_seen: '2024-05-01T14:40:00.000005Z',
      },
      {
        pk: 'window.start=2024-05-01T15:00:00Z|window.end=2024-05-01T16:00:00Z|store=north',
        _partition: 'shardId-000000000000', _batchId: 0,
        window: { start: '2024-05-01T15:00:00Z', end: '2024-05-01T16:00:00Z' }, store: 'north', revenue: 7,
        last_seen: '2024-05-01T15:10:00Z',
      },
    ]);
    // Internal attributes are left out by default.
    expect((await scanDynamoDbSink(ddb, tableName))[0]).toEqual({
      window: { start: '2024-05-01T14:00:00Z', end: '2024-05-01T15:00:00Z' }, store: 'north', revenue: 15,
      last_seen: '2024-05-01T14:40:00.000005Z',
    });
    // Two small items: one write unit each, as DynamoDB reports it.
    expect(meter.snapshot()).toEqual({ dynamoDbWriteUnits: 2 });
    expect(sink.stats).toEqual({ itemsWritten: 2, itemsSkippedStale: 0 });
  });

  it('never lets a retried older batch replace a newer value, and a batch written twice is one item', async () => {
    const tableName = await newTable();
    const sink = new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['window', 'store'] });
    await sink.addBatch(batch('p', 5, [[w14, 'north', 50, 0]]));
    await sink.addBatch(batch('p', 4, [[w14, 'north', 40, 0], [w15, 'north', 4, 0]])); // stale retry
    expect(await revenueOf(tableName, PK_14_NORTH)).toBe(50);
    expect(sink.stats).toEqual({ itemsWritten: 2, itemsSkippedStale: 1 }); // the new key w15 is still written
    await sink.addBatch(batch('p', 5, [[w14, 'north', 50, 0]]));
    await sink.addBatch(batch('p', 5, [[w14, 'north', 50, 0]]));
    const items = await scanDynamoDbSink(ddb, tableName, { includeInternal: true });
    expect(items.map((i) => [i.store, i.revenue, i._batchId])).toEqual([['north', 50, 5], ['north', 4, 4]]);
    await sink.addBatch(batch('p', 6, [[w14, 'north', 60, 0]]));
    expect(await revenueOf(tableName, PK_14_NORTH)).toBe(60);
  });

  it('keeps the committed run of a batch whose expired records made its runs differ: a stale run of a lower revision does not replace it', async () => {
    const tableName = await newTable();
    const sink = new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['window', 'store'] });
    // Batch 3 ran over 4 records (revision 0), then, after 2 expired, over the other 2 (revision 2): that run committed.
    const committed = { ...batch('p', 3, [[w14, 'north', 20, 0]]), revision: 2 };
    const stale = batch('p', 3, [[w14, 'north', 45, 0]]);
    await sink.addBatch(committed);
    await sink.addBatch(stale); // the older run wakes and writes last
    expect(await revenueOf(tableName, PK_14_NORTH)).toBe(20);
    expect(sink.stats.itemsSkippedStale).toBe(1);
    // A run of a revision between them is stale as well; the committed run rewrites itself; the next batch replaces it.
    await sink.addBatch({ ...batch('p', 3, [[w14, 'north', 30, 0]]), revision: 1 });
    await sink.addBatch(committed);
    expect((await scanDynamoDbSink(ddb, tableName, { includeInternal: true })).map((i) => [i.revenue, i._batchId, i._revision])).toEqual([[20, 3, 2]]);
    expect((await scanDynamoDbSink(ddb, tableName))[0]).not.toHaveProperty('_revision');
    await sink.addBatch(batch('p', 4, [[w14, 'north', 21, 0]]));
    expect((await scanDynamoDbSink(ddb, tableName, { includeInternal: true })).map((i) => [i.revenue, i._batchId, i._revision])).toEqual([[21, 4, undefined]]);
  });

  // A key only a stale run of a lower revision outputs has no item to refuse it: the sink cannot fence
  // it, and need not, since the engine keeps a batch's records while they may expire (the guarantee is
  // tested through the engine: test/aws/kept-records.integration.test.ts, case 2). What the sink still
  // shows: such a write lands. This is the remaining hole, kept visible (see the sink's doc).
  it('a stale run of a lower revision still writes a key the committed run left out (the engine prevents this run, except for the reported hole)', async () => {
    const tableName = await newTable();
    const sink = new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['window', 'store'] });
    await sink.addBatch({ ...batch('p', 0, []), revision: 4 });
    await sink.addBatch(batch('p', 0, [[w14, 'north', 45, 0], [w15, 'north', 5, 0]]));
    expect((await scanDynamoDbSink(ddb, tableName)).map((i) => i.revenue)).toEqual([45, 5]);
  });

  it('compares batch ids only within a partition: a key that moves to a new shard (reshard) still updates', async () => {
    const tableName = await newTable();
    const sink = new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['window', 'store'] });
    await sink.addBatch(batch('shardId-parent', 40, [[w14, 'north', 40, 0]]));
    await sink.addBatch(batch('shardId-child', 0, [[w14, 'north', 41, 0]]));
    expect(await revenueOf(tableName, PK_14_NORTH)).toBe(41);
    // ...and from then on the child partition's own order protects the value.
    await sink.addBatch(batch('shardId-child', 3, [[w14, 'north', 43, 0]]));
    await sink.addBatch(batch('shardId-child', 2, [[w14, 'north', 42, 0]]));
    expect(await revenueOf(tableName, PK_14_NORTH)).toBe(43);
  });

  it('writes one item per row for a stateless append without key columns, idempotently', async () => {
    const tableName = await newTable();
    const schema: StructField[] = [{ name: 'store', type: 'string' }, { name: 'amount', type: 'long' }, { name: 'ts', type: 'timestamp' }];
    const sink = new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: [] });
    const rows = [['north', 1, micros('2024-05-01T00:00:00Z')], ['north', 1, micros('2024-05-01T00:00:00Z')], ['south', 2, 0]];
    await sink.addBatch(batch('shard-0', 7, rows, schema, 'append'));
    await sink.addBatch(batch('shard-0', 7, rows, schema, 'append'));
    const items = await scanDynamoDbSink(ddb, tableName, { includeInternal: true });
    expect(items.map((i) => i.pk)).toEqual(['shard-0#7#0', 'shard-0#7#1', 'shard-0#7#2']);
    expect(items[2]).toMatchObject({ store: 'south', amount: 2, ts: '1970-01-01T00:00:00Z' });
  });

  it('writes rows of one batch with the same key once, the last row winning', async () => {
    const tableName = await newTable();
    const sink = new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['store'] });
    const rows = Array.from({ length: 40 }, (_, i) => [w14, i % 2 === 0 ? 'north' : 'south', i, 0]);
    await sink.addBatch(batch('p', 0, rows));
    expect(sink.stats.itemsWritten).toBe(2);
    expect((await scanDynamoDbSink(ddb, tableName)).map((i) => [i.store, i.revenue])).toEqual([['north', 38], ['south', 39]]);
  });

  it('writes many items with bounded concurrency', async () => {
    const tableName = await newTable();
    const sink = new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['store'], concurrency: 4 });
    const rows = Array.from({ length: 150 }, (_, i) => [w14, `store-${String(i).padStart(3, '0')}`, i, 0]);
    await sink.addBatch(batch('p', 0, rows));
    const items = await scanDynamoDbSink(ddb, tableName);
    expect(items).toHaveLength(150);
    expect(items[149]).toMatchObject({ store: 'store-149', revenue: 149 });
  });

  it('absorbs a throttle with fewer writes in flight; surfaces a lasting one as a retryable error, and the retried batch lands once', async () => {
    const tableName = await newTable();
    // A real client with SDK retries off, so the injected throttles reach the sink.
    const client = new DynamoDBClient({
      region: emulators.clientOptions.region, endpoint: emulators.endpoints.dynamodb,
      credentials: emulators.clientOptions.credentials, maxAttempts: 1,
    });
    let throttles = 0;
    let throttleFrom = 0;
    client.middlewareStack.add((next, context) => async (args) => {
      if (context.commandName === 'PutItemCommand' && throttles < throttleFrom) {
        throttles++;
        throw new ProvisionedThroughputExceededException({ message: 'Rate of requests exceeds the allowed throughput (injected)', $metadata: { httpStatusCode: 400 } });
      }
      return next(args);
    }, { step: 'initialize', name: 'injectThrottles' });
    try {
      const sink = new DynamoDbUpsertSink({ client, tableName, keyColumns: ['window', 'store'] });
      // One throttle: the item is retried after a back-off, with half as many writes in flight.
      throttleFrom = 1;
      await sink.addBatch(batch('p', 0, [[w14, 'north', 1, 0], [w14, 'south', 2, 0]]));
      expect(throttles).toBe(1);
      expect(sink.inFlight.limit).toBe(32);
      expect((await scanDynamoDbSink(ddb, tableName)).map((i) => i.revenue).sort()).toEqual([1, 2]);
      // Throttled on every try: the batch fails, retryably, and the runtime's retry lands once.
      throttles = 0;
      throttleFrom = 1_000;
      const b = batch('p', 1, [[w14, 'north', 10, 0], [w14, 'south', 20, 0], [w15, 'north', 30, 0]]);
      const failure = await sink.addBatch(b).then(() => undefined, (e: unknown) => e);
      expect(failure).toMatchObject({ code: 'SINK_THROTTLED', retryable: true });
      expect((failure as Error).cause).toBeInstanceOf(ProvisionedThroughputExceededException);
      throttleFrom = 0;
      await sink.addBatch(b);
      expect((await scanDynamoDbSink(ddb, tableName)).map((i) => i.revenue).sort()).toEqual([10, 20, 30]);
    } finally {
      client.destroy();
    }
  });

  it('surfaces a missing table as a non-retryable error', async () => {
    const sink = new DynamoDbUpsertSink({ client: ddb, tableName: 'no-such-table', keyColumns: ['store'] });
    await expect(sink.addBatch(batch('p', 0, [[w14, 'north', 1, 0]]))).rejects.toMatchObject({ code: 'SINK_NOT_AVAILABLE', retryable: false });
  });

  it('refuses a missing key column, a reserved column name, and update mode without key columns', async () => {
    const tableName = await newTable();
    await expect(new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['shop'] }).addBatch(batch('p', 0, [])))
      .rejects.toMatchObject({ code: 'SINK_KEY_COLUMN_MISSING' });
    const reserved: StructField[] = [{ name: 'pk', type: 'string' }];
    await expect(new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['pk'] }).addBatch(batch('p', 0, [['x']], reserved)))
      .rejects.toMatchObject({ code: 'SINK_RESERVED_COLUMN' });
    await expect(new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: [] }).addBatch(batch('p', 0, [])))
      .rejects.toMatchObject({ code: 'SINK_KEY_COLUMNS_REQUIRED' });
  });

  it('stores nulls, arrays, nested structs, non-finite and out-of-range doubles', async () => {
    const tableName = await newTable();
    const schema: StructField[] = [
      { name: 'id', type: 'long' },
      { name: 'tags', type: { kind: 'array', element: 'string' } },
      { name: 'meta', type: { kind: 'struct', fields: [{ name: 'a', type: 'double' }, { name: 'when', type: 'timestamp' }] } },
      { name: 'ratio', type: 'double' },
      { name: 'note', type: 'string' },
    ];
    const sink = new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['id'] });
    await sink.addBatch(batch('p', 0, [
      [1, ['x', 'y'], { a: 1.25, when: micros('2024-05-01T00:00:00Z') }, Number.NaN, ''],
      [2, [], null, 1e300, null],
      [3, null, { a: -5e-200, when: null }, 1.7976931348623157e308, 'ok'],
    ], schema, 'append'));
    expect(await scanDynamoDbSink(ddb, tableName)).toEqual([
      { id: 1, tags: ['x', 'y'], meta: { a: 1.25, when: '2024-05-01T00:00:00Z' }, ratio: null, note: '' },
      // Doubles outside DynamoDB's number range (1e-130 .. 1e126) are kept as their JSON text.
      { id: 2, tags: [], meta: null, ratio: '1e+300', note: null },
      { id: 3, tags: null, meta: { a: '-5e-200', when: null }, ratio: '1.7976931348623157e+308', note: 'ok' },
    ]);
  });

  it('counts write units as DynamoDB reports them; the size formula agrees for a 2.5 KB item', async () => {
    const tableName = await newTable();
    const meter = new CostMeter();
    const schema: StructField[] = [{ name: 'id', type: 'long' }, { name: 'blob', type: 'string' }];
    const sink = new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['id'], meter });
    await sink.addBatch(batch('p', 0, [[1, 'x'.repeat(2500)]], schema, 'append'));
    expect(meter.snapshot()).toEqual({ dynamoDbWriteUnits: 3 });
    expect(writeUnitsFor({ pk: { S: 'id=1' }, id: { N: '1' }, blob: { S: 'x'.repeat(2500) }, _partition: { S: 'p' }, _batchId: { N: '0' } })).toBe(3);
    // Replacing a 2.5 KB item with a small one is charged by the larger (as DynamoDB reports it)...
    await sink.addBatch(batch('p', 1, [[1, 'y']], schema, 'append'));
    expect(meter.snapshot()).toEqual({ dynamoDbWriteUnits: 3 + 3 });
    // ...and a write skipped by the condition is charged too (estimated by the formula).
    await new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['id'], meter }).addBatch(batch('p', 0, [[1, 'x'.repeat(2500)]], schema, 'append'));
    expect(meter.snapshot()).toEqual({ dynamoDbWriteUnits: 3 + 3 + 3 });
  });
});

describe('encodeDynamoDbKey', () => {
  const schema: StructField[] = [
    { name: 'store', type: 'string' },
    { name: 'n', type: 'int' },
    { name: 'flag', type: 'boolean' },
    { name: 'w', type: WINDOW_STRUCT },
    { name: 'tags', type: { kind: 'array', element: 'string' } },
  ];
  it('escapes separators, marks nulls, and flattens structs with dotted names', () => {
    expect(encodeDynamoDbKey(['a|b=c%', 7, true, w14, ['x']], schema, [0, 1, 2, 3, 4]))
      .toBe('store=a%7Cb%3Dc%25|n=7|flag=true|w.start=2024-05-01T14:00:00Z|w.end=2024-05-01T15:00:00Z|tags=["x"]');
    expect(encodeDynamoDbKey([null, null, null, null, null], schema, [0, 1, 3]))
      .toBe('store=%00|n=%00|w=%00');
    expect(encodeDynamoDbKey(['', 0, false, w14, []], schema, [0])).toBe('store=');
    expect(encodeDynamoDbKey(['%00', 0, false, w14, []], schema, [0])).toBe('store=%2500');
    const d: StructField[] = [{ name: 'x', type: 'double' }];
    expect([Number.NaN, Infinity, -Infinity, -0, 1e300, 0.1].map((x) => encodeDynamoDbKey([x], d, [0])))
      .toEqual(['x=NaN', 'x=Infinity', 'x=-Infinity', 'x=0', 'x=1e+300', 'x=0.1']);
  });
});
