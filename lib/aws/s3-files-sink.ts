/**
 * S3FilesSink: Spark's FileStreamSink for S3, append mode only, JSON Lines or Parquet, optionally
 * partitioned by result columns into Hive-style folders (Spark's `partitionBy`). The prefix is a
 * table location: a reader that lists it (Athena, Spark, DuckDB `read_parquet('.../**')`) sees only
 * the data of committed batches, because everything else lives under names such readers skip
 * (`_`-prefixed folders; staged files do not end in `.parquet`/`.jsonl` either, for glob readers):
 *
 *   ${prefix}${col}=${value}/.../part-${shard}-${batchId:012}.${ext}       visible data, one per folder and batch
 *   ${prefix}_sluice_staging/partition=${shard}/${batchId:012}/${i}.${ext}.staged   written before the commit
 *   ${prefix}_sluice_metadata/partition=${shard}/${batchId:012}.json       the manifest entry (the sink's commit)
 *
 * Per batch: the data files are written to staging, then the manifest entry, which names each
 * staged file and the visible key it becomes (`addBatch`). After the checkpoint commits the batch,
 * `onCommitted` copies each staged file to its visible key (S3 makes an object appear whole). A
 * crash before the commit leaves nothing visible; the re-run (same input, same output) finds the
 * manifest entry and writes nothing. A crash after the commit and before the reveal is repaired at
 * the next start, which calls `onCommitted` for the last committed batch (a runner can plan batch
 * N+1 only after a reveal of N succeeded, so the last one is the only one that can be missing).
 * Names are deterministic per (shard, batch, folder), so a repeated reveal rewrites the same key
 * and a row never shows twice; a stale run cannot reveal anything, since its checkpoint commit
 * fails first. Runs of one batch differ only when its oldest planned records expired between them
 * (SinkBatch.revision): a run of a higher revision replaces the entry of a lower one (its staged
 * files have names of their own), and one of a lower revision finds the entry and writes nothing.
 * (A stale run that checked before the newer entry existed can still replace it: S3 has no
 * compare-and-swap here, as for the snapshot sink.)
 *
 * Two reveals of one batch can run at once (the committer's, and the at-start repair of a trigger
 * racing it on the same shard), so no reveal deletes the staged files: one reveal's delete could
 * pull the source from under the other's copy, and a store whose copy onto an existing key is not
 * atomic (s3rver unlinks the destination first) then loses the visible file for good. The staged
 * copies are deleted later by `sweepRevealedStaging` (lib/aws/s3-staged-sweep.ts, run by the
 * scheduled function) once the visible files are older than any invocation can live.
 *
 * An empty batch writes an entry with `files: []` (as Spark logs every batch).
 *
 * A row that cannot be written (a value its Parquet type cannot hold: SINK_VALUE_NOT_ENCODABLE; a
 * file key over S3's 1,024 bytes: SINK_KEY_TOO_LONG) is declared through `rowLimits`, so the
 * query's onUnwritableRow policy dead-letters the input records behind it (lib/query/unwritable-rows.ts);
 * a batch that still holds one writes nothing and throws UnwritableRowsError.
 */
import { createHash } from 'node:crypto';
import type { S3Client } from '@aws-sdk/client-s3';
import { IllegalArgumentError, StreamingQueryError } from '../errors/sluice-error.js';
import type { CostMeter } from '../core/cost-meter.js';
import type { StructField } from '../plan/data-types.js';
import { stringifyWithLongs } from '../core/long.js';
import { stringifyExternalRow, toExternalRow, toExternalValue } from '../sinks/external-row.js';
import type { RowRefusal, Sink, SinkBatch, SinkRowLimits } from '../sinks/sink.js';
import { UnwritableRowsError, type UnwritableRow } from '../sinks/row-limits.js';
import { dataRowProblem, encodeDataFile, FILE_CONTENT_TYPES, FILE_EXTENSIONS, type FileFormat } from '../sinks/file-format.js';
import { keyBytes, partitionPath, resolvePartitionColumns, S3_MAX_KEY_BYTES } from '../sinks/partition-path.js';
import {
  copyObject, encodeKeySegment, getObjectText, listKeys, mapWithConcurrency, normalizePrefix, objectExists,
  padBatchId, putObject, putObjectBytes, toSinkError,
} from './s3-util.js';
import { SINK_OUTPUT_MODES } from '../sinks/sink-output-modes.js';

