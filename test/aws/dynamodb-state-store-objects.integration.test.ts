/**
 * State payloads as S3 objects when one PUT costs less than the chunk items, at the price table's
 * prices: the choice, the read-back (fresh provider, no cache), mixed item and object versions,
 * purging of obsolete objects with the items, and the refusals (no location, a missing object, an
 * object with other bytes).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { DynamoDbStateStoreProvider, StateCache, STATE_OBJECT_FOLDER, type DynamoDbStateStoreOptions } from '../../lib/aws/dynamodb-state-store.js';
import { ensureTables } from '../../lib/aws/tables.js';
import { deleteKeys, listKeys } from '../../lib/aws/s3-util.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { CostMeter } from '../../lib/core/cost-meter.js';
import { PRICES_2026_12_US_EAST_1, unitPrices } from '../../lib/core/price-table.js';
import { deleteResources } from '../support/cleanup.js';

let emu: EmulatorSet;
let aws: AwsClients;
const TABLE = 'sluice-state-objects-test';
const BUCKET = 'sluice-state-objects-test';
const PREFIX = 'results/';
const ID = { operatorId: 0, storeName: 'default' };
/** Issue 17's prices: DynamoDB at twice the current on-demand list price, S3 unchanged. */
const ISSUE_PRICES = { ...unitPrices(PRICES_2026_12_US_EAST_1), dynamoDbWriteUnit: 1.25e-6, dynamoDbReadUnit: 0.25e-6 };

beforeAll(async () => {
  emu = await startEmulators({ kinesis: false });
  aws = createAwsClients(emu.clientOptions);
  await ensureTables(aws.dynamodb, { checkpointTable: `${TABLE}-cp`, stateTable: TABLE });
  await aws.s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
});

afterAll(async () => {
  if (aws) {
    await deleteKeys(aws.s3, BUCKET, await listKeys(aws.s3, BUCKET, '')).catch(() => {});
    await deleteResources(aws, { tables: [`${TABLE}-cp`, TABLE] });
  }
  aws?.destroy();
  await emu?.stop();
});

function provider(overrides: Partial<DynamoDbStateStoreOptions> = {}): DynamoDbStateStoreProvider {
  return new DynamoDbStateStoreProvider({
    client: aws.dynamodb, table: TABLE, queryName: `q-${randomUUID().slice(0, 8)}`, partitionId: 'shard-0', cache: new StateCache(),
    objects: { client: aws.s3, bucket: BUCKET, prefix: PREFIX }, prices: ISSUE_PRICES, ...overrides,
  });
}

/** Random values do not compress: `n` keys of `bytes` bytes give a payload of about n * bytes. */
const noise = (bytes: number): string => randomBytes(bytes).toString('base64').slice(0, bytes);

async function itemsOf(pk: string): Promise<Record<string, { s3?: string; z: boolean }>> {
  const out = await aws.dynamodb.send(new QueryCommand({ TableName: TABLE, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: pk } } }));
  return Object.fromEntries((out.Items ?? []).map((i) => [i.sk!.S!, { ...(i.s3?.S ? { s3: i.s3.S } : {}), z: i.z?.B !== undefined }]));
}

const objectsOf = async (pk: string): Promise<string[]> => listKeys(aws.s3, BUCKET, `${PREFIX}${STATE_OBJECT_FOLDER}${encodeURIComponent(pk)}/`);

