/**
 * What `sluice dev` and the chaos harness share: the names of one local deployment (stream,
 * tables, buckets, prefixes), its RuntimeConfig, creating it on the emulators, putting records,
 * quiet observability, and reading back what the sink committed.
 */
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { QueryDefinition } from '../../query/query-definition.js';
import type { AwsClients } from '../../aws/clients.js';
import type { Observability } from '../../aws/observability.js';
import { sinkPrefixOf } from '../../aws/aws-backends.js';
import { readDeadLetters } from '../../aws/s3-dead-letter-writer.js';
import { readS3Files, readS3Snapshots, scanDynamoDbSink } from '../../aws/sink-readers.js';
import { ensureTables } from '../../aws/tables.js';
import { DEPLOYMENT_DEFAULTS, type RuntimeConfig } from '../../runtime/runtime-config.js';
import type { DeadLetterRecord } from '../../sources/dead-letter.js';
import { createStreamAndWait, putRecordsBatched, type PutRecordInput, type PutRecordResult } from '../kinesis-admin.js';

export interface LocalDeployment {
  readonly streamName: string;
  readonly checkpointTable: string;
  readonly stateTable: string;
  readonly sinkTable: string;
  readonly sinkBucket: string;
  readonly deadLetterBucket: string;
  /** '' = the definition's declared prefix (or `${name}/`). */
  readonly sinkPrefix: string;
  readonly deadLetterPrefix: string;
}

/** Names for one deployment; `tag` keeps several apart on one set of emulators. */
export function localDeployment(tag: string, options: { sinkPrefix?: string; deadLetterPrefix?: string } = {}): LocalDeployment {
  const safe = tag.toLowerCase().replace(/[^a-z0-9-]/g, '-').replace(/-+/g, '-').replace(/^-|-$/g, '').slice(0, 40) || 'dev';
  return {
    streamName: `sluice-${safe}`,
    checkpointTable: `sluice-${safe}-checkpoints`,
    stateTable: `sluice-${safe}-state`,
    sinkTable: `sluice-${safe}-sink`,
    sinkBucket: `sluice-${safe}-sink`.slice(0, 63),
    deadLetterBucket: `sluice-${safe}-dead-letters`.slice(0, 63),
    sinkPrefix: options.sinkPrefix ?? '',
    deadLetterPrefix: options.deadLetterPrefix ?? DEPLOYMENT_DEFAULTS.deadLetterPrefix,
  };
}

export interface LocalConfigOptions {
  readonly shards?: number;
  /** Default 0: the scheduled handler marks a caught-up shard idle at once (local runs are short). */
  readonly idleShardTimeoutMs?: number;
  readonly snapshotEveryBatches?: number;
}

export function localRuntimeConfig(d: LocalDeployment, options: LocalConfigOptions = {}): RuntimeConfig {
  return {
    checkpointTable: d.checkpointTable,
    stateTable: d.stateTable,
    sinkBucket: d.sinkBucket,
    sinkPrefix: d.sinkPrefix,
    sinkTable: d.sinkTable,
    deadLetterBucket: d.deadLetterBucket,
    deadLetterPrefix: d.deadLetterPrefix,
    streamName: d.streamName,
    idleShardTimeoutMs: options.idleShardTimeoutMs ?? 0,
    expectedShardCount: options.shards,
    snapshotEveryBatches: options.snapshotEveryBatches ?? DEPLOYMENT_DEFAULTS.snapshotEveryBatches,
  };
}

export async function ensureBucket(s3: S3Client, bucket: string): Promise<void> {
  try {
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  } catch (error) {
    const name = (error as { name?: string }).name;
    if (name !== 'BucketAlreadyOwnedByYou' && name !== 'BucketAlreadyExists') throw error;
  }
}

/** Creates the stream (waits until ACTIVE), the tables and the buckets; what exists is kept. */
export async function provisionLocal(clients: AwsClients, d: LocalDeployment, shards: number): Promise<void> {
  await Promise.all([
    createStreamAndWait(clients.kinesis, d.streamName, shards),
    ensureTables(clients.dynamodb, { checkpointTable: d.checkpointTable, stateTable: d.stateTable, sinkTable: d.sinkTable, maxWaitSeconds: 60 }),
    ensureBucket(clients.s3, d.sinkBucket),
    ensureBucket(clients.s3, d.deadLetterBucket),
  ]);
}

/** Puts records in order (one PutRecords call per 500); returns each record's shard and sequence number. */
export async function putSampleRecords(
  clients: AwsClients, streamName: string, records: readonly Pick<PutRecordInput, 'data' | 'partitionKey'>[],
): Promise<PutRecordResult[]> {
  if (records.length === 0) return [];
  return putRecordsBatched(clients.kinesis, streamName, records.map((r) => ({ data: r.data, partitionKey: r.partitionKey })));
}

/**
 * Powertools logger and metrics turned off (`sluice dev` prints its own view). `onError` still
 * hears the handlers' error logs (e.g. an invocation that failed before running a batch).
 */
export function quietObservability(queryName: string, onError?: (message: string, error: unknown) => void): Observability {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  const logger = new Logger({ serviceName: 'sluice-dev', logLevel: 'SILENT', persistentKeys: { query: queryName } });
  if (onError) {
    const original = logger.error.bind(logger);
    logger.error = (input, ...extra) => {
      const fields = Object.assign({}, ...extra.filter((e) => e && typeof e === 'object')) as { error?: unknown; shardId?: string };
      onError(`${fields.shardId ? `[${fields.shardId}] ` : ''}${typeof input === 'string' ? input : JSON.stringify(input)}`, fields.error);
      original(input, ...extra);
    };
  }
  // Its warnings (e.g. "no application metrics to publish") go to the silent logger too.
  const metrics = new Metrics({ namespace: 'SluiceDev', serviceName: 'sluice-dev', logger });
  return { logger, metrics };
}

export type SinkContents =
  | { readonly kind: 's3-files'; readonly location: string; readonly rows: Record<string, unknown>[] }
  | { readonly kind: 's3-snapshot'; readonly location: string; readonly rows: Record<string, unknown>[] }
  | { readonly kind: 'dynamodb'; readonly location: string; readonly rows: Record<string, unknown>[] };

/** What the query's sink committed, read the way a consumer reads it. */
export async function readSinkContents(clients: AwsClients, definition: QueryDefinition, config: RuntimeConfig): Promise<SinkContents> {
  const kind = definition.sink.kind;
  if (kind === 'dynamodb') {
    return { kind, location: `dynamodb://${config.sinkTable}`, rows: await scanDynamoDbSink(clients.dynamodb, config.sinkTable!, { s3: clients.s3 }) };
  }
  const prefix = sinkPrefixOf(definition, config);
  const location = `s3://${config.sinkBucket}/${prefix}`;
  if (kind === 's3-files') return { kind, location, rows: await readS3Files(clients.s3, config.sinkBucket!, prefix) };
  return { kind, location, rows: await readS3Snapshots(clients.s3, config.sinkBucket!, prefix) };
}

export async function readDeadLetterContents(clients: AwsClients, config: RuntimeConfig): Promise<DeadLetterRecord[]> {
  return readDeadLetters(clients.s3, config.deadLetterBucket, config.deadLetterPrefix);
}