export const S3_FILES_FORMAT_VERSION = 2;
export const S3_FILES_METADATA_DIR = '_sluice_metadata/';
export const S3_FILES_STAGING_DIR = '_sluice_staging/';
/** Where format version 1 (before partitioned, staged files) wrote its JSON Lines; read only. */
export const S3_FILES_V1_DATA_DIR = 'data/';

const WRITE_CONCURRENCY = 8;
/** Copies of one staged file tried before the reveal fails (retryably). */
const REVEAL_ATTEMPTS = 5;

export interface S3FilesSinkOptions {
  readonly client: S3Client;
  readonly bucket: string;
  /** Key prefix; a trailing `/` is added when missing (`''` writes at the bucket root). */
  readonly prefix: string;
  readonly meter?: CostMeter;
  /** Data file format (default JSON Lines). */
  readonly format?: FileFormat;
  /** Result columns whose values name the Hive-style folders, outermost first. */
  readonly partitionBy?: readonly string[];
}

export interface S3FilesManifestFile {
  /** The visible key. */
  readonly key: string;
  /** Where the file waits until its batch commits (absent in format version 1). */
  readonly stagedKey?: string;
  readonly rows: number;
  readonly bytes: number;
  /** The partition columns' values of every row in the file (JSON values, as JSON Lines has them). */
  readonly partition?: Readonly<Record<string, unknown>>;
}

export interface S3FilesManifestEntry {
  readonly formatVersion: number;
  readonly partitionId: string;
  readonly batchId: number;
  readonly format?: FileFormat;
  /** The run of the batch (SinkBatch.revision) when not 0: a higher one replaces the entry. */
  readonly revision?: number;
  readonly files: readonly S3FilesManifestFile[];
}

export function s3FilesDataKey(
  prefix: string, folder: string, partitionId: string, batchId: number, format: FileFormat = 'jsonl',
): string {
  return `${normalizePrefix(prefix)}${folder}part-${encodeKeySegment(partitionId)}-${padBatchId(batchId)}.${FILE_EXTENSIONS[format]}`;
}

/** A revision above 0 has its own staged names, so a stale run of a lower one cannot overwrite them. */
export function s3FilesStagedKey(prefix: string, partitionId: string, batchId: number, index: number, format: FileFormat, revision = 0): string {
  return `${s3FilesStagingFolder(prefix, partitionId, batchId)}${index}${revision > 0 ? `.r${revision}` : ''}.${FILE_EXTENSIONS[format]}.staged`;
}

export function s3FilesStagingFolder(prefix: string, partitionId: string, batchId: number): string {
  return `${normalizePrefix(prefix)}${S3_FILES_STAGING_DIR}partition=${encodeKeySegment(partitionId)}/${padBatchId(batchId)}/`;
}

export function s3FilesManifestKey(prefix: string, partitionId: string, batchId: number): string {
  return `${normalizePrefix(prefix)}${S3_FILES_METADATA_DIR}partition=${encodeKeySegment(partitionId)}/${padBatchId(batchId)}.json`;
}

/** Rows as JSON Lines (each line ends with `\n`); `''` for no rows. */
export function toJsonLines(batch: Pick<SinkBatch, 'rows' | 'schema'>): string {
  let out = '';
  for (const row of batch.rows) out += `${stringifyExternalRow(row, batch.schema)}\n`;
  return out;
}

/** The sink's view of a result schema: partition columns, data columns, and their ordinals. */
interface FileLayout {
  readonly partitionFields: readonly StructField[];
  readonly partitionOrdinals: readonly number[];
  readonly dataFields: readonly StructField[];
  readonly dataOrdinals: readonly number[];
}

function fileLayout(schema: readonly StructField[], partitionBy: readonly string[]): FileLayout {
  const partitionFields = resolvePartitionColumns(partitionBy, schema);
  const partitionOrdinals = partitionFields.map((f) => schema.indexOf(f));
  const dataOrdinals = schema.map((_, i) => i).filter((i) => !partitionOrdinals.includes(i));
  return { partitionFields, partitionOrdinals, dataFields: dataOrdinals.map((i) => schema[i]!), dataOrdinals };
}

export class S3FilesSink implements Sink {
  readonly supportedOutputModes = SINK_OUTPUT_MODES['s3-files'];
  readonly description: string;
  readonly format: FileFormat;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly meter: CostMeter | undefined;
  private readonly partitionBy: readonly string[];
  private layout: { schema: readonly StructField[]; layout: FileLayout } | undefined;
  /** Entries this container wrote and has not revealed yet, by `${partitionId}/${batchId}`. */
  private readonly unrevealed = new Map<string, S3FilesManifestEntry>();
  /** The last batch this container revealed (or found revealed), per partition. */
  private readonly revealed = new Map<string, number>();

