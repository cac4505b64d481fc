/**
 * Issue 11 part 4 on DynamoDB Local: a long beyond 2^53 reaches the DynamoDB sink as an exact
 * number (DynamoDB numbers hold 38 digits), as a key part and as an attribute, and round-trips
 * through the DynamoDB state store exactly; `scanDynamoDbSink` reads them back exactly.
 */
import { CreateTableCommand, GetItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbUpsertSink } from '../../lib/aws/dynamodb-upsert-sink.js';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import type { StructField } from '../../lib/plan/data-types.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';

let emulators: EmulatorSet;
let clients: AwsClients;
let ddb: DynamoDBClient;

beforeAll(async () => {
  emulators = await startEmulators({ kinesis: false, s3: false });
  clients = createAwsClients(emulators.clientOptions);
  ddb = clients.dynamodb;
});

afterAll(async () => {
  clients?.destroy();
  await emulators?.stop();
});

const schema: StructField[] = [{ name: 'account', type: 'long' }, { name: 'total', type: 'long' }, { name: 'n', type: 'long' }];

describe('DynamoDbUpsertSink with longs beyond 2^53', () => {
  it('writes them exactly, as key parts and as number attributes', async () => {
    const tableName = `exact-longs-${process.pid}`;
    await ddb.send(new CreateTableCommand({
      TableName: tableName, AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }], BillingMode: 'PAY_PER_REQUEST',
    }));
    const sink = new DynamoDbUpsertSink({ client: ddb, tableName, keyColumns: ['account'] });
    await sink.addBatch({
      partitionId: 's', batchId: 0, outputMode: 'update', schema, columns: schema.map((f) => f.name),
      rows: [[9007199254740993n, -9223372036854775808n, 3], [1, 9223372036854775807n, 1]],
    });
    const item = async (pk: string) => (await ddb.send(new GetItemCommand({ TableName: tableName, Key: { pk: { S: pk } }, ConsistentRead: true }))).Item;
    expect((await item('account=9007199254740993'))?.total).toEqual({ N: '-9223372036854775808' });
    expect((await item('account=1'))?.total).toEqual({ N: '9223372036854775807' });
    // The reader gives them back exactly (it read numbers with Number(): 9007199254740993 came back ...992).
    expect(await scanDynamoDbSink(ddb, tableName)).toEqual([
      { account: 1, total: 9223372036854775807n, n: 1 },
      { account: 9007199254740993n, total: -9223372036854775808n, n: 3 },
    ]);
  });
});
