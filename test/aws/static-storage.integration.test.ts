/**
 * session.read over S3 (s3rver) and DynamoDB (DynamoDB Local) through awsStaticStorage: JSON Lines
 * and Parquet under a prefix, a table's items (paginated scan), and a stream-static join with them.
 */
import { BatchWriteItemCommand, CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { CreateBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { awsStaticStorage } from '../../lib/aws/static-storage.js';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, sum } from '../../lib/plan/functions.js';
import { encodeParquet } from '../../lib/sinks/parquet-format.js';
import { addData, checkNewAnswer, testStream } from '../../lib/testing/test-stream.js';
import { deleteResourcesNamed } from '../support/cleanup.js';

let emulators: EmulatorSet;
let clients: AwsClients;
let session: SluiceSession;
const bucket = `static-${process.pid}-1`;
const table = `static-${process.pid}-users`;

beforeAll(async () => {
  emulators = await startEmulators({ kinesis: false });
  clients = createAwsClients(emulators.clientOptions);
  session = new SluiceSession({}, { storage: awsStaticStorage(clients) });
  await clients.s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const put = (key: string, body: string | Uint8Array) => clients.s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
  await put('stores/part-0.jsonl', '{"store": "s1", "city": "Paris"}\n{"store": "s2", "city": "Lyon"}\n');
  await put('stores/more/part-1.jsonl', '{"store": "s3", "city": "Nice"}\n');
  await put('stores/_sluice_staging/part-2.jsonl', '{"store": "staged", "city": "nowhere"}\n');
  await put('storesX/other.jsonl', '{"store": "not under the prefix"}\n');
  await put('lake/part-0.parquet', encodeParquet([['s1', 5, 1_704_103_200_000_000]], [{ name: 'store', type: 'string' }, { name: 'n', type: 'long' }, { name: 'ts', type: 'timestamp' }], [0, 1, 2]));
  await clients.dynamodb.send(new CreateTableCommand({
    TableName: table, BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }], KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
  }));
  // 60 items of 20 KB: 1.2 MB, more than one Scan page (1 MB), so the reader must follow LastEvaluatedKey.
  const pad = 'x'.repeat(20_000);
  for (let start = 0; start < 60; start += 25) {
    await clients.dynamodb.send(new BatchWriteItemCommand({ RequestItems: { [table]: Array.from({ length: Math.min(25, 60 - start) }, (_, j) => {
      const i = start + j;
      return { PutRequest: { Item: {
        id: { S: `u${String(i).padStart(2, '0')}` }, tier: { N: String(i % 3) }, big: { N: '9007199254740993' }, ratio: { N: '0.5' },
        tags: { SS: ['b', 'a'] }, profile: { M: { city: { S: i % 2 ? 'Lyon' : 'Paris' } } }, pad: { S: pad },
      } } };
    }) } }));
  }
}, 120_000);

afterAll(async () => {
  if (clients) {
    await deleteResourcesNamed(clients, 'buckets', `static-${process.pid}-`);
    await deleteResourcesNamed(clients, 'tables', `static-${process.pid}-`);
  }
  clients?.destroy();
  await emulators?.stop();
});

describe('session.read on S3', () => {
  it('json(s3://bucket/prefix): every object under the prefix as a folder, staging files left out', async () => {
    const stores = await session.read.json(`s3://${bucket}/stores`);
    expect(stores.schema).toEqual([{ name: 'city', type: 'string' }, { name: 'store', type: 'string' }]);
    expect(stores.orderBy('store').collect()).toEqual([['Nice', 's3'], ['Paris', 's1'], ['Lyon', 's2']].sort((a, b) => (a[1]! < b[1]! ? -1 : 1)));
    const one = await session.read.json(`s3://${bucket}/stores/more/part-1.jsonl`);
    expect(one.collect()).toEqual([['Nice', 's3']]);
  });

  it('parquet(s3://...), and a missing prefix is PATH_NOT_FOUND', async () => {
    expect((await session.read.parquet(`s3://${bucket}/lake/`)).collect()).toEqual([['s1', 5, 1_704_103_200_000_000]]);
    await expect(session.read.json(`s3://${bucket}/nothing-here/`)).rejects.toThrow(/PATH_NOT_FOUND/);
  });
});

describe('session.read.dynamodb', () => {
  it("scans every item (all pages): numbers as long (exact beyond 2^53) or double, sets as arrays, maps as structs", async () => {
    const users = await session.read.dynamodb(table);
    expect(users.schema.filter((f) => f.name !== 'pad')).toEqual([
      { name: 'big', type: 'long' }, { name: 'id', type: 'string' }, { name: 'profile', type: 'struct<city:string>' },
      { name: 'ratio', type: 'double' }, { name: 'tags', type: 'array<string>' }, { name: 'tier', type: 'long' },
    ]);
    expect(users.count()).toBe(60);
    expect(users.filter(col('id').eq('u07')).select('big', 'profile.city', 'ratio', 'tags', 'tier').collect()).toEqual([[9007199254740993n, 'Lyon', 0.5, ['a', 'b'], 1]]);
    expect(users.groupBy('tier').agg(count('*').as('n')).orderBy('tier').collect()).toEqual([[0, 20], [1, 20], [2, 20]]);
  });

  it('a stream-static join with the table', async () => {
    const users = (await session.read.schema('id string, tier int').dynamodb(table));
    const { stream, df } = session.memoryStream('user string, amount long');
    const perTier = df.join(users, col('user').eq(col('id'))).groupBy(col('tier')).agg(sum('amount').as('total'));
    await testStream(perTier, 'update')(
      addData(stream, ['u00', 5], ['u01', 7], ['u03', 1], ['nobody', 100]), checkNewAnswer([0, 6], [1, 7]),
    );
  });
});

describe('the scan follows pages', () => {
  it('more than 1 MB of items takes more than one Scan request, and every item is read', async () => {
    let scans = 0;
    clients.dynamodb.middlewareStack.add((next, context) => async (args) => {
      if (context.commandName === 'ScanCommand') scans++;
      return next(args);
    }, { step: 'initialize', name: 'countScans' });
    try {
      const items = await awsStaticStorage(clients).scanTable(table);
      expect(items).toHaveLength(60);
      expect(new Set(items.map((i) => i.id)).size).toBe(60);
      expect(scans).toBeGreaterThan(1);
    } finally {
      clients.dynamodb.middlewareStack.remove('countScans');
    }
  });
});
