/**
 * Compaction of the files sink's output: in each partition folder, the small per-batch files
 * (`part-<shard>-<batch>.<ext>`) older than `minAgeMs` are merged into files of up to `targetBytes`
 * (`compacted-<hash>.<ext>`), then deleted.
 *
 * What a reader can observe. S3 has no atomic multi-object swap, so a reader that lists a folder
 * (DuckDB, Spark, Athena through Glue with partition projection, which lists the partition's
 * location too) between the compacted file's PUT and the one DeleteObjects of its inputs sees both
 * and counts those rows twice. The window is one request long (tens of milliseconds); it cannot be
 * closed with projection-based tables. To keep it off the data people query, only files older than
 * `minAgeMs` (default one hour) are compacted: a folder still receiving batches is left alone until
 * it has been quiet that long. A reader never misses a row: the inputs are deleted only after the
 * output exists. The manifest reader (`readS3Files`) is exact at every moment: it reads a file
 * from its visible key, or, once compacted, its rows from the compacted file (the log below).
 *
 * Crash safety: before the output is written, `_sluice_compaction/<hash>.json` records the inputs
 * (in order, with row counts) and the output. A run that finds a record whose inputs still exist
 * finishes it (the output exists: delete the inputs; it does not: the record is dropped and the
 * folder is compacted again). The record stays as the map the manifest reader follows.
 *
 * Zombies: `minAgeMs` must exceed the Lambda timeout (15 minutes at most), so no run that could
 * still reveal a batch's staged file is alive; staged leftovers of a compacted batch (a stale run
 * re-wrote them after the reveal) are deleted before the output is written, so a later recovery
 * cannot reveal them again.
 */
import { createHash } from 'node:crypto';
import type { S3Client } from '@aws-sdk/client-s3';
import { parquetMetadata } from 'hyparquet';
import { parquetWriteBuffer } from 'hyparquet-writer';
import type { CostMeter } from '../core/cost-meter.js';
import { FILE_CONTENT_TYPES, FILE_EXTENSIONS, type FileFormat } from '../sinks/file-format.js';
import { DEPLOYMENT_DEFAULTS } from '../runtime/runtime-config.js';
import { parquetRowsRaw } from './parquet-reader.js';
import { S3_FILES_STAGING_DIR } from './s3-files-sink.js';
import {
  deleteKeys, getObjectBytes, getObjectText, listKeys, listObjects, normalizePrefix, objectExists, putObject, putObjectBytes,
  type ListedObject,
} from './s3-util.js';

export const S3_COMPACTION_DIR = '_sluice_compaction/';
export const DEFAULT_COMPACTION_TARGET_BYTES = DEPLOYMENT_DEFAULTS.compactionTargetBytes;
export const DEFAULT_COMPACTION_MIN_AGE_MS = DEPLOYMENT_DEFAULTS.compactionMinAgeMs;

export interface CompactionOptions {
  readonly client: S3Client;
  readonly bucket: string;
  readonly prefix: string;
  readonly format: FileFormat;
  readonly targetBytes?: number;
  readonly minAgeMs?: number;
  readonly now?: () => number;
  readonly meter?: CostMeter;
  /**
   * Asked before each merge: true stops the run there (what is merged stays merged, the rest waits
   * for the next run), so a caller bounds the work to the time it has.
   */
  readonly shouldStop?: () => boolean;
}

export interface CompactionRecord {
  readonly formatVersion: 1;
  readonly output: string;
  readonly inputs: readonly { readonly key: string; readonly rows: number }[];
}

export interface CompactionReport {
  readonly filesMerged: number;
  readonly filesWritten: number;
  readonly bytesWritten: number;
  readonly recordsFinished: number;
  /** False when `shouldStop` ended the run with merges left to do. */
  readonly complete: boolean;
}

const PART_FILE = /(^|\/)part-([^/]+)-(\d{12})\.[a-z]+$/;

/** A key below the table location that a table reader lists: no segment starts with `_` or `.`. */
function isTableFile(relative: string, extension: string): boolean {
  return relative.endsWith(`.${extension}`) && !relative.split('/').some((s) => s.startsWith('_') || s.startsWith('.'));
}

async function mergeFiles(format: FileFormat, bodies: readonly Uint8Array[]): Promise<{ body: Uint8Array; rows: number[] }> {
  if (format === 'jsonl') {
    const texts = bodies.map((b) => Buffer.from(b).toString('utf-8'));
    return { body: Buffer.from(texts.join(''), 'utf-8'), rows: texts.map((t) => t.split('\n').filter((l) => l !== '').length) };
  }
  const first = bodies[0]!;
  const schema = parquetMetadata(first.buffer.slice(first.byteOffset, first.byteOffset + first.byteLength) as ArrayBuffer).schema;
  const perFile = await Promise.all(bodies.map((b) => parquetRowsRaw(b)));
  const all = perFile.flat();
  const topLevel: string[] = [];
  // The root's children, in order: skip each child's subtree.
  let index = 1;
  const skip = (i: number): number => {
    let next = i + 1;
    for (let c = 0; c < (schema[i]!.num_children ?? 0); c++) next = skip(next);
    return next;
  };
  while (index < schema.length) { topLevel.push(schema[index]!.name); index = skip(index); }
  const buffer = parquetWriteBuffer({
    schema, codec: 'SNAPPY', rowGroupSize: 100_000, createdBy: 'sluice',
    columnData: topLevel.map((name) => ({ name, data: all.map((r) => r[name] ?? null) })),
  });
  return { body: new Uint8Array(buffer), rows: perFile.map((rows) => rows.length) };
}

