/**
 * The spill collector (lib/aws/dynamodb-spill-gc.ts) on DynamoDB Local and s3rver: orphaned spilled
 * objects go after two runs; an object an item points to stays, shared or re-referenced; a writer
 * racing the collector (gated between the tombstone and the delete, or between its own tombstone
 * look-up and its writes) ends with its item's object present; a dry run deletes nothing; a
 * replay's table is scanned too; two runs never hold the lease at once.
 *
 * S3 stamps objects with the real time: the collector's clock is moved forward instead of waiting
 * out the grace.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateBucketCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { BatchWriteItemCommand, CreateTableCommand, GetItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { DynamoDbUpsertSink, itemBytes, MAX_ITEM_BYTES } from '../../lib/aws/dynamodb-upsert-sink.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { collectSpillGarbage, type SpillGcOptions, type SpillGcReport } from '../../lib/aws/dynamodb-spill-gc.js';
import { SPILL_CHECK_VALID_MS, spillObjectKey } from '../../lib/aws/dynamodb-spill.js';
import { runSpillGc } from '../../lib/aws/spill-gc-run.js';
import { claimSpillGcLease } from '../../lib/aws/spill-gc-lease.js';
import { ensureTables } from '../../lib/aws/tables.js';
import { startShadow } from '../../lib/aws/query-namespace.js';
import type { QueryDefinition } from '../../lib/query/query-definition.js';
import type { RuntimeConfig } from '../../lib/runtime/runtime-config.js';
import type { SinkBatch } from '../../lib/sinks/sink.js';
import { deleteResources } from '../support/cleanup.js';
import { emulatorCliEnv, runSluice } from '../support/sluice-cli.js';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const HOUR = 3600_000;
const GRACE = 12 * HOUR;
/** Each run's clock: a grace and more past the last, so every object and tombstone is old enough. */
const runAt = (run: number) => () => Date.now() + run * (GRACE + HOUR);

let emulators: EmulatorSet;
let clients: AwsClients;
const bucket = `spillgc-${process.pid}`;
const tables: string[] = [];
let tableCount = 0;

beforeAll(async () => {
  emulators = await startEmulators({ kinesis: false });
  clients = createAwsClients(emulators.clientOptions);
  await clients.s3.send(new CreateBucketCommand({ Bucket: bucket }));
}, 120_000);
afterAll(async () => {
  if (clients) await deleteResources(clients, { tables, buckets: [bucket] });
  clients?.destroy();
  await emulators?.stop();
});

async function newTable(): Promise<string> {
  const name = `spillgc-${process.pid}-${tableCount++}`;
  await clients.dynamodb.send(new CreateTableCommand({
    TableName: name, AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
    KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }], BillingMode: 'PAY_PER_REQUEST',
  }));
  tables.push(name);
  return name;
}

const batch = (batchId: number, rows: unknown[][]): SinkBatch => ({
  batchId, columns: ['k', 'v'], rows, outputMode: 'update', partitionId: 'shard-0',
  schema: [{ name: 'k', type: 'string' }, { name: 'v', type: 'string' }],
});
/** A value that does not fit an item, so it is spilled; `c` makes it distinct. */
const big = (c: string) => c.repeat(MAX_ITEM_BYTES);
/** The key of a spilled string value's object (its DynamoDB attribute value as JSON). */
const keyOf = (prefix: string, value: string, variant = 0) => spillObjectKey(prefix, JSON.stringify({ S: value }), variant);

async function keysUnder(prefix: string): Promise<string[]> {
  const listed = await clients.s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
  return (listed.Contents ?? []).map((o) => o.Key!).sort();
}

function sinkFor(table: string, prefix: string, s3 = clients.s3, now?: () => number): DynamoDbUpsertSink {
  return new DynamoDbUpsertSink({ client: clients.dynamodb, tableName: table, keyColumns: ['k'], spill: { client: s3, bucket, prefix, ...(now ? { now } : {}) } });
}

function collect(table: string, prefix: string, run: number, extra: Partial<SpillGcOptions> = {}) {
  return collectSpillGarbage({
    s3: clients.s3, bucket, prefixes: [prefix], dynamodb: clients.dynamodb, tables: async () => [table], graceMs: GRACE, now: runAt(run), ...extra,
  });
}

