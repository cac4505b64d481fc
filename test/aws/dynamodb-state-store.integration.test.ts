import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeleteItemCommand, PutItemCommand, QueryCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import {
  DynamoDbStateStoreProvider, StateCache, decodeStateJson, encodeStateJson, type DynamoDbStateStoreOptions,
} from '../../lib/aws/dynamodb-state-store.js';
import { ensureTables } from '../../lib/aws/tables.js';
import { PIECE_BYTES, type PayloadStats } from '../../lib/aws/state-payload-stream.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { deleteResources } from '../support/cleanup.js';
import { CostMeter } from '../../lib/core/cost-meter.js';
import type { StateStore } from '../../lib/state/state-store.js';
import { CheckpointError } from '../../lib/errors/sluice-error.js';

let emu: EmulatorSet;
let aws: AwsClients;
let client: DynamoDBClient;
const TABLE = 'sluice-state-test';
const ID = { operatorId: 0, storeName: 'default' };

beforeAll(async () => {
  emu = await startEmulators({ kinesis: false, s3: false });
  aws = createAwsClients(emu.clientOptions);
  client = aws.dynamodb;
  await ensureTables(client, { checkpointTable: 'sluice-state-test-cp', stateTable: TABLE });
});

afterAll(async () => {
  if (aws) await deleteResources(aws, { tables: ['sluice-state-test-cp', TABLE] });
  aws?.destroy();
  await emu?.stop();
});

/** A provider on its own query name (a fresh store) and, unless shared, its own cache. */
function provider(overrides: Partial<DynamoDbStateStoreOptions> = {}): DynamoDbStateStoreProvider {
  return new DynamoDbStateStoreProvider({ client, table: TABLE, queryName: `q-${randomUUID().slice(0, 8)}`, partitionId: 'shard-0', cache: new StateCache(), ...overrides });
}

const contents = <V>(s: StateStore<V>): Record<string, V> => Object.fromEntries([...s.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));

async function items(pk: string): Promise<string[]> {
  const sks: string[] = [];
  let start: Record<string, AttributeValue> | undefined;
  do {
    const out = await client.send(new QueryCommand({
      TableName: TABLE, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: pk } }, ProjectionExpression: 'sk', ExclusiveStartKey: start,
    }));
    sks.push(...(out.Items ?? []).map((i) => i.sk!.S!));
    start = out.LastEvaluatedKey;
  } while (start);
  return sks;
}

/** Commits `n` versions on top of `from`, version v putting key `k<v>` and removing `k<v-3>`. */
async function commitVersions(p: DynamoDbStateStoreProvider, from: number, n: number): Promise<void> {
  for (let v = from; v < from + n; v++) {
    const s = await p.open<number>(ID, v);
    s.put(`k${v}`, v);
    s.remove(`k${v - 3}`);
    expect(await s.commit()).toBe(v + 1);
  }
}

/** What commitVersions leaves at version v: keys k(v-3)..k(v-1). */
function expectedAt(v: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (let i = Math.max(0, v - 3); i < v; i++) out[`k${i}`] = i;
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : 1)));
}

describe('value encoding', () => {
  it('round-trips undefined, NaN, infinities and -0 exactly, and plain JSON without tags', () => {
    const values: unknown[] = [
      [['a', undefined, null], [1, Number.NaN]],
      { start: 1, end: Infinity, nested: [-Infinity, -0, 0, 'x'], gone: undefined },
      undefined,
      [null, false, '', '\u0000t', { '\u0000t': 'not a tag' }],
    ];
    const payload = { e: values.map((v, i) => [`k${i}`, v]) };
    const decoded = decodeStateJson(encodeStateJson(payload, values)) as { e: [string, unknown][] };
    expect(decoded.e.map((e) => e[1])).toEqual(values);
    const back = decoded.e.map((e) => e[1]) as [unknown[], Record<string, unknown>, unknown, unknown[]];
    expect(Object.is((back[1].nested as number[])[1], -0)).toBe(true);
    expect((back[0][0] as unknown[]).length).toBe(3);
    expect(1 in (back[0][0] as unknown[])).toBe(true); // an element, not a hole
    expect('gone' in back[1]).toBe(true);
    expect(encodeStateJson({ e: [['k', [1, 'a', null]]] }, [[1, 'a', null]])).toBe('{"e":[["k",[1,"a",null]]]}');
  });
});

