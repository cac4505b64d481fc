/**
 * S3SnapshotSink: complete mode. Every batch replaces the partition's whole result table, one JSON
 * Lines object per partition:
 *
 *   ${prefix}current/partition=${partitionId}.jsonl
 *
 * with the batch id, the row count and the layout's format in its user metadata (`x-amz-meta-
 * sluice-batch-id`, `-sluice-rows`, `-sluice-format`). S3 replaces an object atomically and reads
 * are strongly consistent, so a reader's one GET sees one whole snapshot: the current one, or (while
 * a batch is being written) the previous one.
 *
 * One PUT per batch. The first layout (format 1) wrote each batch's table to its own object, then
 * moved a pointer to it, listed the partition's snapshots and deleted the old ones: two PUTs and a
 * LIST (all PUT-priced), three times the S3 cost, for the same guarantee.
 *
 * The snapshot never moves backwards: its metadata is read first (a HEAD), and a batch whose id is
 * lower than the stored one (a stale or reordered write) is a no-op, as is a batch equal to it (a
 * re-run of a batch that was already published; its table would be the same bytes, since a batch's
 * input is fixed by its offset entry and execution is deterministic), unless the stored one is of a
 * lower revision (`sluice-revision`, SinkBatch.revision: runs of a planned batch whose oldest
 * records expired between them differ; the committed run has the highest revision). This assumes one writer per
 * partition at a time (the runtime's shard lease): the read-then-write is not a compare-and-swap;
 * the checkpoint's conditional writes are what stop a stale writer from committing.
 *
 * A partition still in format 1 (written by an earlier version): its pointer is honoured the same
 * way while no current object exists, and once the first current object is written, the pointer and
 * the snapshots are deleted (housekeeping: a failure is kept in `lastCleanupError`, and a reader
 * prefers the current object anyway).
 *
 * After a reshard, a parent's last snapshot stays beside its children's. A child's state starts
 * from its parents' restricted to its hash range, and complete mode never drops a group, so every
 * parent row of the child's range is in each of the child's snapshots, with its newer value. The
 * object's metadata names the partition's ancestors (from the stream's shard list, at its first
 * publish) and the result's key columns; the reader (lib/aws/sink-readers.ts) drops an ancestor's
 * row whose key a descendant's snapshot holds. At every moment a reader thus sees, per key, one
 * committed value: the parent's final one until the child that owns the key has published, the
 * child's after.
 */
import type { S3Client } from '@aws-sdk/client-s3';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import type { CostMeter } from '../core/cost-meter.js';
import type { Sink, SinkBatch } from '../sinks/sink.js';
import { toJsonLines } from './s3-files-sink.js';
import { SINK_OUTPUT_MODES } from '../sinks/sink-output-modes.js';
import {
  deleteKeys, encodeKeySegment, getObjectText, listKeys, normalizePrefix, objectMetadata, padBatchId, putObject, toSinkError,
} from './s3-util.js';

export const S3_SNAPSHOT_FORMAT_VERSION = 2;
/** Format 2: one object per partition, replaced by each batch. */
export const S3_CURRENT_DIR = 'current/';
/** The user metadata of a current object (lower-case: S3 returns them so). */
export const SNAPSHOT_METADATA = {
  batchId: 'sluice-batch-id', rows: 'sluice-rows', format: 'sluice-format', ancestors: 'sluice-ancestors', keyColumns: 'sluice-key-columns',
  revision: 'sluice-revision',
} as const;
/** Format 1 (read, and removed once a partition moves to format 2): per-batch objects behind a pointer. */
export const S3_SNAPSHOTS_DIR = 'snapshots/';
export const S3_LATEST_DIR = '_latest/';

export interface S3SnapshotSinkOptions {
  readonly client: S3Client;
  readonly bucket: string;
  /** Key prefix; a trailing `/` is added when missing. */
  readonly prefix: string;
  readonly meter?: CostMeter;
  /** The result's key columns (the grouping columns): how a reader matches a child's rows to its parent's. */
  readonly keyColumns?: readonly string[];
  /** A partition's ancestors after reshards (its shard's parents, theirs, ...); default: none. */
  readonly ancestorsOf?: (partitionId: string) => Promise<readonly string[]>;
}