function recordKey(prefix: string, inputs: readonly string[]): { hash: string; key: string } {
  const hash = createHash('sha256').update(inputs.join('\n')).digest('hex').slice(0, 20);
  return { hash, key: `${prefix}${S3_COMPACTION_DIR}${hash}.json` };
}

/** Merges the small files of every quiet partition folder; safe to run again after a crash. */
export async function compactFiles(options: CompactionOptions): Promise<CompactionReport> {
  const { client, bucket, format, meter } = options;
  const prefix = normalizePrefix(options.prefix);
  const extension = FILE_EXTENSIONS[format];
  const targetBytes = options.targetBytes ?? DEFAULT_COMPACTION_TARGET_BYTES;
  const cutoff = (options.now ?? Date.now)() - (options.minAgeMs ?? DEFAULT_COMPACTION_MIN_AGE_MS);
  let recordsFinished = 0;

  // Finish what a crashed run started.
  for (const key of await listKeys(client, bucket, `${prefix}${S3_COMPACTION_DIR}`, meter)) {
    const record = JSON.parse((await getObjectText(client, bucket, key, meter)) ?? 'null') as CompactionRecord | null;
    if (!record) continue;
    const remaining: string[] = [];
    for (const input of record.inputs) if (await objectExists(client, bucket, input.key, meter)) remaining.push(input.key);
    if (remaining.length === 0) continue;
    if (await objectExists(client, bucket, record.output, meter)) await deleteKeys(client, bucket, remaining);
    else await deleteKeys(client, bucket, [key]);
    recordsFinished++;
  }

  const folders = new Map<string, ListedObject[]>();
  for (const object of await listObjects(client, bucket, prefix, meter)) {
    const relative = object.key.slice(prefix.length);
    if (!isTableFile(relative, extension) || !PART_FILE.test(relative) || object.lastModified.getTime() > cutoff) continue;
    const folder = object.key.slice(0, object.key.lastIndexOf('/') + 1);
    let list = folders.get(folder);
    if (!list) folders.set(folder, list = []);
    list.push(object);
  }
  const staged = await listKeys(client, bucket, `${prefix}${S3_FILES_STAGING_DIR}`, meter);

  let filesMerged = 0;
  let filesWritten = 0;
  let bytesWritten = 0;
  let complete = true;
  for (const [folder, objects] of folders) {
    if (!complete) break;
    objects.sort((a, b) => (a.key < b.key ? -1 : 1));
    const groups: ListedObject[][] = [];
    let group: ListedObject[] = [];
    let size = 0;
    for (const object of objects) {
      if (group.length > 0 && size + object.bytes > targetBytes) { groups.push(group); group = []; size = 0; }
      group.push(object);
      size += object.bytes;
    }
    groups.push(group);
    for (const inputs of groups.filter((g) => g.length > 1)) {
      if (options.shouldStop?.()) { complete = false; break; }
      const keys = inputs.map((o) => o.key);
      const bodies = await Promise.all(keys.map(async (k) => (await getObjectBytes(client, bucket, k, meter))!));
      const { body, rows } = await mergeFiles(format, bodies);
      const { hash, key: logKey } = recordKey(prefix, keys);
      const output = `${folder}compacted-${hash}.${extension}`;
      // Staged leftovers of these batches could otherwise be revealed again by a later recovery.
      const batches = keys.map((k) => PART_FILE.exec(k)!).map((m) => `${S3_FILES_STAGING_DIR}partition=${m[2]}/${m[3]}/`);
      const leftovers = staged.filter((s) => batches.some((b) => s.startsWith(`${prefix}${b}`)));
      if (leftovers.length > 0) await deleteKeys(client, bucket, leftovers);
      const record: CompactionRecord = { formatVersion: 1, output, inputs: keys.map((key, i) => ({ key, rows: rows[i]! })) };
      await putObject(client, bucket, logKey, JSON.stringify(record), 'application/json', meter);
      await putObjectBytes(client, bucket, output, body, FILE_CONTENT_TYPES[format], meter);
      await deleteKeys(client, bucket, keys);
      filesMerged += keys.length;
      filesWritten++;
      bytesWritten += body.byteLength;
    }
  }
  return { filesMerged, filesWritten, bytesWritten, recordsFinished, complete };
}

/** Small file key → where its rows now are (the compacted file, the offset and count of its rows). */
export async function readCompactionLog(
  client: S3Client, bucket: string, prefix: string, meter?: CostMeter,
): Promise<Map<string, { output: string; offset: number; rows: number }>> {
  const map = new Map<string, { output: string; offset: number; rows: number }>();
  for (const key of await listKeys(client, bucket, `${normalizePrefix(prefix)}${S3_COMPACTION_DIR}`, meter)) {
    const record = JSON.parse((await getObjectText(client, bucket, key, meter)) ?? 'null') as CompactionRecord | null;
    if (!record) continue;
    let offset = 0;
    for (const input of record.inputs) {
      map.set(input.key, { output: record.output, offset, rows: input.rows });
      offset += input.rows;
    }
  }
  return map;
}