describe('state payloads as S3 objects', () => {
  it('chooses by price: an object once the items cost more than a PUT, never without a location', () => {
    const p = provider();
    const pk = p.storeKey(ID);
    // Issue prices ($1.25 per million write units, $0.005 per 1,000 PUTs): a PUT is 4 write units,
    // an item costs its units twice (written, then deleted by a purge, by its size).
    expect(p.payloadAsObject(pk, 500)).toBe(false);
    expect(p.payloadAsObject(pk, 2_500)).toBe(true);
    // At the current prices ($0.625 per million), a PUT is 8 write units: 2.5 KB stays an item.
    const current = provider({ prices: unitPrices(PRICES_2026_12_US_EAST_1) });
    expect(current.payloadAsObject(pk, 2_500)).toBe(false);
    expect(current.payloadAsObject(pk, 4_500)).toBe(true);
    const { objects: _none, ...withoutObjects } = p.options;
    expect(new DynamoDbStateStoreProvider(withoutObjects).payloadAsObject(pk, 1_000_000)).toBe(false);
  });

  it('writes large deltas and snapshots as objects and small ones as items, reads them back exactly, and purges obsolete objects', async () => {
    const p = provider({ snapshotEvery: 3 });
    const pk = p.storeKey(ID);
    const meter = new CostMeter();
    const metered = provider({ queryName: p.options.queryName, snapshotEvery: 3, meter });
    const expected = new Map<string, string>();
    // Odd versions change 40 keys of 300 random bytes (12 KB: an object), even ones one key (an item).
    for (let v = 0; v < 8; v++) {
      const s = await metered.open<string>(ID, v);
      const n = v % 2 === 0 ? 40 : 1;
      for (let i = 0; i < n; i++) {
        const key = `k${(v * 7 + i) % 60}`;
        const value = noise(300);
        s.put(key, value);
        expected.set(key, value);
      }
      if (v === 5) { s.remove('k0'); expected.delete('k0'); }
      expect(await s.commit()).toBe(v + 1);
    }
    const items = await itemsOf(pk);
    // Snapshots at 3 and 6 (objects: the state is over 10 KB, named by their markers); delta 7 (40
    // keys) an object and no item, delta 8 (1 key) an item.
    expect(items['d#000000000007#0000']).toBeUndefined();
    expect(items['d#000000000008#0000']).toEqual({ z: true });
    expect(items['s#000000000006#0000']).toBeUndefined();
    expect(items['m#000000000006']?.s3).toBe(p.objectKey(pk, 's', 6));
    // Snapshot 6 deleted what snapshot 3 replaced: delta 1's object (and delta 2's item).
    const objects = await objectsOf(pk);
    expect(objects.map((k) => k.split('/').at(-1)).sort()).toEqual(['d000000000005', 'd000000000007', 's000000000003', 's000000000006']);
    expect(Object.keys(items).filter((sk) => sk.startsWith('d#')).map((sk) => Number(sk.slice(2, 14)))).toEqual([4, 8]);
    expect(meter.snapshot().s3Puts).toBe(5);
    // DynamoDB wrote only deltas 2, 4, 8, the two markers, and deleted delta 2 (one unit each).
    expect(meter.snapshot().dynamoDbWriteUnits).toBe(6);

    const fresh = await provider({ queryName: p.options.queryName }).open<string>(ID, 8);
    expect(Object.fromEntries(fresh.entries())).toEqual(Object.fromEntries(expected));
    const readMeter = new CostMeter();
    await provider({ queryName: p.options.queryName, meter: readMeter }).open<string>(ID, 8);
    // Snapshot 6's object and delta 7's; delta 8 is an item.
    expect(readMeter.snapshot().s3Gets).toBe(2);
  });

  it('refuses a snapshot object that is missing or has other bytes; without a location a delta object is a missing version', async () => {
    const p = provider({ snapshotEvery: 2 });
    for (let v = 0; v < 2; v++) {
      const s = await p.open<string>(ID, v);
      for (let i = 0; i < 40; i++) s.put(`k${i}`, noise(300));
      await s.commit();
    }
    const pk = p.storeKey(ID);
    const { objects: _none, ...withoutObjects } = p.options;
    await expect(new DynamoDbStateStoreProvider({ ...withoutObjects, cache: null }).open(ID, 1)).rejects.toMatchObject({ code: 'STATE_VERSION_MISSING' });
    await expect(new DynamoDbStateStoreProvider({ ...withoutObjects, cache: null }).open(ID, 2)).rejects.toMatchObject({ code: 'STATE_OBJECTS_UNREACHABLE' });
    const snapshot = p.objectKey(pk, 's', 2);
    expect(await objectsOf(pk)).toContain(snapshot);
    await aws.s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: snapshot, Body: Buffer.from('other bytes') }));
    await expect(provider({ queryName: p.options.queryName }).open(ID, 2)).rejects.toMatchObject({ code: 'STATE_CORRUPT' });
    await deleteKeys(aws.s3, BUCKET, [snapshot]);
    await expect(provider({ queryName: p.options.queryName }).open(ID, 2)).rejects.toMatchObject({ code: 'STATE_CHUNK_MISSING', retryable: true });
  });

  it('a re-run of a version rewrites its object, and a version with neither item nor object was never committed', async () => {
    const p = provider({ cache: null });
    const values = Array.from({ length: 40 }, () => noise(300));
    for (let attempt = 0; attempt < 2; attempt++) {
      const s = await p.open<string>(ID, 0);
      values.forEach((v, i) => s.put(`k${i}`, attempt === 0 ? v : `${v}!`));
      await s.commit();
    }
    const pk = p.storeKey(ID);
    expect(await objectsOf(pk)).toHaveLength(1);
    const read = await provider({ queryName: p.options.queryName }).open<string>(ID, 1);
    expect(read.get('k3')).toBe(`${values[3]}!`);
    await expect(provider({ queryName: p.options.queryName }).open(ID, 2)).rejects.toMatchObject({ code: 'STATE_VERSION_MISSING' });
  });
});
