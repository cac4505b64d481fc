/**
 * Helpers the S3 and DynamoDB sink adapters share: key formatting, metered S3 calls (every request
 * is counted on the optional CostMeter as it is made), bounded concurrency, and turning AWS SDK
 * errors into SluiceErrors whose `retryable` flag tells the runtime whether to retry the batch.
 */
import type { S3Client } from '@aws-sdk/client-s3';
import { IllegalArgumentError, StreamingQueryError } from '../errors/sluice-error.js';
import type { CostMeter } from '../core/cost-meter.js';
import { absentWhenDenied } from './s3-absent-when-denied.js';
import { s3Sdk } from './s3-sdk.js';

/** Batch ids in keys are zero-padded to this width so S3's lexicographic listing is batch order. */
export const BATCH_ID_WIDTH = 12;

/** `''` stays `''`; any other prefix gets a trailing `/` so `${prefix}data/...` is a folder. */
export function normalizePrefix(prefix: string): string {
  if (prefix === '' || prefix.endsWith('/')) return prefix;
  return `${prefix}/`;
}

export function padBatchId(batchId: number): string {
  if (!Number.isSafeInteger(batchId) || batchId < 0) {
    throw new IllegalArgumentError(`Batch id must be a non-negative integer, got ${batchId}`, { code: 'INVALID_BATCH_ID' });
  }
  return String(batchId).padStart(BATCH_ID_WIDTH, '0');
}

/**
 * A partition id as one key segment. Kinesis shard ids (`shardId-000000000000`) pass unchanged;
 * anything that is not URL-safe (`/`, spaces, ...) is percent-encoded so it cannot add a folder.
 */
export function encodeKeySegment(segment: string): string {
  if (segment === '' || segment === '.' || segment === '..') {
    throw new IllegalArgumentError(`'${segment}' cannot be used as an S3 key segment`, { code: 'INVALID_KEY_SEGMENT' });
  }
  return encodeURIComponent(segment);
}

export function decodeKeySegment(segment: string): string {
  return decodeURIComponent(segment);
}

export async function putObject(
  client: S3Client, bucket: string, key: string, body: string, contentType: string, meter?: CostMeter, metadata?: Record<string, string>,
): Promise<void> {
  meter?.add('s3Puts', 1);
  const bytes = Buffer.from(body, 'utf-8');
  await client.send(new (await s3Sdk()).PutObjectCommand({
    Bucket: bucket, Key: key, Body: bytes, ContentLength: bytes.byteLength, ContentType: contentType, ...(metadata ? { Metadata: metadata } : {}),
  }));
}

export async function putObjectBytes(
  client: S3Client, bucket: string, key: string, body: Uint8Array, contentType: string, meter?: CostMeter,
): Promise<void> {
  meter?.add('s3Puts', 1);
  await client.send(new (await s3Sdk()).PutObjectCommand({
    Bucket: bucket, Key: key, Body: body, ContentLength: body.byteLength, ContentType: contentType,
  }));
}

/** URL-encoded as S3 requires; `/` and `=` kept (s3rver decodes with decodeURI, which leaves `%3D`). */
function copySourceOf(bucket: string, key: string): string {
  return `${bucket}/${encodeURIComponent(key).replace(/%2F/g, '/').replace(/%3D/g, '=')}`;
}

/**
 * Copies `from` to `to` in one bucket (S3 makes `to` appear whole, never partly). False when `from`
 * does not exist. COPY is priced as a PUT, so it is counted as one.
 */
export async function copyObject(client: S3Client, bucket: string, from: string, to: string, meter?: CostMeter): Promise<boolean> {
  meter?.add('s3Puts', 1);
  try {
    await client.send(new (await s3Sdk()).CopyObjectCommand({ Bucket: bucket, Key: to, CopySource: copySourceOf(bucket, from) }));
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  }
}