/** `count` items, item i pointing to object i under `prefix` (the object put too, unless not `withObjects`): what a spilling sink leaves, without its values. */
async function pointerItems(table: string, prefix: string, count: number, noteBytes = 0, withObjects = true): Promise<string[]> {
  const keys = Array.from({ length: count }, (_, i) => `${prefix}_sluice_spill/${i.toString(16).padStart(64, '0')}.json`);
  const items: Record<string, AttributeValue>[] = keys.map((key, i) => ({
    pk: { S: `k=${i}` }, _spilled: { M: { v: { S: `s3://${bucket}/${key}` } } }, ...(noteBytes > 0 ? { note: { S: 'n'.repeat(noteBytes) } } : {}),
  }));
  for (let i = 0; i < items.length; i += 25) {
    await clients.dynamodb.send(new BatchWriteItemCommand({ RequestItems: { [table]: items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })) } }));
  }
  if (withObjects) for (const key of keys) await clients.s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: '{}' }));
  return keys;
}

describe('spill collector (DynamoDB Local + s3rver)', () => {
  it('an orphan (a replaced spilled value) is tombstoned by one run and deleted by the next; the referenced object stays', async () => {
    const table = await newTable();
    const prefix = 'orphan/';
    const sink = sinkFor(table, prefix);
    await sink.addBatch(batch(0, [['g', big('a')]]));
    await sink.addBatch(batch(1, [['g', big('b')]]));
    const [orphan, live] = [keyOf(prefix, big('a')), keyOf(prefix, big('b'))];
    expect(await keysUnder(`${prefix}_sluice_spill/`)).toEqual([orphan, live].sort());

    const first = await collect(table, prefix, 1);
    expect(first).toMatchObject({ objects: 2, referenced: 1, marked: [orphan], deleted: [] });
    expect(first.scan.requests).toBeGreaterThanOrEqual(1);
    // Marked, not deleted: a writer may still be on its way to point to it.
    expect(await keysUnder(`${prefix}_sluice_spill/`)).toEqual([orphan, live].sort());
    expect(await keysUnder(`${prefix}_sluice_spill_tombstones/`)).toHaveLength(1);

    const second = await collect(table, prefix, 2);
    expect(second).toMatchObject({ deleted: [orphan], unmarked: [], marked: [] });
    expect(await keysUnder(`${prefix}_sluice_spill/`)).toEqual([live]);
    expect(await keysUnder(`${prefix}_sluice_spill_tombstones/`)).toEqual([]);
    expect(await scanDynamoDbSink(clients.dynamodb, table, { s3: clients.s3 })).toEqual([{ k: 'g', v: big('b') }]);
  });

  it('an object two items share stays while either points to it; a young object is not marked', async () => {
    const table = await newTable();
    const prefix = 'shared/';
    const sink = sinkFor(table, prefix);
    await sink.addBatch(batch(0, [['g', big('s')], ['h', big('s')]]));
    await sink.addBatch(batch(1, [['g', 'small now']]));
    const shared = keyOf(prefix, big('s'));
    // Within the grace (the real clock): nothing is judged.
    expect((await collect(table, prefix, 0)).marked).toEqual([]);
    for (const run of [1, 2, 3]) expect(await collect(table, prefix, run)).toMatchObject({ marked: [], deleted: [], referenced: 1 });
    expect(await keysUnder(`${prefix}_sluice_spill/`)).toEqual([shared]);
    expect(await scanDynamoDbSink(clients.dynamodb, table, { s3: clients.s3 })).toEqual(expect.arrayContaining([{ k: 'h', v: big('s') }]));
  });

  it('a dry run reports what it would mark and delete, and changes nothing', async () => {
    const table = await newTable();
    const prefix = 'dry/';
    const sink = sinkFor(table, prefix);
    await sink.addBatch(batch(0, [['g', big('a')]]));
    await sink.addBatch(batch(1, [['g', big('b')]]));
    const orphan = keyOf(prefix, big('a'));
    expect(await collect(table, prefix, 1, { dryRun: true })).toMatchObject({ dryRun: true, marked: [orphan], deleted: [] });
    expect(await keysUnder(`${prefix}_sluice_spill_tombstones/`)).toEqual([]);
    await collect(table, prefix, 1);
    expect(await collect(table, prefix, 2, { dryRun: true })).toMatchObject({ dryRun: true, deleted: [orphan] });
    expect(await keysUnder(`${prefix}_sluice_spill/`)).toContain(orphan);
    expect(await keysUnder(`${prefix}_sluice_spill_tombstones/`)).toHaveLength(1);
  });

  it('a writer gated between the tombstone and the delete points to a variant key: the marked object goes, its item\'s object stays', async () => {
    const table = await newTable();
    const prefix = 'race-after/';
    const sink = sinkFor(table, prefix);
    await sink.addBatch(batch(0, [['g', big('a')]]));
    await sink.addBatch(batch(1, [['g', big('b')]]));
    const orphan = keyOf(prefix, big('a'));
    expect((await collect(table, prefix, 1)).marked).toEqual([orphan]);
    // Run 2, after its scan and before its delete: an item with the orphan's content is written.
    const second = await collect(table, prefix, 2, {
      afterScan: async () => { await sink.addBatch(batch(2, [['h', big('a')]])); },
    });
    expect(second.deleted).toEqual([orphan]);
    expect(await keysUnder(`${prefix}_sluice_spill/`)).toEqual([keyOf(prefix, big('a'), 1), keyOf(prefix, big('b'))].sort());
    const answer = await scanDynamoDbSink(clients.dynamodb, table, { s3: clients.s3 });
    expect(answer.sort((x, y) => String(x.k).localeCompare(String(y.k)))).toEqual([{ k: 'g', v: big('b') }, { k: 'h', v: big('a') }]);
    // The variant is an object like any other: once nothing points to it, it goes too.
    await sink.addBatch(batch(3, [['h', 'small']]));
    await collect(table, prefix, 3);
    expect((await collect(table, prefix, 4)).deleted).toEqual([keyOf(prefix, big('a'), 1)]);
  });

  it('a writer that looked before the tombstone and writes after it: the next run sees its item and unmarks the object', async () => {
    const table = await newTable();
    const prefix = 'race-before/';
    const seed = sinkFor(table, prefix);
    await seed.addBatch(batch(0, [['g', big('a')]]));
    await seed.addBatch(batch(1, [['g', big('b')]]));
    const orphan = keyOf(prefix, big('a'));
    // The writer's PutObject waits for the gate: its look-up found no tombstone yet.
    let release!: () => void;
    let reached!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const atGate = new Promise<void>((r) => { reached = r; });
    const gated = {
      send: async (command: object) => {
        if (command instanceof PutObjectCommand) { reached(); await gate; }
        return clients.s3.send(command as never);
      },
    };
    const writing = sinkFor(table, prefix, gated as never).addBatch(batch(2, [['h', big('a')]]));
    await atGate;
    expect((await collect(table, prefix, 1)).marked).toEqual([orphan]);
    release();
    await writing;
    const second = await collect(table, prefix, 2);
    expect(second).toMatchObject({ deleted: [], unmarked: [orphan] });
    expect(await keysUnder(`${prefix}_sluice_spill/`)).toContain(orphan);
    expect(await keysUnder(`${prefix}_sluice_spill_tombstones/`)).toEqual([]);
    expect((await scanDynamoDbSink(clients.dynamodb, table, { s3: clients.s3 })).find((r) => r.k === 'h')).toEqual({ k: 'h', v: big('a') });
  });

  it('a writer whose items would come later than its look-up holds fails the batch, retryably, with no item written', async () => {
    const table = await newTable();
    const prefix = 'slow/';
    let clock = Date.now();
    const gated = {
      send: async (command: object) => {
        // The look-up was at `clock`; its objects land long after.
        if (command instanceof PutObjectCommand) clock += SPILL_CHECK_VALID_MS + 1;
        return clients.s3.send(command as never);
      },
    };
    const sink = sinkFor(table, prefix, gated as never, () => clock);
    await expect(sink.addBatch(batch(0, [['g', big('a')]]))).rejects.toMatchObject({ code: 'SINK_WRITE_FAILED', retryable: true });
    expect(await scanDynamoDbSink(clients.dynamodb, table, { s3: clients.s3 })).toEqual([]);
  });
});

