/**
 * `session.read` on AWS: S3 objects (`s3://bucket/key` or every object under `s3://bucket/prefix/`)
 * and DynamoDB tables (a paginated, strongly consistent Scan), behind the engine's StaticStorage.
 */
import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { CostMeter } from '../core/cost-meter.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import { isHiddenPath, type StaticStorage, type StoredObject } from '../sources/static-storage.js';
import { getObjectBytes, listObjects, mapWithConcurrency, normalizePrefix } from './s3-util.js';
import { dynamoDbNumber } from './sink-readers.js';

export function awsStaticStorage(clients: { readonly s3: S3Client; readonly dynamodb: DynamoDBClient }, meter?: CostMeter): StaticStorage {
  return {
    readObjects: (location) => readS3Objects(clients.s3, location, meter),
    scanTable: (table) => scanTable(clients.dynamodb, table, meter),
  };
}

function parseS3Url(url: string): { bucket: string; key: string } {
  const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(url);
  if (!match) {
    throw new IllegalArgumentError(`Not an S3 location: ${url}.`, { code: 'INVALID_S3_URL', hint: 'write it as s3://bucket/prefix.' });
  }
  return { bucket: match[1]!, key: match[2]! };
}

/** The object named exactly, else every object under the prefix (as a folder), hidden ones left out. */
async function readS3Objects(s3: S3Client, location: string, meter?: CostMeter): Promise<StoredObject[]> {
  const { bucket, key } = parseS3Url(location);
  if (key !== '' && !key.endsWith('/')) {
    const bytes = await getObjectBytes(s3, bucket, key, meter);
    if (bytes !== undefined) return [{ key: `s3://${bucket}/${key}`, bytes }];
  }
  const prefix = normalizePrefix(key);
  const listed = (await listObjects(s3, bucket, prefix, meter))
    .filter((o) => !o.key.endsWith('/') && !isHiddenPath(o.key.slice(prefix.length)))
    .sort((a, b) => (a.key < b.key ? -1 : 1));
  return mapWithConcurrency(listed, 8, async (o) => ({ key: `s3://${bucket}/${o.key}`, bytes: (await getObjectBytes(s3, bucket, o.key, meter)) ?? new Uint8Array() }));
}

async function scanTable(dynamodb: DynamoDBClient, table: string, meter?: CostMeter): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await dynamodb.send(new ScanCommand({ TableName: table, ConsistentRead: true, ExclusiveStartKey: start, ReturnConsumedCapacity: 'TOTAL' }));
    meter?.add('dynamoDbReadUnits', page.ConsumedCapacity?.CapacityUnits ?? 0);
    for (const item of page.Items ?? []) items.push(plain(unmarshall(item, { wrapNumbers: dynamoDbNumber })) as Record<string, unknown>);
    start = page.LastEvaluatedKey;
  } while (start);
  return items;
}

/** DynamoDB sets (SS, NS) as arrays in a stable order; the rest as unmarshalled. */
function plain(v: unknown): unknown {
  if (v instanceof Set) return [...v].map(plain).sort((a, b) => (String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0));
  if (Array.isArray(v)) return v.map(plain);
  if (v !== null && typeof v === 'object' && !(v instanceof Uint8Array)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}
