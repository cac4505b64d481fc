/**
 * Reading what the AWS sinks committed, the way a downstream consumer must: through the manifest
 * (S3FilesSink), through each partition's current object (S3SnapshotSink), or by a consistent scan (DynamoDbUpsertSink).
 * `sluice dev --out`, the integration tests and run-to-run comparisons use these.
 */
import { ScanCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { CostMeter } from '../core/cost-meter.js';
import { DYNAMODB_SINK_RESERVED } from './dynamodb-upsert-sink.js';
import { S3_FILES_METADATA_DIR, type S3FilesManifestEntry, type S3FilesManifestFile } from './s3-files-sink.js';
import { S3_CURRENT_DIR, S3_LATEST_DIR, currentSnapshotHeader, parseSnapshotPointer } from './s3-snapshot-sink.js';
import { decodeKeySegment, getObjectBytes, getObjectText, listKeys, mapWithConcurrency, normalizePrefix } from './s3-util.js';
import { parquetRowsAsJson } from './parquet-reader.js';
import { readCompactionLog } from './s3-compaction.js';
import { resolveSpilledAttributes } from './dynamodb-spill.js';
import { s3Sdk } from './s3-sdk.js';
import { parseJsonWithLongs, parseLongDigits } from '../core/long.js';

export interface ReaderOptions {
  readonly meter?: CostMeter;
  /** GETs in flight at once (default 16). */
  readonly concurrency?: number;
  /** Finds files that compaction merged (see lib/aws/s3-compaction.ts). */
  readonly compacted?: CompactedLookup;
}

export interface CommittedBatch {
  readonly partitionId: string;
  readonly batchId: number;
  readonly rows: Record<string, unknown>[];
}

function parseJsonLines(text: string, key: string): Record<string, unknown>[] {
  const rows: Record<string, unknown>[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line === '') continue;
    try {
      // A long beyond 2^53 is written as bare digits (as Spark writes it): read it exactly.
      rows.push(parseJsonWithLongs(line) as Record<string, unknown>);
    } catch (error) {
      throw new Error(`s3 object ${key} line ${i + 1} is not JSON: ${(error as Error).message}`);
    }
  }
  return rows;
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * A file a manifest entry names: at its visible key, else still staged (its batch has not been
 * revealed yet), else inside a compacted file (`compacted` maps the small file's key to the rows
 * it became). Undefined when none holds it.
 */
async function readManifestFile(
  client: S3Client, bucket: string, file: S3FilesManifestFile, format: string, options: ReaderOptions, compacted?: CompactedLookup,
): Promise<Record<string, unknown>[] | undefined> {
  let rows: Record<string, unknown>[] | undefined;
  for (const key of [file.key, file.stagedKey]) {
    if (key === undefined) continue;
    const bytes = await getObjectBytes(client, bucket, key, options.meter);
    if (bytes === undefined) continue;
    rows = format === 'parquet' ? await parquetRowsAsJson(bytes) : parseJsonLines(Buffer.from(bytes).toString('utf-8'), key);
    break;
  }
  rows ??= await compacted?.(file.key);
  if (rows === undefined) return undefined;
  if (rows.length !== file.rows) throw new Error(`${file.key} has ${rows.length} rows; its manifest entry says ${file.rows}`);
  return file.partition ? rows.map((r) => ({ ...r, ...file.partition })) : rows;
}

/** The rows a compacted file holds for one small file it replaced, or undefined. */
export type CompactedLookup = (smallFileKey: string) => Promise<Record<string, unknown>[] | undefined>;

/** Follows the compaction log (read once, on the first file not found where the manifest says). */
function compactedFilesOf(client: S3Client, bucket: string, prefix: string, options: ReaderOptions): CompactedLookup {
  let log: ReturnType<typeof readCompactionLog> | undefined;
  const outputs = new Map<string, Promise<Record<string, unknown>[]>>();
  return async (key) => {
    log ??= readCompactionLog(client, bucket, prefix, options.meter);
    const place = (await log).get(key);
    if (!place) return undefined;
    let rows = outputs.get(place.output);
    if (!rows) {
      rows = getObjectBytes(client, bucket, place.output, options.meter).then((bytes) => {
        if (bytes === undefined) throw new Error(`compacted file ${place.output} does not exist`);
        return place.output.endsWith('.parquet') ? parquetRowsAsJson(bytes) : parseJsonLines(Buffer.from(bytes).toString('utf-8'), place.output);
      });
      outputs.set(place.output, rows);
    }
    return (await rows).slice(place.offset, place.offset + place.rows);
  };
}

/**
 * Every committed S3FilesSink batch, ordered by partition id then batch id. Only batches with a
 * manifest entry are read; data objects without one (a write that crashed before committing) are
 * ignored. A manifest entry naming a missing or differently sized file is an error.
 */
export async function readS3FileBatches(
  client: S3Client, bucket: string, prefix: string, options: ReaderOptions = {},
): Promise<CommittedBatch[]> {
  const base = `${normalizePrefix(prefix)}${S3_FILES_METADATA_DIR}`;
  const entries: { partitionId: string; batchId: number; key: string }[] = [];
  for (const key of await listKeys(client, bucket, base, options.meter)) {
    const match = /^partition=([^/]+)\/(\d+)\.json$/.exec(key.slice(base.length));
    if (match) entries.push({ partitionId: decodeKeySegment(match[1]!), batchId: Number(match[2]), key });
  }
  entries.sort((a, b) => compareStrings(a.partitionId, b.partitionId) || a.batchId - b.batchId);
  const concurrency = options.concurrency ?? 16;
  const compacted = options.compacted ?? compactedFilesOf(client, bucket, prefix, options);
  return mapWithConcurrency(entries, concurrency, async ({ partitionId, batchId, key }) => {
    const text = await getObjectText(client, bucket, key, options.meter);
    if (text === undefined) throw new Error(`manifest entry ${key} disappeared while reading`);
    const entry = JSON.parse(text) as S3FilesManifestEntry;
    const rows: Record<string, unknown>[] = [];
    for (const file of entry.files) {
      const fileRows = await readManifestFile(client, bucket, file, entry.format ?? 'jsonl', options, compacted);
      if (fileRows === undefined) throw new Error(`manifest entry ${key} names ${file.key}, which does not exist`);
      rows.push(...fileRows);
    }
    return { partitionId, batchId, rows };
  });
}

/** The rows of every committed S3FilesSink batch, in manifest order (partition, then batch). */
export async function readS3Files(
  client: S3Client, bucket: string, prefix: string, options: ReaderOptions = {},
): Promise<Record<string, unknown>[]> {
  return (await readS3FileBatches(client, bucket, prefix, options)).flatMap((b) => b.rows);
}

/**
 * Each partition's current S3SnapshotSink snapshot, ordered by partition id: its current object
 * (format 2), or for a partition still in format 1, the snapshot its pointer names (retried from the
 * pointer if the writer deleted it meanwhile).
 * After a reshard, a parent's rows whose key a descendant's snapshot holds are left out (the
 * descendant's is the newer value; see lib/aws/s3-snapshot-sink.ts).
 */
export async function readS3SnapshotPartitions(
  client: S3Client, bucket: string, prefix: string, options: ReaderOptions = {},
): Promise<CommittedBatch[]> {
  return withoutSupersededRows(await readSnapshotObjects(client, bucket, prefix, options));
}

interface SnapshotRead extends CommittedBatch {
  readonly ancestors?: readonly string[];
  readonly keyColumns?: readonly string[];
}

/** JSON with bigints (exact longs) as digits, for comparing keys. */
function keyText(row: Record<string, unknown>, columns: readonly string[]): string {
  return JSON.stringify(columns.map((c) => row[c] ?? null), (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
}

function withoutSupersededRows(partitions: readonly SnapshotRead[]): CommittedBatch[] {
  const descendants = new Map<string, SnapshotRead[]>();
  for (const p of partitions) {
    for (const a of p.ancestors ?? []) descendants.set(a, [...descendants.get(a) ?? [], p]);
  }
  return partitions.map(({ partitionId, batchId, rows }) => {
    const newer = descendants.get(partitionId) ?? [];
    if (newer.length === 0) return { partitionId, batchId, rows };
    const columns = newer[0]!.keyColumns ?? [];
    const held = new Set(newer.flatMap((d) => d.rows.map((r) => keyText(r, columns))));
    return { partitionId, batchId, rows: rows.filter((r) => !held.has(keyText(r, columns))) };
  });
}

async function readSnapshotObjects(
  client: S3Client, bucket: string, prefix: string, options: ReaderOptions,
): Promise<SnapshotRead[]> {
  const base = normalizePrefix(prefix);
  const partitions = new Map<string, { current?: string; pointer?: string }>();
  const find = async (dir: string, extension: string, slot: 'current' | 'pointer'): Promise<void> => {
    for (const key of await listKeys(client, bucket, `${base}${dir}`, options.meter)) {
      const name = key.slice(base.length + dir.length);
      if (!name.startsWith('partition=') || !name.endsWith(extension) || name.includes('/')) continue;
      const id = decodeKeySegment(name.slice('partition='.length, -extension.length));
      partitions.set(id, { ...partitions.get(id), [slot]: key });
    }
  };
  await Promise.all([find(S3_CURRENT_DIR, '.jsonl', 'current'), find(S3_LATEST_DIR, '.json', 'pointer')]);
  const found = [...partitions].map(([partitionId, keys]) => ({ partitionId, ...keys }))
    .sort((a, b) => compareStrings(a.partitionId, b.partitionId));
  return mapWithConcurrency(found, options.concurrency ?? 16, async ({ partitionId, current, pointer }) => {
    if (current !== undefined) return { partitionId, ...await readCurrentSnapshot(client, bucket, current, options) };
    return { partitionId, ...await readFormatOneSnapshot(client, bucket, pointer!, options) };
  });
}

async function readCurrentSnapshot(client: S3Client, bucket: string, key: string, options: ReaderOptions): Promise<Omit<SnapshotRead, 'partitionId'>> {
  options.meter?.add('s3Gets', 1);
  const response = await client.send(new (await s3Sdk()).GetObjectCommand({ Bucket: bucket, Key: key }));
  const header = currentSnapshotHeader(response.Metadata ?? {}, key);
  const rows = parseJsonLines((await response.Body?.transformToString('utf-8')) ?? '', key);
  if (rows.length !== header.rows) throw new Error(`${key} has ${rows.length} rows; its metadata says ${header.rows}`);
  return { batchId: header.batchId, rows, ancestors: header.ancestors, keyColumns: header.keyColumns };
}

async function readFormatOneSnapshot(client: S3Client, bucket: string, key: string, options: ReaderOptions): Promise<Omit<SnapshotRead, 'partitionId'>> {
  for (let attempt = 1; ; attempt++) {
    const text = await getObjectText(client, bucket, key, options.meter);
    if (text === undefined) throw new Error(`snapshot pointer ${key} disappeared while reading`);
    const pointer = parseSnapshotPointer(text, key);
    const data = await getObjectText(client, bucket, pointer.key, options.meter);
    if (data !== undefined) {
      const rows = parseJsonLines(data, pointer.key);
      if (rows.length !== pointer.rows) {
        throw new Error(`${pointer.key} has ${rows.length} rows; its pointer ${key} says ${pointer.rows}`);
      }
      return { batchId: pointer.batchId, rows, ancestors: pointer.ancestors, keyColumns: pointer.keyColumns };
    }
    if (attempt >= 3) throw new Error(`snapshot ${pointer.key} named by ${key} does not exist`);
  }
}

/** The rows of every partition's current S3SnapshotSink snapshot, partitions in id order. */
export async function readS3Snapshots(
  client: S3Client, bucket: string, prefix: string, options: ReaderOptions = {},
): Promise<Record<string, unknown>[]> {
  return (await readS3SnapshotPartitions(client, bucket, prefix, options)).flatMap((p) => p.rows);
}

export interface ScanOptions {
  /** Keep `pk`, `_partition` and `_batchId` on each item (default false: the row's columns only). */
  readonly includeInternal?: boolean;
  readonly meter?: CostMeter;
  /** Reads the values the 'spill' policy moved to S3 (needed only when an item has some). */
  readonly s3?: S3Client;
}

/**
 * A DynamoDB number as the engine's value: an integer exactly (a bigint beyond 2^53, as a `long`
 * is; DynamoDB holds 38 digits, so one past int64 is rounded to a double), anything else a double.
 */
export function dynamoDbNumber(text: string): number | bigint {
  if (/^-?\d+$/.test(text)) return parseLongDigits(text) ?? Number(text);
  return Number(text);
}

/**
 * Every item of a DynamoDbUpsertSink table (a strongly consistent scan), unmarshalled (numbers as
 * JS numbers; integers beyond 2^53 as bigints, exact), sorted by `pk`. Values the 'spill' policy
 * moved to S3 are read back into their columns (pass `s3`).
 */
export async function scanDynamoDbSink(
  client: DynamoDBClient, tableName: string, options: ScanOptions = {},
): Promise<Record<string, unknown>[]> {
  const items: Record<string, AttributeValue>[] = [];
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(new ScanCommand({
      TableName: tableName, ConsistentRead: true, ExclusiveStartKey: start, ReturnConsumedCapacity: 'TOTAL',
    }));
    options.meter?.add('dynamoDbReadUnits', page.ConsumedCapacity?.CapacityUnits ?? 0);
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  const pkOf = (item: Record<string, AttributeValue>): string => item.pk?.S ?? '';
  items.sort((a, b) => compareStrings(pkOf(a), pkOf(b)));
  const resolved = await mapWithConcurrency(items, 16, (item) => resolveSpilledAttributes(item, options.s3, options.meter));
  return resolved.map((item) => {
    const native = unmarshall(item, { wrapNumbers: dynamoDbNumber }) as Record<string, unknown>;
    if (!options.includeInternal) for (const name of DYNAMODB_SINK_RESERVED) delete native[name];
    return native;
  });
}