describe("the scan's cost", () => {
  it('a run reads every item in full, strongly consistent: about one read unit per 4 KB, one request per MB', async () => {
    const table = await newTable();
    const items: Record<string, AttributeValue>[] = Array.from({ length: 600 }, (_, i) => ({
      pk: { S: `k=${i}` }, note: { S: 'n'.repeat(8 * 1024) },
      ...(i % 10 === 0 ? { _spilled: { M: { notes: { S: `s3://${bucket}/cost/_sluice_spill/${'0'.repeat(64)}.json` } } } } : {}),
    }));
    for (let i = 0; i < items.length; i += 25) {
      await clients.dynamodb.send(new BatchWriteItemCommand({ RequestItems: { [table]: items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })) } }));
    }
    const bytes = items.reduce((n, item) => n + itemBytes(item), 0);
    const { scan } = await collect(table, 'cost/', 1, { dryRun: true });
    const perGb = (n: number) => Math.round(n * 2 ** 30 / bytes);
    console.info(`spill collector scan: ${items.length} items, ${bytes} bytes: ${scan.requests} Scan requests, ${scan.readUnits} read units; per GB: ${perGb(scan.requests)} requests, ${perGb(scan.readUnits)} read units`);
    expect(scan.items).toBe(items.length);
    // Each page is charged its items' bytes rounded up to 4 KB, the pages at most 1 MB each.
    expect(scan.requests).toBeGreaterThanOrEqual(Math.ceil(bytes / 2 ** 20));
    expect(scan.readUnits).toBeGreaterThanOrEqual(Math.ceil(bytes / 4096));
    expect(scan.readUnits).toBeLessThanOrEqual(Math.ceil(bytes / 4096) + scan.requests);
  });
});