  constructor(options: S3FilesSinkOptions) {
    this.client = options.client;
    this.bucket = options.bucket;
    this.prefix = normalizePrefix(options.prefix);
    this.meter = options.meter;
    this.format = options.format ?? 'jsonl';
    this.partitionBy = options.partitionBy ?? [];
    this.description = `S3FilesSink[s3://${this.bucket}/${this.prefix}, ${this.format}${this.partitionBy.length > 0 ? `, partitionBy ${this.partitionBy.join(', ')}` : ''}]`;
  }

  private layoutOf(schema: readonly StructField[]): FileLayout {
    if (this.layout?.schema !== schema) this.layout = { schema, layout: fileLayout(schema, this.partitionBy) };
    return this.layout.layout;
  }

  /**
   * Why this row of a batch with `schema`, written by shard `partitionId` in batch `batchId`, cannot
   * be written (its value does not fit its Parquet type, or its key is longer than S3 allows), or
   * null. The reason names the column and the limit, never the value.
   */
  rowRefusal(row: readonly unknown[], schema: readonly StructField[], partitionId: string, batchId: number): RowRefusal | null {
    const layout = this.layoutOf(schema);
    const problem = dataRowProblem(this.format, row, layout.dataFields, layout.dataOrdinals);
    if (problem) return { code: 'SINK_VALUE_NOT_ENCODABLE', reason: problem };
    const key = s3FilesDataKey(this.prefix, partitionPath(row, layout.partitionFields, layout.partitionOrdinals), partitionId, batchId, this.format);
    const bytes = keyBytes(key);
    return bytes > S3_MAX_KEY_BYTES
      ? { code: 'SINK_KEY_TOO_LONG', reason: `the row's file key is ${bytes} bytes; S3 allows ${S3_MAX_KEY_BYTES} (shorten the partition values)` }
      : null;
  }

  readonly rowLimits: SinkRowLimits = {
    // Appended rows have no key: the row's content names it, so a re-run that leaves rows out names it the same.
    rowKey: (batch, rowIndex) =>
      `row:${createHash('sha256').update(stringifyWithLongs(toExternalRow(batch.rows[rowIndex]!, batch.schema))).digest('base64')}`,
    check: (batch, rowIndex) => this.rowRefusal(batch.rows[rowIndex]!, batch.schema, batch.partitionId, batch.batchId),
  };

  async addBatch(batch: SinkBatch): Promise<void> {
    if (!this.supportedOutputModes.includes(batch.outputMode)) {
      throw new IllegalArgumentError(`${this.description} supports only ${this.supportedOutputModes.join(', ')} output mode, got '${batch.outputMode}'`, {
        code: 'SINK_OUTPUT_MODE_UNSUPPORTED',
        hint: 'use S3SnapshotSink for complete mode or DynamoDbUpsertSink for update/complete mode.',
      });
    }
    const { partitionId, batchId } = batch;
    const manifestKey = s3FilesManifestKey(this.prefix, partitionId, batchId);
    let action = `checking ${manifestKey}`;
    try {
      const revision = batch.revision ?? 0;
      // Already written, unless by a lower revision (SinkBatch.revision: a run that still held records which expired before this one).
      if (revision === 0 ? await objectExists(this.client, this.bucket, manifestKey, this.meter) : await this.revisionWritten(manifestKey, revision)) return;
      const layout = this.layoutOf(batch.schema);
      const folders = new Map<string, (readonly unknown[])[]>();
      const refused: UnwritableRow[] = [];
      batch.rows.forEach((row, rowIndex) => {
        const refusal = this.rowRefusal(row, batch.schema, partitionId, batchId);
        if (refusal) refused.push({ rowIndex, rowKey: this.rowLimits.rowKey(batch, rowIndex), refusal });
      });
      // Nothing is written when any row would fail: the query's onUnwritableRow policy resolves it.
      if (refused.length > 0) throw new UnwritableRowsError(this.description, batchId, refused);
      for (const row of batch.rows) {
        const folder = partitionPath(row, layout.partitionFields, layout.partitionOrdinals);
        let rows = folders.get(folder);
        if (!rows) folders.set(folder, rows = []);
        rows.push(row);
      }
      const ordered = [...folders.keys()].sort();
      const files = await mapWithConcurrency(ordered, WRITE_CONCURRENCY, async (folder, index) => {
        const rows = folders.get(folder)!;
        const stagedKey = s3FilesStagedKey(this.prefix, partitionId, batchId, index, this.format, revision);
        const body = encodeDataFile(this.format, rows, layout.dataFields, layout.dataOrdinals);
        action = `writing ${stagedKey}`;
        await putObjectBytes(this.client, this.bucket, stagedKey, body, FILE_CONTENT_TYPES[this.format], this.meter);
        const partition: Record<string, unknown> = {};
        layout.partitionFields.forEach((f, i) => { partition[f.name] = toExternalValue(rows[0]![layout.partitionOrdinals[i]!], f.type); });
        return {
          key: s3FilesDataKey(this.prefix, folder, partitionId, batchId, this.format), stagedKey, rows: rows.length, bytes: body.byteLength, partition,
        };
      });
      const entry: S3FilesManifestEntry = { formatVersion: S3_FILES_FORMAT_VERSION, partitionId, batchId, format: this.format, ...(revision > 0 ? { revision } : {}), files };
      action = `writing ${manifestKey}`;
      await putObject(this.client, this.bucket, manifestKey, JSON.stringify(entry), 'application/json', this.meter);
      this.unrevealed.set(`${partitionId}/${batchId}`, entry);
    } catch (error) {
      throw toSinkError(error, this.description, action);
    }
  }

