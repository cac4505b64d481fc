/**
 * S3FilesSink: Spark's FileStreamSink for S3, append mode only. Every batch of every partition
 * becomes at most one JSON Lines object, and a batch is visible only once its manifest entry exists
 * (Spark's `_spark_metadata` log, one object per entry instead of one compacted log file, so
 * partitions never write to a shared object):
 *
 *   ${prefix}data/partition=${partitionId}/batch=${batchId:012}.jsonl         one row per line
 *   ${prefix}_sluice_metadata/partition=${partitionId}/${batchId:012}.json    the manifest entry
 *
 * A manifest entry is `{ formatVersion: 1, partitionId, batchId, files: [{ key, rows, bytes }] }`.
 * The data object is written first and the entry second, so an entry never names a missing file;
 * a crash in between leaves a data object no reader sees (readers list manifests, not data). A
 * re-run batch finds its entry already present and writes nothing, so it never shows twice; a
 * re-run after a crash between the two writes rewrites the same data key, then writes the entry.
 *
 * An empty batch writes an entry with `files: []` (as Spark logs every batch): the manifest then
 * records that the batch committed, and the next batch's existence check stays one HEAD.
 *
 * Rows are `toExternalRow` objects (column order; timestamps as ISO-8601 strings), one JSON object
 * per line. Parquet is out of scope for now (it would need a Parquet writer dependency; the layout
 * and manifest would stay the same with `.parquet` data keys).
 *
 * `partitionId` goes into keys percent-encoded (Kinesis shard ids are unchanged by that).
 */
import type { S3Client } from '@aws-sdk/client-s3';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import type { CostMeter } from '../core/cost-meter.js';
import { stringifyExternalRow } from '../sinks/external-row.js';
import type { Sink, SinkBatch } from '../sinks/sink.js';
import { encodeKeySegment, normalizePrefix, objectExists, padBatchId, putObject, toSinkError } from './s3-util.js';
import { SINK_OUTPUT_MODES } from '../sinks/sink-output-modes.js';

export const S3_FILES_FORMAT_VERSION = 1;
export const S3_FILES_METADATA_DIR = '_sluice_metadata/';
export const S3_FILES_DATA_DIR = 'data/';

export interface S3FilesSinkOptions {
  readonly client: S3Client;
  readonly bucket: string;
  /** Key prefix; a trailing `/` is added when missing (`''` writes at the bucket root). */
  readonly prefix: string;
  readonly meter?: CostMeter;
}

export interface S3FilesManifestEntry {
  readonly formatVersion: number;
  readonly partitionId: string;
  readonly batchId: number;
  readonly files: readonly { readonly key: string; readonly rows: number; readonly bytes: number }[];
}

export function s3FilesDataKey(prefix: string, partitionId: string, batchId: number): string {
  return `${normalizePrefix(prefix)}${S3_FILES_DATA_DIR}partition=${encodeKeySegment(partitionId)}/batch=${padBatchId(batchId)}.jsonl`;
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

export class S3FilesSink implements Sink {
  readonly supportedOutputModes = SINK_OUTPUT_MODES['s3-files'];
  readonly description: string;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly meter: CostMeter | undefined;

  constructor(options: S3FilesSinkOptions) {
    this.client = options.client;
    this.bucket = options.bucket;
    this.prefix = normalizePrefix(options.prefix);
    this.meter = options.meter;
    this.description = `S3FilesSink[s3://${this.bucket}/${this.prefix}]`;
  }

  async addBatch(batch: SinkBatch): Promise<void> {
    if (!this.supportedOutputModes.includes(batch.outputMode)) {
      throw new IllegalArgumentError(`${this.description} supports only ${this.supportedOutputModes.join(', ')} output mode, got '${batch.outputMode}'`, {
        code: 'SINK_OUTPUT_MODE_UNSUPPORTED',
        hint: 'use S3SnapshotSink for complete mode or DynamoDbUpsertSink for update/complete mode.',
      });
    }
    const manifestKey = s3FilesManifestKey(this.prefix, batch.partitionId, batch.batchId);
    let action = `checking ${manifestKey}`;
    try {
      if (await objectExists(this.client, this.bucket, manifestKey, this.meter)) return; // already committed
      const files: { key: string; rows: number; bytes: number }[] = [];
      if (batch.rows.length > 0) {
        const key = s3FilesDataKey(this.prefix, batch.partitionId, batch.batchId);
        const body = toJsonLines(batch);
        action = `writing ${key}`;
        await putObject(this.client, this.bucket, key, body, 'application/x-ndjson', this.meter);
        files.push({ key, rows: batch.rows.length, bytes: Buffer.byteLength(body, 'utf-8') });
      }
      const entry: S3FilesManifestEntry = {
        formatVersion: S3_FILES_FORMAT_VERSION, partitionId: batch.partitionId, batchId: batch.batchId, files,
      };
      action = `writing ${manifestKey}`;
      await putObject(this.client, this.bucket, manifestKey, JSON.stringify(entry), 'application/json', this.meter);
    } catch (error) {
      throw toSinkError(error, this.description, action);
    }
  }
}
