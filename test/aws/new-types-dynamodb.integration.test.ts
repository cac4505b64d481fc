/**
 * Date, decimal, binary and map values on DynamoDB Local: the upsert sink writes a decimal as an
 * exact number (38 digits), as a key part and as an attribute; the state store gives every new
 * type back as it was (through a delta and through a snapshot).
 */
import { randomUUID } from 'node:crypto';
import { CreateTableCommand, GetItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbUpsertSink } from '../../lib/aws/dynamodb-upsert-sink.js';
import { DynamoDbStateStoreProvider, StateCache } from '../../lib/aws/dynamodb-state-store.js';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { ensureTables } from '../../lib/aws/tables.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { toSchema } from '../../lib/api/schema.js';
import { daysFromCivil } from '../../lib/core/dates.js';
import { Decimal, parseDecimal } from '../../lib/core/decimal.js';
import { deleteResources } from '../support/cleanup.js';

let emulators: EmulatorSet;
let clients: AwsClients;
let ddb: DynamoDBClient;
const STATE_TABLE = `sluice-new-types-state-${process.pid}`;

beforeAll(async () => {
  emulators = await startEmulators({ kinesis: false, s3: false });
  clients = createAwsClients(emulators.clientOptions);
  ddb = clients.dynamodb;
  await ensureTables(ddb, { checkpointTable: `${STATE_TABLE}-cp`, stateTable: STATE_TABLE });
});

afterAll(async () => {
  if (clients) await deleteResources(clients, { tables: [`${STATE_TABLE}-cp`, STATE_TABLE] });
  clients?.destroy();
  await emulators?.stop();
});

const schema = toSchema('day date, price decimal(38,10), bin binary, tags map<string,int>');
const price = parseDecimal('12345678901234567890123456.0123456789')!;
const row = [daysFromCivil(2024, 1, 2), price, new Uint8Array([0x68, 0x69]), new Map([['a', 1], ['b', null]])];

describe('the new types on DynamoDB Local', () => {
  it('the upsert sink writes a 38-digit decimal exactly, as a key part and as a number attribute', async () => {
    const tableName = `new-types-sink-${process.pid}`;
    await ddb.send(new CreateTableCommand({
      TableName: tableName, AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }], BillingMode: 'PAY_PER_REQUEST',
    }));
    const sink = new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['day', 'price'] });
    await sink.addBatch({ partitionId: 's', batchId: 0, outputMode: 'update', schema, columns: schema.map((f) => f.name), rows: [row] });
    const pk = 'day=2024-01-02|price=12345678901234567890123456.0123456789';
    const item = (await ddb.send(new GetItemCommand({ TableName: tableName, Key: { pk: { S: pk } }, ConsistentRead: true }))).Item;
    expect(item?.price).toEqual({ N: '12345678901234567890123456.0123456789' });
    expect(item?.day).toEqual({ S: '2024-01-02' });
    expect(item?.bin).toEqual({ S: 'aGk=' });
    expect(item?.tags).toEqual({ M: { a: { N: '1' }, b: { NULL: true } } });
  });

  it('the state store gives decimals, binary and maps back as they were, through deltas and a snapshot', async () => {
    const queryName = `q-${randomUUID().slice(0, 8)}`;
    const provider = new DynamoDbStateStoreProvider({ client: ddb, table: STATE_TABLE, queryName, partitionId: 'shard-0', cache: new StateCache(), snapshotEvery: 2 });
    const id = { operatorId: 0, storeName: 'default' };
    for (let v = 0; v < 3; v++) {
      const store = await provider.open<unknown[]>(id, v);
      store.put(`k${v}`, [...row, new Decimal(BigInt(v), 2)]);
      expect(await store.commit()).toBe(v + 1);
    }
    // A fresh provider (no cache) reads what DynamoDB holds.
    const reader = new DynamoDbStateStoreProvider({ client: ddb, table: STATE_TABLE, queryName, partitionId: 'shard-0' });
    const store = await reader.open<unknown[]>(id, 3);
    const back = store.get('k2')!;
    expect(back).toEqual([...row, new Decimal(2n, 2)]);
    expect(back[1]).toBeInstanceOf(Decimal);
    expect(String(back[1])).toBe('12345678901234567890123456.0123456789');
    expect(back[2]).toBeInstanceOf(Uint8Array);
    expect(back[3]).toBeInstanceOf(Map);
  });
});
