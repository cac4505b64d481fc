/**
 * Issue 11 part 1, the second policy: `onUnwritableRow: 'spill'` on DynamoDB Local and s3rver. An
 * item over 400 KB moves its largest values to S3 objects with pointers in the item; the reader
 * resolves them, so the sink holds the whole answer and nothing is dead-lettered. What spilling
 * cannot fix (a key too long) is still dead-lettered. A batch that fails after writing its objects
 * leaves no item that points to them, only unreferenced objects.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateBucketCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { CreateTableCommand, ScanCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { DynamoDbUpsertSink, MAX_ITEM_BYTES } from '../../lib/aws/dynamodb-upsert-sink.js';
import { SPILL_ATTRIBUTE } from '../../lib/aws/dynamodb-spill.js';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, collect_list, count, max, sum, window } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import type { SinkBatch } from '../../lib/sinks/sink.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';
import { deleteResources } from '../support/cleanup.js';

const SCHEMA = 'k string, amount long, note string, ts timestamp';
const notesByGroup = (df: DataFrame): DataFrame => df
  .withWatermark('ts', '15 minutes')
  .groupBy(window(col('ts'), '1 hour'), col('k'))
  .agg(sum('amount').as('total'), count('*').as('n'), max('note').as('longest'), collect_list('note').as('notes'));

function query(name: string): StreamingQueryDefinition {
  return defineQuery({
    name, source: { schema: SCHEMA }, transform: notesByGroup, outputMode: 'update',
    sink: { kind: 'dynamodb', onUnwritableRow: 'spill' },
  });
}

interface Event { k: string; amount: number; note: string; ts: string }
const at = (minute: number): string => new Date(Date.UTC(2024, 4, 1, 14, minute)).toISOString();
const small = (i: number, k = ['a', 'b', 'c'][i % 3]!): Event => ({ k, amount: i + 1, note: `n${i}`, ts: at(i % 50) });
const records = (events: readonly Event[]) => events.map((e) => ({ data: JSON.stringify(e), partitionKey: e.k.slice(0, 64) }));

async function answerOver(events: readonly Event[]): Promise<string[]> {
  const session = new SluiceSession();
  const { stream, df } = session.memoryStream(SCHEMA);
  const result = notesByGroup(df);
  const sink = new MemorySink();
  const q = await result.writeStream.outputMode('complete').sink(sink).start();
  stream.addData(events.map((e) => [e.k, e.amount, e.note, parseTimestamp(e.ts)]));
  await q.processAllAvailable();
  await q.stop();
  const schema = result.plan.output.map((a) => ({ name: a.name, type: a.type }));
  return canonical(sink.allRows().map((r) => toExternalRow(r, schema)));
}

function canonical(rows: Record<string, unknown>[]): string[] {
  return rows.map((r) => JSON.stringify([r.window, r.k, r.total, r.n, r.longest, r.notes])).sort();
}

async function spillObjects(d: Deployment): Promise<string[]> {
  const listed = await d.clients.s3.send(new ListObjectsV2Command({ Bucket: d.config.sinkBucket, Prefix: `${d.config.sinkPrefix}_sluice_spill/` }));
  return (listed.Contents ?? []).map((o) => o.Key!);
}

async function rawItems(ddb: DynamoDBClient, table: string) {
  return (await ddb.send(new ScanCommand({ TableName: table, ConsistentRead: true }))).Items ?? [];
}

let emulators: EmulatorSet;
beforeAll(async () => {
  emulators = await startEmulators();
});
afterAll(async () => {
  await emulators?.stop();
});

describe("onUnwritableRow: 'spill' (DynamoDB Local + s3rver)", () => {
  it('max(note) of 300 KB: the item stores its large values in S3, the reader resolves them, nothing is dead-lettered', async () => {
    const d = await deploy(emulators, query('spill-item'), 1);
    const big: Event = { k: 'big', amount: 100, note: 'y'.repeat(300 * 1024), ts: at(5) };
    const events = [small(0, 'big'), small(1), small(2), small(3), small(4), big, small(5), small(6), small(7), small(8, 'big')];
    await d.put(records(events));
    await d.drain({ maximumRetryAttempts: 3 });
    expect(await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix)).toEqual([]);
    const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!, { s3: d.clients.s3 });
    expect(canonical(table)).toEqual(await answerOver(events));
    // The stored item holds pointers instead of the two large columns (longest and notes), and its key columns.
    const item = (await rawItems(d.clients.dynamodb, d.config.sinkTable!)).find((i) => i.k?.S === 'big')!;
    // notes (n0, the 300 KB note, n8) is the largest value; moving it alone makes the item fit.
    expect(Object.keys(item[SPILL_ATTRIBUTE]!.M!)).toEqual(['notes']);
    expect(item.notes).toBeUndefined();
    expect(item.longest!.S!.length).toBe(300 * 1024);
    expect(item.k!.S).toBe('big');
    expect(item.window!.M).toBeDefined();
    for (const pointer of Object.values(item[SPILL_ATTRIBUTE]!.M!)) expect(pointer.S).toMatch(new RegExp(`^s3://${d.config.sinkBucket}/results/_sluice_spill/[0-9a-f]{64}\\.json$`));
    expect((await spillObjects(d)).length).toBeGreaterThan(0);
    // Without an S3 client the reader says why it cannot answer, rather than returning pointers.
    await expect(scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!)).rejects.toThrow(/spilled values .* pass an S3 client/);
    expect(d.results.every((r) => r.result.error === undefined)).toBe(true);
  });

  it('collect_list growing past 400 KB (state well over 400 KB), run by the scheduled function: every note reaches the sink', async () => {
    const d = await deploy(emulators, query('spill-list'), 1);
    const chunk = (i: number): Event => ({ k: 'grow', amount: i, note: `${i}:${'z'.repeat(60 * 1024)}`, ts: at(10 + i) });
    const events = [...Array.from({ length: 10 }, (_, i) => chunk(i)), small(1), small(2)];
    await d.put(records(events.slice(0, 5)));
    await d.tick(Date.now(), 'drain');
    await d.put(records(events.slice(5)));
    const summary = await d.tick(Date.now(), 'drain') as { shards: { error?: string }[]; spillGc?: unknown };
    expect(summary.shards.every((s) => s.error === undefined)).toBe(true);
    // The first tick ran the spill collector (nothing old enough to judge); this one is within its interval.
    expect(summary.spillGc).toEqual({ skipped: 'not-due-or-running' });
    expect(await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix)).toEqual([]);
    const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!, { s3: d.clients.s3 });
    expect(canonical(table)).toEqual(await answerOver(events));
    expect((table.find((r) => r.k === 'grow')!.notes as string[]).length).toBe(10);
  });

  it('through a repartition stage (stage 2 cannot withhold records): the oversized group is spilled, not left out of the sink', async () => {
    const d = await deploy(emulators, query('spill-stage2'), 2, { repartitionShards: 2, expectedShardCount: undefined });
    const chunk = (i: number): Event => ({ k: 'grow', amount: i, note: `${i}:${'z'.repeat(60 * 1024)}`, ts: at(10 + i) });
    const events = [...Array.from({ length: 8 }, (_, i) => chunk(i)), small(1), small(2), small(3)];
    await d.put(records(events.slice(0, 4)));
    await d.drain({ maximumRetryAttempts: 3 });
    await d.put(records(events.slice(4)));
    await d.drain({ maximumRetryAttempts: 3 });
    expect(await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix)).toEqual([]);
    const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!, { s3: d.clients.s3 });
    expect(canonical(table)).toEqual(await answerOver(events));
    expect(d.results.every((r) => r.result.error === undefined)).toBe(true);
  });

  it('a key over 2048 bytes cannot be spilled: its record is still dead-lettered, the rest reaches the sink', async () => {
    const d = await deploy(emulators, query('spill-key'), 1);
    const longKey = 'x'.repeat(3000);
    const events = [small(0), small(1), small(2, longKey), small(3), small(4)];
    await d.put(records(events));
    await d.drain({ maximumRetryAttempts: 3 });
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    expect(letters.map((l) => l.reason.split(':')[0])).toEqual(['SINK_KEY_TOO_LONG']);
    const table = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!, { s3: d.clients.s3 });
    expect(canonical(table)).toEqual(await answerOver(events.filter((e) => e.k !== longKey)));
  });
});

describe('spilling and exactly once (the sink alone, one injected fault)', () => {
  let clients: AwsClients;
  const table = `spill-${process.pid}`;
  const bucket = `spill-${process.pid}`;
  beforeAll(async () => {
    clients = createAwsClients(emulators.clientOptions);
    await clients.dynamodb.send(new CreateTableCommand({
      TableName: table, AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }], BillingMode: 'PAY_PER_REQUEST',
    }));
    await clients.s3.send(new CreateBucketCommand({ Bucket: bucket }));
  });
  afterAll(async () => {
    if (clients) await deleteResources(clients, { tables: [table], buckets: [bucket] });
    clients?.destroy();
  });

  const batch = (batchId: number, rows: unknown[][]): SinkBatch => ({
    batchId, columns: ['k', 'v'], rows, outputMode: 'update', partitionId: 'shard-0',
    schema: [{ name: 'k', type: 'string' }, { name: 'v', type: 'string' }],
  });

  it('objects are written before items; a batch whose PutItem fails leaves only unreferenced objects; its re-run is exact', async () => {
    const sent: string[] = [];
    let failPutItem = false;
    const faulty = {
      send: async (command: { constructor: { name: string } }) => {
        sent.push(command.constructor.name);
        if (command.constructor.name === 'PutItemCommand' && failPutItem) {
          throw Object.assign(new Error('injected'), { name: 'InternalServerError', $metadata: { httpStatusCode: 500 } });
        }
        return clients.dynamodb.send(command as never);
      },
    } as unknown as DynamoDBClient;
    const s3 = { send: async (command: { constructor: { name: string } }) => { sent.push(command.constructor.name); return clients.s3.send(command as never); } };
    const sink = new DynamoDbUpsertSink({ client: faulty, tableName: table, keyColumns: ['k'], spill: { client: s3 as never, bucket, prefix: 'q/' } });
    await sink.addBatch(batch(0, [['g', 'small']]));
    const big = 'v'.repeat(MAX_ITEM_BYTES);
    // Batch 1 with the oversized value: its object lands, its item does not.
    sent.length = 0;
    failPutItem = true;
    await expect(sink.addBatch(batch(1, [['g', big]]))).rejects.toMatchObject({ code: 'SINK_WRITE_FAILED', retryable: true });
    expect(sent.indexOf('PutObjectCommand')).toBeGreaterThanOrEqual(0);
    expect(sent.indexOf('PutObjectCommand')).toBeLessThan(sent.indexOf('PutItemCommand'));
    // The reader sees the committed answer only (batch 0's value): the object is an unreferenced orphan.
    expect(await scanDynamoDbSink(clients.dynamodb, table, { s3: clients.s3 })).toEqual([{ k: 'g', v: 'small' }]);
    const objects = (await clients.s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'q/_sluice_spill/' }))).Contents ?? [];
    expect(objects).toHaveLength(1);
    // The retry rewrites the same object (content-addressed) and then the item.
    failPutItem = false;
    await sink.addBatch(batch(1, [['g', big]]));
    expect(await scanDynamoDbSink(clients.dynamodb, table, { s3: clients.s3 })).toEqual([{ k: 'g', v: big }]);
    expect(((await clients.s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'q/_sluice_spill/' }))).Contents ?? [])).toHaveLength(1);
  });
});