/** The object's bytes, or undefined when it does not exist. */
export async function getObjectBytes(
  client: S3Client, bucket: string, key: string, meter?: CostMeter,
): Promise<Uint8Array | undefined> {
  meter?.add('s3Gets', 1);
  try {
    const response = await client.send(new (await s3Sdk()).GetObjectCommand({ Bucket: bucket, Key: key }));
    return (await response.Body?.transformToByteArray()) ?? new Uint8Array();
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

/** A missing key (GET: NoSuchKey; HEAD has no body, so NotFound). A missing bucket is not this. */
function isNotFound(error: unknown): boolean {
  const name = (error as { name?: string })?.name;
  return name === 'NoSuchKey' || name === 'NotFound';
}

/** The object's text, or undefined when it does not exist. */
export async function getObjectText(
  client: S3Client, bucket: string, key: string, meter?: CostMeter,
): Promise<string | undefined> {
  meter?.add('s3Gets', 1);
  try {
    const response = await client.send(new (await s3Sdk()).GetObjectCommand({ Bucket: bucket, Key: key }));
    return (await response.Body?.transformToString('utf-8')) ?? '';
  } catch (error) {
    if (isNotFound(error) || await absentWhenDenied(client, bucket, key, error)) return undefined;
    throw error;
  }
}

/** An object's user metadata (`x-amz-meta-*`, names lower-case), or undefined when it does not exist; one counted HEAD. */
export async function objectMetadata(client: S3Client, bucket: string, key: string, meter?: CostMeter): Promise<Record<string, string> | undefined> {
  meter?.add('s3Gets', 1);
  try {
    return (await client.send(new (await s3Sdk()).HeadObjectCommand({ Bucket: bucket, Key: key }))).Metadata ?? {};
  } catch (error) {
    if (isNotFound(error) || await absentWhenDenied(client, bucket, key, error)) return undefined;
    throw error;
  }
}

/** HEAD is priced as a GET request, so it is counted as one. */
export async function objectExists(client: S3Client, bucket: string, key: string, meter?: CostMeter): Promise<boolean> {
  meter?.add('s3Gets', 1);
  try {
    await client.send(new (await s3Sdk()).HeadObjectCommand({ Bucket: bucket, Key: key }));
    return true;
  } catch (error) {
    if (isNotFound(error) || await absentWhenDenied(client, bucket, key, error)) return false;
    throw error;
  }
}

/** When the object was last written, or undefined when it does not exist (one HEAD, priced as a GET). */
export async function objectLastModified(client: S3Client, bucket: string, key: string, meter?: CostMeter): Promise<Date | undefined> {
  meter?.add('s3Gets', 1);
  try {
    const head = await client.send(new (await s3Sdk()).HeadObjectCommand({ Bucket: bucket, Key: key }));
    return head.LastModified ?? new Date(0);
  } catch (error) {
    if (isNotFound(error) || await absentWhenDenied(client, bucket, key, error)) return undefined;
    throw error;
  }
}

export interface ListedObject {
  readonly key: string;
  readonly bytes: number;
  readonly lastModified: Date;
}

/** Every object under `prefix` with its size and time, in S3's order; one counted LIST per page. */
export async function listObjects(client: S3Client, bucket: string, prefix: string, meter?: CostMeter): Promise<ListedObject[]> {
  const objects: ListedObject[] = [];
  let token: string | undefined;
  do {
    meter?.add('s3Lists', 1);
    const page = await client.send(new (await s3Sdk()).ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of page.Contents ?? []) {
      if (o.Key !== undefined) objects.push({ key: o.Key, bytes: o.Size ?? 0, lastModified: o.LastModified ?? new Date(0) });
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return objects;
}

/** Every key under `prefix`, in S3's (lexicographic) order; one counted LIST per page. */
export async function listKeys(client: S3Client, bucket: string, prefix: string, meter?: CostMeter): Promise<string[]> {
  const keys: string[] = [];
  let token: string | undefined;
  do {
    meter?.add('s3Lists', 1);
    const page = await client.send(new (await s3Sdk()).ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of page.Contents ?? []) if (o.Key !== undefined) keys.push(o.Key);
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return keys;
}

/**
 * Deletes keys, 1000 per request. S3 does not charge for DELETE requests, so nothing is metered.
 * A key that is already gone is not an error (S3 reports deletes of missing keys as deleted).
 */
export async function deleteKeys(client: S3Client, bucket: string, keys: readonly string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += 1000) {
    const chunk = keys.slice(i, i + 1000);
    const response = await client.send(new (await s3Sdk()).DeleteObjectsCommand({
      Bucket: bucket,
      Delete: { Objects: chunk.map((Key) => ({ Key })), Quiet: true },
    }));
    const failed = response.Errors ?? [];
    if (failed.length > 0) {
      const first = failed[0]!;
      throw new Error(`Could not delete ${failed.length} object(s) from s3://${bucket}, e.g. ${first.Key}: ${first.Code} ${first.Message ?? ''}`);
    }
  }
}

/**
 * Runs `fn` over `items` with at most `limit` calls in flight; results keep the input order. On the
 * first failure no new calls start; the ones in flight are awaited and then the failure is thrown.
 */
export async function mapWithConcurrency<T, R>(
  items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const index = next++;
      try {
        results[index] = await fn(items[index]!, index);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  if (failure) throw failure.error;
  return results;
}

const THROTTLING_NAMES = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'Throttling',
  'ThrottledException',
  'RequestLimitExceeded',
  'TooManyRequestsException',
  'SlowDown',
  'RequestThrottled',
  'RequestThrottledException',
  'TransactionInProgressException',
]);

const TRANSIENT_NAMES = new Set([
  'InternalServerError',
  'InternalError',
  'ServiceUnavailable',
  'RequestTimeout',
  'RequestTimeoutException',
  'TimeoutError',
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
]);

const CONFIGURATION_NAMES = new Set([
  'ResourceNotFoundException',
  'NoSuchBucket',
  'AccessDenied',
  'AccessDeniedException',
  'UnrecognizedClientException',
  'InvalidAccessKeyId',
]);

/**
 * An AWS SDK failure as a SluiceError. Throttling and transient failures (5xx, timeouts, dropped
 * connections) are `retryable: true` so the runtime retries the whole batch, which every sink makes
 * safe; missing tables/buckets and denied access are not, and say what to check. The SDK error is
 * kept as `cause`; its name is in `context.awsErrorName`. SluiceErrors pass through unchanged.
 */
export function toSinkError(error: unknown, sink: string, action: string): Error {
  if (error instanceof StreamingQueryError || error instanceof IllegalArgumentError) return error;
  const e = error as {
    name?: string; code?: string; message?: string;
    $metadata?: { httpStatusCode?: number }; $retryable?: { throttling?: boolean };
  };
  const name = e?.name ?? 'Error';
  const status = e?.$metadata?.httpStatusCode;
  const detail = `${name}: ${e?.message ?? String(error)}`;
  const context = { sink, action, awsErrorName: name, ...(status !== undefined ? { httpStatusCode: status } : {}) };
  if (THROTTLING_NAMES.has(name) || e?.$retryable?.throttling === true || status === 429) {
    return new StreamingQueryError(`${sink}: ${action} was throttled (${detail})`, {
      code: 'SINK_THROTTLED', retryable: true, cause: error, context,
      hint: 'the batch is retried; if this persists raise the table\'s capacity (or use on-demand) or lower the write concurrency.',
    });
  }
  if (CONFIGURATION_NAMES.has(name) || status === 403) {
    return new StreamingQueryError(`${sink}: ${action} failed (${detail})`, {
      code: 'SINK_NOT_AVAILABLE', retryable: false, cause: error, context,
      hint: 'check that the table or bucket exists in this region and that the function\'s role may write to it.',
    });
  }
  const transient = TRANSIENT_NAMES.has(name) || (e?.code !== undefined && TRANSIENT_NAMES.has(e.code))
    || (status !== undefined && status >= 500) || e?.$retryable !== undefined;
  return new StreamingQueryError(`${sink}: ${action} failed (${detail})`, {
    code: 'SINK_WRITE_FAILED', retryable: transient, cause: error, context,
  });
}