export interface S3SnapshotPointer {
  readonly formatVersion: number;
  readonly partitionId: string;
  readonly batchId: number;
  readonly key: string;
  readonly rows: number;
  /** The run of the batch (SinkBatch.revision) when not 0. */
  readonly revision?: number;
  /** The partitions this one descends from (absent: written before Sluice recorded lineage). */
  readonly ancestors?: readonly string[];
  readonly keyColumns?: readonly string[];
}

/** The partition's current snapshot (format 2). */
export function s3CurrentSnapshotKey(prefix: string, partitionId: string): string {
  return `${normalizePrefix(prefix)}${S3_CURRENT_DIR}partition=${encodeKeySegment(partitionId)}.jsonl`;
}

export interface CurrentSnapshotHeader {
  readonly batchId: number;
  readonly rows: number;
  /** The run of the batch (SinkBatch.revision) when not 0. */
  readonly revision?: number;
  /** The partitions this one descends from (absent: written before Sluice recorded lineage). */
  readonly ancestors?: readonly string[];
  readonly keyColumns?: readonly string[];
}

/** What a current object's metadata says (batch id, row count, lineage); malformed metadata is an error. */
export function currentSnapshotHeader(metadata: Record<string, string>, key: string): CurrentSnapshotHeader {
  const batchId = Number(metadata[SNAPSHOT_METADATA.batchId]);
  const rows = Number(metadata[SNAPSHOT_METADATA.rows]);
  if (!Number.isInteger(batchId) || !Number.isInteger(rows)) {
    throw new Error(`Snapshot ${key} has no valid ${SNAPSHOT_METADATA.batchId}/${SNAPSHOT_METADATA.rows} metadata: ${JSON.stringify(metadata)}`);
  }
  const ancestors = listMetadata(metadata[SNAPSHOT_METADATA.ancestors]);
  const keyColumns = listMetadata(metadata[SNAPSHOT_METADATA.keyColumns]);
  const revision = Number(metadata[SNAPSHOT_METADATA.revision] ?? 0);
  return { batchId, rows, ...(revision > 0 ? { revision } : {}), ...(ancestors ? { ancestors } : {}), ...(keyColumns ? { keyColumns } : {}) };
}

/** User metadata travels as HTTP headers: a list is URI-encoded JSON, so any column name survives. */
function lineageMetadata(ancestors: readonly string[] | undefined, keyColumns: readonly string[] | undefined): Record<string, string> {
  return {
    ...(ancestors ? { [SNAPSHOT_METADATA.ancestors]: encodeURIComponent(JSON.stringify(ancestors)) } : {}),
    ...(keyColumns ? { [SNAPSHOT_METADATA.keyColumns]: encodeURIComponent(JSON.stringify(keyColumns)) } : {}),
  };
}

function listMetadata(text: string | undefined): string[] | undefined {
  return text === undefined ? undefined : (JSON.parse(decodeURIComponent(text)) as string[]);
}

export function s3SnapshotDir(prefix: string, partitionId: string): string {
  return `${normalizePrefix(prefix)}${S3_SNAPSHOTS_DIR}partition=${encodeKeySegment(partitionId)}/`;
}

export function s3SnapshotKey(prefix: string, partitionId: string, batchId: number): string {
  return `${s3SnapshotDir(prefix, partitionId)}batch=${padBatchId(batchId)}.jsonl`;
}

export function s3SnapshotPointerKey(prefix: string, partitionId: string): string {
  return `${normalizePrefix(prefix)}${S3_LATEST_DIR}partition=${encodeKeySegment(partitionId)}.json`;
}

export function parseSnapshotPointer(text: string, key: string): S3SnapshotPointer {
  const pointer = JSON.parse(text) as Partial<S3SnapshotPointer>;
  if (typeof pointer.batchId !== 'number' || typeof pointer.key !== 'string') {
    throw new Error(`Malformed snapshot pointer ${key}: ${text.slice(0, 200)}`);
  }
  return pointer as S3SnapshotPointer;
}