describe("the scan's throughput", () => {
  it('a parallel scan (16 segments, 4 at once) against one segment read in turn: items per second, same items', async () => {
    const table = await newTable();
    const count = Number(process.env.SPILL_GC_SCAN_ITEMS ?? 2000);
    // The objects do not matter to the scan's speed: only the items are written.
    await pointerItems(table, 'throughput/', count, 2048, false);
    const timed = async (segments: number, concurrency: number) => {
      const started = performance.now();
      const { scan } = await collect(table, 'throughput/', 1, { dryRun: true, scanSegments: segments, scanConcurrency: concurrency });
      return { ms: performance.now() - started, scan };
    };
    // Alternated, twice each, so neither gains from running second (a warm emulator).
    const runs: ({ segments: number } & Awaited<ReturnType<typeof timed>>)[] = [];
    for (const [segments, concurrency] of [[1, 1], [16, 4], [1, 1], [16, 4]] as const) runs.push({ segments, ...await timed(segments, concurrency) });
    const rate = (segments: number) => {
      const of = runs.filter((r) => r.segments === segments);
      return Math.round(of.reduce((n, r) => n + r.scan.items, 0) / (of.reduce((ms, r) => ms + r.ms, 0) / 1000));
    };
    console.info(`spill collector scan of ${count} items of ~2 KB, twice each: one segment ${rate(1)} items/s (${runs[0]!.scan.requests} requests), `
      + `16 segments 4 at once ${rate(16)} items/s (${runs[1]!.scan.requests} requests): x${(rate(16) / rate(1)).toFixed(2)}`);
    for (const r of runs) expect(r.scan.items).toBe(count);
  }, 300_000);
});

