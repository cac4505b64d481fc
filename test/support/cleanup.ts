/**
 * Deletes the streams, tables and buckets an integration test created. The embedded emulators
 * vanish with the test file, but a LocalStack outlives it and is shared by every file of the run:
 * what is left there counts against its shard limit and slows every List call.
 */
import { DeleteTableCommand, ResourceNotFoundException, paginateListTables } from '@aws-sdk/client-dynamodb';
import { DeleteStreamCommand, paginateListStreams } from '@aws-sdk/client-kinesis';
import { DeleteBucketCommand, DeleteObjectsCommand, ListBucketsCommand, paginateListObjectsV2 } from '@aws-sdk/client-s3';
import type { AwsClients } from '../../lib/aws/clients.js';

export interface CreatedResources {
  readonly streams?: readonly string[];
  readonly tables?: readonly string[];
  readonly buckets?: readonly string[];
}

/** Deletes the named resources; one already gone is not an error. */
export async function deleteResources(clients: AwsClients, created: CreatedResources): Promise<void> {
  await Promise.all([
    ...(created.streams ?? []).map((name) => deleteStream(clients, name)),
    ...(created.tables ?? []).map((name) => deleteTable(clients, name)),
    ...(created.buckets ?? []).map((name) => deleteBucket(clients, name)),
  ]);
}

/**
 * Deletes every stream, table or bucket (`kind`) whose name starts with `prefix` (names made from
 * a counter). One kind: a test file starts only the emulators it needs, and the others have no endpoint.
 */
export async function deleteResourcesNamed(clients: AwsClients, kind: 'streams' | 'tables' | 'buckets', prefix: string): Promise<void> {
  const names: string[] = [];
  if (kind === 'streams') {
    for await (const page of paginateListStreams({ client: clients.kinesis }, {})) names.push(...(page.StreamNames ?? []));
  } else if (kind === 'tables') {
    for await (const page of paginateListTables({ client: clients.dynamodb }, {})) names.push(...(page.TableNames ?? []));
  } else {
    const { Buckets } = await clients.s3.send(new ListBucketsCommand({}));
    names.push(...(Buckets ?? []).map((b) => b.Name!));
  }
  await deleteResources(clients, { [kind]: names.filter((n) => n.startsWith(prefix)) });
}

async function deleteStream(clients: AwsClients, name: string): Promise<void> {
  try {
    await clients.kinesis.send(new DeleteStreamCommand({ StreamName: name, EnforceConsumerDeletion: true }));
  } catch (error) {
    if ((error as Error).name !== 'ResourceNotFoundException') throw error;
  }
}

async function deleteTable(clients: AwsClients, name: string): Promise<void> {
  try {
    await clients.dynamodb.send(new DeleteTableCommand({ TableName: name }));
  } catch (error) {
    if (!(error instanceof ResourceNotFoundException)) throw error;
  }
}

/** S3 deletes only empty buckets: the objects go first. */
async function deleteBucket(clients: AwsClients, name: string): Promise<void> {
  try {
    for await (const page of paginateListObjectsV2({ client: clients.s3 }, { Bucket: name })) {
      const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
      if (keys.length > 0) await clients.s3.send(new DeleteObjectsCommand({ Bucket: name, Delete: { Objects: keys, Quiet: true } }));
    }
    await clients.s3.send(new DeleteBucketCommand({ Bucket: name }));
  } catch (error) {
    if ((error as Error).name !== 'NoSuchBucket') throw error;
  }
}