export class S3SnapshotSink implements Sink {
  readonly supportedOutputModes = SINK_OUTPUT_MODES['s3-snapshot'];
  readonly description: string;
  /** The last failure to delete old snapshots, if the last cleanup failed. */
  lastCleanupError: unknown;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly meter: CostMeter | undefined;
  private readonly keyColumns: readonly string[] | undefined;
  private readonly ancestorsOf: ((partitionId: string) => Promise<readonly string[]>) | undefined;

  constructor(options: S3SnapshotSinkOptions) {
    this.client = options.client;
    this.bucket = options.bucket;
    this.prefix = normalizePrefix(options.prefix);
    this.meter = options.meter;
    this.keyColumns = options.keyColumns;
    this.ancestorsOf = options.ancestorsOf;
    this.description = `S3SnapshotSink[s3://${this.bucket}/${this.prefix}]`;
  }

  async addBatch(batch: SinkBatch): Promise<void> {
    if (!this.supportedOutputModes.includes(batch.outputMode)) {
      throw new IllegalArgumentError(`${this.description} supports only ${this.supportedOutputModes.join(', ')} output mode, got '${batch.outputMode}'`, {
        code: 'SINK_OUTPUT_MODE_UNSUPPORTED',
        hint: 'use S3FilesSink for append mode or DynamoDbUpsertSink for update mode.',
      });
    }
    const key = s3CurrentSnapshotKey(this.prefix, batch.partitionId);
    const pointerKey = s3SnapshotPointerKey(this.prefix, batch.partitionId);
    let action = `reading ${key}`;
    let formatOne: S3SnapshotPointer | undefined;
    try {
      const metadata = await objectMetadata(this.client, this.bucket, key, this.meter);
      let publishedBatchId: number | undefined;
      const published = metadata === undefined ? undefined : currentSnapshotHeader(metadata, key);
      if (published !== undefined) {
        publishedBatchId = published.batchId;
      } else {
        // No current object: a new partition, or one still in format 1 (its pointer decides).
        action = `reading ${pointerKey}`;
        const text = await getObjectText(this.client, this.bucket, pointerKey, this.meter);
        formatOne = text === undefined ? undefined : parseSnapshotPointer(text, pointerKey);
        publishedBatchId = formatOne?.batchId;
      }
      // Equal: this batch was already published (a re-run), unless by a lower revision (SinkBatch.revision:
      // a run that still held records which expired before this one). Lower: stale; never move back.
      if (publishedBatchId !== undefined && batch.batchId < publishedBatchId) return;
      if (publishedBatchId === batch.batchId && (published?.revision ?? 0) >= (batch.revision ?? 0)) return;
      // A shard's parents never change: looked up once, at the partition's first publish, then carried.
      action = `finding the ancestors of ${batch.partitionId}`;
      const ancestors = published?.ancestors ?? formatOne?.ancestors ?? await this.ancestorsOf?.(batch.partitionId);
      action = `writing ${key}`;
      await putObject(this.client, this.bucket, key, toJsonLines(batch), 'application/x-ndjson', this.meter, {
        [SNAPSHOT_METADATA.batchId]: String(batch.batchId),
        [SNAPSHOT_METADATA.rows]: String(batch.rows.length),
        [SNAPSHOT_METADATA.format]: String(S3_SNAPSHOT_FORMAT_VERSION),
        ...(batch.revision ? { [SNAPSHOT_METADATA.revision]: String(batch.revision) } : {}),
        ...lineageMetadata(ancestors, this.keyColumns),
      });
    } catch (error) {
      throw toSinkError(error, this.description, action);
    }
    if (formatOne) await this.removeFormatOne(batch.partitionId, pointerKey);
  }

  /** Deletes a partition's format-1 pointer and snapshots, now that its current object exists. */
  private async removeFormatOne(partitionId: string, pointerKey: string): Promise<void> {
    try {
      const snapshots = await listKeys(this.client, this.bucket, s3SnapshotDir(this.prefix, partitionId), this.meter);
      await deleteKeys(this.client, this.bucket, [pointerKey, ...snapshots]);
      this.lastCleanupError = undefined;
    } catch (error) {
      this.lastCleanupError = error;
    }
  }
}