describe('the collector of a deployed query (pointer item, lease)', () => {
  const name = `spillgc-q-${process.pid}`;
  const checkpointTable = `spillgc-cp-${process.pid}`;
  const definition = { name, sink: { kind: 'dynamodb', onUnwritableRow: 'spill' } } as unknown as QueryDefinition;
  const configOf = (sinkTable: string): RuntimeConfig => ({ checkpointTable, stateTable: checkpointTable, sinkBucket: bucket, sinkTable, sinkPrefix: '' } as unknown as RuntimeConfig);

  beforeAll(async () => {
    await ensureTables(clients.dynamodb, { checkpointTable, stateTable: checkpointTable });
    tables.push(checkpointTable);
  });

  it("scans a replay's table too: an object only the shadow's item points to stays", async () => {
    const live = await newTable();
    const shadowTable = await newTable();
    const prefix = `${name}/`;
    await sinkFor(live, prefix).addBatch(batch(0, [['g', big('r')]]));
    await sinkFor(live, prefix).addBatch(batch(1, [['g', 'live changed']]));
    await sinkFor(shadowTable, prefix).addBatch(batch(0, [['g', big('r')]]));
    await startShadow(clients.dynamodb, checkpointTable, name, {
      namespace: `${name}@r1`, sinkTable: shadowTable, runId: 'r1', fromMs: 0, startedAtMs: Date.now(), drivenBy: 'cli',
    }, { namespace: name });
    const config = configOf(live);
    const first = await runSpillGc({ queryName: name, config, clients, graceMs: GRACE, now: runAt(1) });
    expect(first).toMatchObject({ marked: [], referenced: 1 });
    expect((first as unknown as { scan: { tables: string[] } }).scan.tables.sort()).toEqual([live, shadowTable].sort());
    // Without the shadow's table the same object would be marked.
    expect(await collectSpillGarbage({
      s3: clients.s3, bucket, prefixes: [prefix], dynamodb: clients.dynamodb, tables: async () => [live], graceMs: GRACE, now: runAt(1), dryRun: true,
    })).toMatchObject({ marked: [keyOf(prefix, big('r'))] });
  });

  it('a run is refused while another holds the lease, and the scheduled one within its interval', async () => {
    const config = configOf(await newTable());
    const other = { ...definition, name: `${name}-lease` } as QueryDefinition;
    const held = await claimSpillGcLease(clients.dynamodb, checkpointTable, other.name, Date.now(), 60_000);
    expect(held).not.toBeNull();
    expect(await runSpillGc({ queryName: other.name, config, clients, graceMs: GRACE })).toEqual({ skipped: 'not-due-or-running' });
    // A dry run writes nothing and takes no lease.
    expect(await runSpillGc({ queryName: other.name, config, clients, graceMs: GRACE, dryRun: true })).toMatchObject({ dryRun: true });
    // After the lease ran out: one run, then none within the interval, but one on demand.
    const later = Date.now() + 120_000;
    expect(await runSpillGc({ queryName: other.name, config, clients, graceMs: GRACE, now: () => later, minIntervalMs: HOUR })).toMatchObject({ dryRun: false });
    expect(await runSpillGc({ queryName: other.name, config, clients, graceMs: GRACE, now: () => later + 1000, minIntervalMs: HOUR })).toEqual({ skipped: 'not-due-or-running' });
    expect(await runSpillGc({ queryName: other.name, config, clients, graceMs: GRACE, now: () => later + 2000 })).toMatchObject({ dryRun: false });
  });

  it('a run with little time left (a fake Lambda context) stops within its scan, marking nothing; the next run continues the scan and judges as a whole one', async () => {
    const query = `${name}-deadline`;
    const config = configOf(await newTable());
    const prefix = `${query}/`;
    const live = await pointerItems(config.sinkTable!, prefix, 40);
    const orphan = `${prefix}_sluice_spill/${'f'.repeat(64)}.json`;
    await clients.s3.send(new PutObjectCommand({ Bucket: bucket, Key: orphan, Body: '{}' }));
    // The context's time runs out after 8 of the 16 segments' first pages were asked for.
    let asked = 0;
    const context = { getRemainingTimeInMillis: () => (++asked <= 8 ? 50_000 : 4_000) };
    const first = await runSpillGc({
      queryName: query, config, clients, graceMs: GRACE, now: runAt(1), minIntervalMs: HOUR, remainingMs: () => context.getRemainingTimeInMillis(),
    }) as SpillGcReport;
    expect(first).toMatchObject({ stoppedBy: 'deadline', marked: [], deleted: [], unmarked: [] });
    expect(first.scan.items).toBeGreaterThan(0);
    expect(first.scan.items).toBeLessThan(live.length);
    // What the first part saw referenced is not carried as a candidate.
    expect(first.progress!.unreferenced).toContain(orphan);
    expect(first.progress!.unreferenced.length).toBe(1 + live.length - first.scan.items);
    expect(await keysUnder(`${prefix}_sluice_spill_tombstones/`)).toEqual([]);
    const lease = await clients.dynamodb.send(new GetItemCommand({ TableName: checkpointTable, Key: { pk: { S: `${query}#spill-gc` }, sk: { S: 'lease' } }, ConsistentRead: true }));
    expect(lease.Item?.scanProgress?.S).toBeDefined();
    expect(lease.Item?.lastRunAt).toBeUndefined();

    // The next tick, within the interval: not a new run but the rest of this one's scan.
    const second = await runSpillGc({ queryName: query, config, clients, graceMs: GRACE, now: () => runAt(1)() + 60_000, minIntervalMs: HOUR }) as SpillGcReport;
    expect(second).toMatchObject({ resumed: true, marked: [orphan], deleted: [] });
    expect(second.stoppedBy).toBeUndefined();
    expect(first.scan.items + second.scan.items).toBe(live.length);
    // Finished: the run is recorded and the progress gone, so the next is a day later and scans afresh.
    expect(await runSpillGc({ queryName: query, config, clients, graceMs: GRACE, now: () => runAt(1)() + 120_000, minIntervalMs: HOUR })).toEqual({ skipped: 'not-due-or-running' });
    const third = await runSpillGc({ queryName: query, config, clients, graceMs: GRACE, now: runAt(2) }) as SpillGcReport;
    expect(third).toMatchObject({ deleted: [orphan], marked: [] });
    expect(third.resumed).toBeUndefined();
    expect(third.scan.items).toBe(live.length);
    expect((await keysUnder(`${prefix}_sluice_spill/`)).sort()).toEqual([...live].sort());
  });

  it('a context with less time left than the reserve: nothing is scanned or written; the next run does the whole scan', async () => {
    const query = `${name}-no-time`;
    const config = configOf(await newTable());
    const prefix = `${query}/`;
    const live = await pointerItems(config.sinkTable!, prefix, 10);
    const context = { getRemainingTimeInMillis: () => 3_000 };
    const first = await runSpillGc({ queryName: query, config, clients, graceMs: GRACE, now: runAt(1), remainingMs: () => context.getRemainingTimeInMillis() }) as SpillGcReport;
    expect(first).toMatchObject({ stoppedBy: 'deadline', marked: [], scan: { requests: 0 } });
    const second = await runSpillGc({ queryName: query, config, clients, graceMs: GRACE, now: runAt(1) }) as SpillGcReport;
    expect(second).toMatchObject({ resumed: true, marked: [], referenced: live.length, scan: { items: live.length } });
  });

  it('sluice spill gc --dry-run: scans the sink table, lists the objects and changes nothing; a query that does not spill is a usage error', async () => {
    const sinkTable = await newTable();
    const cliQuery = `${name}-cli`;
    const prefix = `${cliQuery}/`;
    const sink = sinkFor(sinkTable, prefix);
    await sink.addBatch(batch(0, [['g', big('c')]]));
    await sink.addBatch(batch(1, [['g', big('d')]]));
    const dir = mkdtempSync(join(tmpdir(), 'spill-gc-'));
    const descriptor = (table?: string) => ({ sluiceQuery: cliQuery, checkpointTable, stateTable: checkpointTable, streamName: 's', deadLetterBucket: bucket, sinkBucket: bucket, ...(table ? { sinkTable: table } : {}) });
    const file = join(dir, 'deployment.json');
    const cli = (args: string[]) => runSluice([...args, '--deployment', file, '--endpoint', `dynamodb=${emulators.endpoints.dynamodb}`, '--endpoint', `s3=${emulators.endpoints.s3}`],
      60_000, emulatorCliEnv(emulators));
    writeFileSync(file, JSON.stringify(descriptor(sinkTable)));
    const before = await keysUnder(prefix);
    const dry = await cli(['spill', 'gc', cliQuery, '--dry-run', '--json']);
    expect(dry.stderr).toBe('');
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true, objects: 2, referenced: 1, scan: { tables: [sinkTable], items: 1 } });
    expect(await keysUnder(prefix)).toEqual(before);
    writeFileSync(file, JSON.stringify(descriptor()));
    const refused = await cli(['spill', 'gc', cliQuery]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/no DynamoDB sink that spills/);
  }, 120_000);
});