  /** Whether the batch's manifest entry exists at `revision` or a higher one. */
  private async revisionWritten(manifestKey: string, revision: number): Promise<boolean> {
    const text = await getObjectText(this.client, this.bucket, manifestKey, this.meter);
    return text !== undefined && ((JSON.parse(text) as S3FilesManifestEntry).revision ?? 0) >= revision;
  }

  /** Makes the committed batch's staged files visible (see the header); safe to repeat and to run concurrently. */
  async onCommitted(partitionId: string, batchId: number): Promise<void> {
    const id = `${partitionId}/${batchId}`;
    if ((this.revealed.get(partitionId) ?? -1) >= batchId) return;
    let action = `revealing batch ${batchId} of ${partitionId}`;
    try {
      const written = this.unrevealed.get(id);
      let entry = written;
      if (!entry) {
        // Not written by this container: reveal only what is still staged (one LIST when nothing is).
        const staged = await listKeys(this.client, this.bucket, s3FilesStagingFolder(this.prefix, partitionId, batchId), this.meter);
        if (staged.length > 0) {
          const manifestKey = s3FilesManifestKey(this.prefix, partitionId, batchId);
          action = `reading ${manifestKey}`;
          const text = await getObjectText(this.client, this.bucket, manifestKey, this.meter);
          if (text !== undefined) entry = JSON.parse(text) as S3FilesManifestEntry;
        }
      }
      const files = (entry?.files ?? []).filter((f) => f.stagedKey !== undefined);
      await mapWithConcurrency(files, WRITE_CONCURRENCY, async (file) => {
        action = `revealing ${file.key}`;
        // A repair finds the staged files until the sweep, revealed or not: a HEAD (priced as a GET) spares the copy.
        if (!written && await objectExists(this.client, this.bucket, file.key, this.meter)) return;
        await this.revealFile(file.stagedKey!, file.key);
      });
      this.unrevealed.delete(id);
      this.revealed.set(partitionId, batchId);
    } catch (error) {
      // The next call (the retry, or the start of the next run) finds what is still staged by listing.
      this.unrevealed.delete(id);
      throw toSinkError(error, this.description, action);
    }
  }

  /**
   * Copies a staged file to its visible key. A missing staged file usually means the sweep deleted
   * it after a reveal, which the visible key confirms; if neither exists, a concurrent re-run of the
   * batch may be re-writing the staged file (a store without atomic PUTs shows no object
   * meanwhile), so the copy is retried.
   */
  private async revealFile(stagedKey: string, visibleKey: string): Promise<void> {
    for (let attempt = 0; attempt < REVEAL_ATTEMPTS; attempt++) {
      if (await copyObject(this.client, this.bucket, stagedKey, visibleKey, this.meter)) return;
      if (await objectExists(this.client, this.bucket, visibleKey, this.meter)) return;
      await new Promise((resolve) => setTimeout(resolve, 50 * 2 ** attempt));
    }
    throw new StreamingQueryError(`${this.description}: neither the staged file nor the visible file of a committed batch exists (${visibleKey}); the reveal is retried`, {
      code: 'S3_FILES_REVEAL_MISSING', retryable: true,
    });
  }
}