describe('DynamoDbStateStoreProvider', () => {
  it('puts, removes and commits across versions, and re-opens an older version', async () => {
    const p = provider();
    const s0 = await p.open<unknown>(ID, 0);
    expect(s0.size).toBe(0);
    s0.put('a', [['north'], [15, 1]]);
    s0.put('b', { start: 1, end: 2 });
    s0.put('c', 'gone soon');
    s0.remove('c');
    expect(s0.size).toBe(2);
    expect(await s0.commit()).toBe(1);

    const s1 = await p.open<unknown>(ID, 1);
    expect(contents(s1)).toEqual({ a: [['north'], [15, 1]], b: { start: 1, end: 2 } });
    s1.put('a', [['north'], [40, 2]]);
    s1.remove('b');
    s1.put('u', [undefined, Number.NaN]);
    expect(await s1.commit()).toBe(2);

    const fresh = provider({ queryName: nameOf(p) });
    expect(contents(await fresh.open<unknown>(ID, 2))).toEqual({ a: [['north'], [40, 2]], u: [undefined, Number.NaN] });
    expect(contents(await fresh.open<unknown>(ID, 1))).toEqual({ a: [['north'], [15, 1]], b: { start: 1, end: 2 } });
    expect(contents(await fresh.open<unknown>(ID, 0))).toEqual({});
  });

  it('aborted changes are not committed, and a committed store refuses more changes', async () => {
    const p = provider();
    const s0 = await p.open<number>(ID, 0);
    s0.put('x', 1);
    s0.abort();
    s0.put('y', 2);
    await s0.commit();
    expect(() => s0.put('z', 3)).toThrow(CheckpointError);
    expect(contents(await provider({ queryName: nameOf(p) }).open<number>(ID, 1))).toEqual({ y: 2 });
  });

  it('a re-run of a batch rewrites its version, and either outcome reads back the same', async () => {
    const p = provider();
    await commitVersions(p, 0, 3);
    // Batch 2 again (its commit-log write was lost): open 2 again, same changes, commit 3 again.
    const again = await p.open<number>(ID, 2);
    again.put('k2', 2);
    again.remove('k-1');
    expect(await again.commit()).toBe(3);
    expect(contents(await provider({ queryName: nameOf(p) }).open<number>(ID, 3))).toEqual(expectedAt(3));
  });

  it('throws for a version that was never committed', async () => {
    const p = provider();
    await commitVersions(p, 0, 2);
    const other = provider({ queryName: nameOf(p) });
    await expect(other.open(ID, 3)).rejects.toMatchObject({ code: 'STATE_VERSION_MISSING' });
    await expect(other.open(ID, 3)).rejects.toThrow(/version 3 .* was never committed/);
    await expect(provider().open(ID, 1)).rejects.toMatchObject({ code: 'STATE_VERSION_MISSING' });
  });

  it('writes snapshots every snapshotEvery versions, loads snapshot + deltas, and purges what the previous snapshot replaced', async () => {
    const p = provider({ snapshotEvery: 4 });
    const name = nameOf(p);
    await commitVersions(p, 0, 13);
    const pk = p.storeKey(ID);
    const sks = await items(pk);
    // Snapshots at 4, 8, 12, deltas elsewhere. Writing snapshot 8 deleted deltas 1-3, writing 12
    // deleted snapshot 4 and deltas 5-7: the previous snapshot (8) and everything after it stay.
    expect(sks.filter((s) => s.startsWith('m#'))).toEqual(['m#000000000008', 'm#000000000012']);
    expect(sks.filter((s) => s.startsWith('d#')).map((s) => Number(s.slice(2, 14)))).toEqual([9, 10, 11, 13]);
    expect(sks.filter((s) => s.startsWith('s#')).map((s) => Number(s.slice(2, 14)))).toEqual([8, 12]);

    const reader = provider({ queryName: name, snapshotEvery: 4 });
    for (const v of [13, 12, 11, 9, 8]) expect(contents(await reader.open<number>(ID, v))).toEqual(expectedAt(v));
    await expect(reader.open(ID, 7)).rejects.toMatchObject({ code: 'STATE_VERSION_MISSING' });

    // Reading 13 costs the marker query, one snapshot item and one delta item.
    const meter = new CostMeter();
    await provider({ queryName: name, snapshotEvery: 4, meter }).open(ID, 13);
    const cost = meter.snapshot();
    expect(cost.dynamoDbReadUnits).toBeGreaterThanOrEqual(3);
    expect(cost.dynamoDbReadUnits).toBeLessThanOrEqual(4);
    expect(cost.stateBytesRead).toBeGreaterThan(0);

    // A reader continuing from a loaded state purges correctly too (the marker lists the items).
    await commitVersions(reader, 13, 4);
    const after = await items(pk);
    expect(after.filter((s) => s.startsWith('m#'))).toEqual(['m#000000000012', 'm#000000000016']);
    expect(after.filter((s) => s.startsWith('d#')).map((s) => Number(s.slice(2, 14)))).toEqual([13, 14, 15, 17]);
    expect(contents(await provider({ queryName: name }).open<number>(ID, 17))).toEqual(expectedAt(17));
  });

  it('snapshotByBytes: a large state changed a little is not snapshotted; once the deltas outweigh it, it is, and reloads exactly', async () => {
    const p = provider({ snapshotEvery: 2, snapshotByBytes: true });
    const name = nameOf(p);
    const pk = p.storeKey(ID);
    const key = (i: number): string => `user-${String(i).padStart(6, '0')}`;
    // Version 1: 2,000 keys (one delta). Then 10 versions changing 20 keys each. Before the first
    // snapshot the deltas hold the whole state, so they outweigh it as soon as snapshotEvery (2)
    // allows; after it, 20-key deltas stay far lighter than the state: no snapshot.
    const s0 = await p.open<number>(ID, 0);
    for (let i = 0; i < 2_000; i++) s0.put(key(i), i);
    await s0.commit();
    for (let v = 1; v <= 10; v++) {
      const s = await p.open<number>(ID, v);
      for (let i = 0; i < 20; i++) s.put(key(v * 20 + i), -v);
      await s.commit();
    }
    expect((await items(pk)).filter((sk) => sk.startsWith('m#'))).toEqual(['m#000000000002']);
    // Rewriting every key outweighs the state: a snapshot follows.
    for (let v = 11; v <= 12; v++) {
      const s = await p.open<number>(ID, v);
      for (let i = 0; i < 2_000; i++) s.put(key(i), v * 10_000 + i);
      await s.commit();
    }
    const markers = (await items(pk)).filter((sk) => sk.startsWith('m#'));
    expect(markers).toHaveLength(2);
    expect(Number(markers[1]!.slice(2))).toBeGreaterThanOrEqual(11);
    const reloaded = await provider({ queryName: name, snapshotByBytes: true }).open<number>(ID, 13);
    expect(reloaded.size).toBe(2_000);
    expect(reloaded.get(key(7))).toBe(120_007);
    const at11 = await provider({ queryName: name }).open<number>(ID, 11);
    expect(at11.get(key(200))).toBe(-10);
    expect(at11.get(key(7))).toBe(7);
  });

  it('splits a large state into chunks and reads it back (default 350 KB chunks), never holding its whole text', async () => {
    const p = provider({ snapshotEvery: 2 });
    const stats: PayloadStats = { largestPiece: 0, textLength: 0 };
    p.payloadStats = stats;
    const big: Record<string, string> = {};
    // Random hex does not compress below half: ~1.4 MB of JSON gives a gzip'd payload of 700+ KB.
    for (let i = 0; i < 20_000; i++) big[`key-${String(i).padStart(6, '0')}`] = randomBytes(32).toString('hex');
    const s0 = await p.open<string>(ID, 0);
    for (const [k, v] of Object.entries(big)) s0.put(k, v);
    await s0.commit(); // a delta of 2+ chunks
    const s1 = await p.open<string>(ID, 1);
    s1.put('one-more', 'x');
    await s1.commit(); // a snapshot of 2+ chunks
    // Both payloads (the delta and the snapshot, ~1.4 MB of text each) went to zlib in pieces.
    expect(stats.textLength).toBeGreaterThan(2 * 1_400_000);
    expect(stats.largestPiece).toBeLessThanOrEqual(PIECE_BYTES * 1.1);
    const sks = await items(p.storeKey(ID));
    expect(sks.filter((s) => s.startsWith('d#000000000001#')).length).toBeGreaterThanOrEqual(2);
    expect(sks.filter((s) => s.startsWith('s#000000000002#')).length).toBeGreaterThanOrEqual(2);

    const reader = provider({ queryName: nameOf(p) });
    expect(contents(await reader.open<string>(ID, 1))).toEqual(big);
    expect(contents(await reader.open<string>(ID, 2))).toEqual({ ...big, 'one-more': 'x' });
  });

  it('refuses a delta whose chunks are incomplete or from another write', async () => {
    const p = provider({ chunkBytes: 1024 });
    const s0 = await p.open<string>(ID, 0);
    for (let i = 0; i < 200; i++) s0.put(`k${i}`, randomBytes(16).toString('hex'));
    await s0.commit();
    const pk = p.storeKey(ID);
    const chunks = (await items(pk)).filter((s) => s.startsWith('d#000000000001#'));
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    // A partial rewrite: chunk 1 replaced by another write's chunk.
    await client.send(new PutItemCommand({
      TableName: TABLE,
      Item: { pk: { S: pk }, sk: { S: chunks[1]! }, fmt: { N: '1' }, v: { N: '1' }, c: { N: '1' }, n: { N: String(chunks.length) }, h: { S: 'other' }, z: { B: new Uint8Array([1, 2]) } },
    }));
    await expect(provider({ queryName: nameOf(p) }).open(ID, 1)).rejects.toMatchObject({ code: 'STATE_CHUNK_MISSING' });
    // Chunk 0 (written last) missing: the version was never committed.
    await client.send(new DeleteItemCommand({ TableName: TABLE, Key: { pk: { S: pk }, sk: { S: chunks[0]! } } }));
    await expect(provider({ queryName: nameOf(p) }).open(ID, 1)).rejects.toMatchObject({ code: 'STATE_VERSION_MISSING' });
  });

  it('an open at the cached version costs no reads; any other version reloads', async () => {
    const cache = new StateCache();
    const meter = new CostMeter();
    const p = provider({ cache, meter });
    await commitVersions(p, 0, 3);
    const before = meter.snapshot();
    const s3 = await p.open<number>(ID, 3);
    expect(meter.since(before).dynamoDbReadUnits).toBeUndefined();
    expect(contents(s3)).toEqual(expectedAt(3));
    expect(cache.versionOf(p.cacheKey(ID))).toBe(3);

    // The whole run: every open after the first hits the cache.
    const reads0 = meter.snapshot().dynamoDbReadUnits ?? 0;
    s3.put('k3', 3);
    s3.remove('k0');
    await s3.commit();
    await commitVersions(p, 4, 5);
    expect(meter.snapshot().dynamoDbReadUnits ?? 0).toBe(reads0);
    expect(meter.snapshot().dynamoDbWriteUnits).toBeGreaterThanOrEqual(9);

    // Re-opening an older version is a reload (and does not change the cache).
    const s5 = await p.open<number>(ID, 5);
    expect(meter.snapshot().dynamoDbReadUnits ?? 0).toBeGreaterThan(reads0);
    expect(contents(s5)).toEqual(expectedAt(5));
    expect(cache.versionOf(p.cacheKey(ID))).toBe(9);
  });

  it('a stale cache is not used: another writer moved the store on', async () => {
    const name = `q-${randomUUID().slice(0, 8)}`;
    const cacheA = new StateCache();
    const a = provider({ queryName: name, cache: cacheA });
    const b = provider({ queryName: name, cache: new StateCache() });
    await commitVersions(a, 0, 3); // A's cache: version 3
    // Another container takes the partition over: loads 3, commits 4 and 5.
    const s3 = await b.open<number>(ID, 3);
    s3.put('from-b', 1);
    await s3.commit();
    await commitVersions(b, 4, 1);
    // A gets the partition back at version 5: its cached version 3 must not be used.
    const meter = new CostMeter();
    const a2 = provider({ queryName: name, cache: cacheA, meter });
    const s5 = await a2.open<number>(ID, 5);
    expect(meter.snapshot().dynamoDbReadUnits).toBeGreaterThan(0);
    expect(contents(s5)).toEqual({ k0: 0, k2: 2, k4: 4, 'from-b': 1 });
  });

  it('the cache is updated only by a successful commit', async () => {
    const cache = new StateCache();
    const p = provider({ cache });
    await commitVersions(p, 0, 1);
    const s1 = await p.open<number>(ID, 1);
    s1.put('bad', 1);
    // Break the write: a table that does not exist.
    const broken = new DynamoDbStateStoreProvider({ client, table: 'no-such-table', queryName: nameOf(p), partitionId: 'shard-0', cache });
    const viaBroken = await broken.open<number>(ID, 0);
    viaBroken.put('x', 1);
    await expect(viaBroken.commit()).rejects.toMatchObject({ code: 'STATE_WRITE_FAILED', retryable: true });
    s1.abort();
    expect(cache.versionOf(p.cacheKey(ID))).toBe(1);
    expect(contents(await p.open<number>(ID, 1))).toEqual({ k0: 0 });
  });

  it('two stores opened at the same cached version: the second commit is refused', async () => {
    const p = provider();
    await commitVersions(p, 0, 1);
    const first = await p.open<number>(ID, 1);
    const second = await p.open<number>(ID, 1);
    first.put('a', 1);
    second.put('b', 2);
    await first.commit();
    await expect(second.commit()).rejects.toMatchObject({ code: 'STATE_CONCURRENT_UPDATE' });
  });
});

function nameOf(p: DynamoDbStateStoreProvider): string {
  return p.options.queryName;
}
