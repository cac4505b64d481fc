/**
 * S3SnapshotSink: complete mode. Every batch writes the partition's whole result table as one JSON
 * Lines object, then moves the partition's pointer to it:
 *
 *   ${prefix}snapshots/partition=${partitionId}/batch=${batchId:012}.jsonl   the result table
 *   ${prefix}_latest/partition=${partitionId}.json                          the pointer
 *
 * The pointer is `{ formatVersion: 1, partitionId, batchId, key, rows }`. A reader reads the pointer,
 * then the object it names, so it sees one whole snapshot: the current one, or (mid-write) the
 * previous one. S3 PUTs replace objects atomically, so the pointer is never half-written.
 *
 * The pointer never moves backwards: it is read first, and a batch whose id is lower than the
 * pointer's (a stale or reordered write) is a no-op, as is a batch equal to it (a re-run of a batch
 * that was already published). After moving the pointer, snapshots older than the previous one are
 * deleted: the previous snapshot stays, since a reader may have just read the old pointer. Deleting
 * is housekeeping, so a failure to delete does not fail the published batch; it is kept in
 * `lastCleanupError` and retried (by listing) on the next batch.
 *
 * This assumes one writer per partition at a time (the runtime's shard lease). The pointer's
 * read-then-write is not a compare-and-swap.
 *
 * After a reshard, a parent's last snapshot stays beside its children's. A child's state starts
 * from its parents' restricted to its hash range, and complete mode never drops a group, so every
 * parent row of the child's range is in each of the child's snapshots, with its newer value. The
 * pointer names the partition's ancestors (from the stream's shard list, at its first publish) and
 * the result's key columns; the reader (lib/aws/sink-readers.ts) drops an ancestor's row whose key
 * a descendant's snapshot holds. At every moment a reader thus sees, per key, one committed value:
 * the parent's final one until the child that owns the key has published, the child's after.
 */
import type { S3Client } from '@aws-sdk/client-s3';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import type { CostMeter } from '../core/cost-meter.js';
import type { Sink, SinkBatch } from '../sinks/sink.js';
import { toJsonLines } from './s3-files-sink.js';
import { SINK_OUTPUT_MODES } from '../sinks/sink-output-modes.js';
import {
  deleteKeys, encodeKeySegment, getObjectText, listKeys, normalizePrefix, padBatchId, putObject, toSinkError,
} from './s3-util.js';

export const S3_SNAPSHOT_FORMAT_VERSION = 1;
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
  /** The partitions this one descends from (absent: written before Sluice recorded lineage). */
  readonly ancestors?: readonly string[];
  readonly keyColumns?: readonly string[];
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

/** The batch id in a snapshot key (`.../batch=000000000042.jsonl` → 42), or undefined. */
export function snapshotBatchIdOf(key: string): number | undefined {
  const match = /\/batch=(\d+)\.jsonl$/.exec(key);
  return match ? Number(match[1]) : undefined;
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
    const pointerKey = s3SnapshotPointerKey(this.prefix, batch.partitionId);
    const key = s3SnapshotKey(this.prefix, batch.partitionId, batch.batchId);
    let action = `reading ${pointerKey}`;
    let previous: S3SnapshotPointer | undefined;
    try {
      const text = await getObjectText(this.client, this.bucket, pointerKey, this.meter);
      previous = text === undefined ? undefined : parseSnapshotPointer(text, pointerKey);
      // Equal: this batch was already published (a re-run). Lower: stale; never move back.
      if (previous && batch.batchId <= previous.batchId) return;
      action = `writing ${key}`;
      await putObject(this.client, this.bucket, key, toJsonLines(batch), 'application/x-ndjson', this.meter);
      // A shard's parents never change: looked up once, at the partition's first publish.
      action = `finding the ancestors of ${batch.partitionId}`;
      const ancestors = previous?.ancestors ?? await this.ancestorsOf?.(batch.partitionId);
      const pointer: S3SnapshotPointer = {
        formatVersion: S3_SNAPSHOT_FORMAT_VERSION, partitionId: batch.partitionId, batchId: batch.batchId,
        key, rows: batch.rows.length,
        ...(ancestors ? { ancestors: [...ancestors] } : {}),
        ...(this.keyColumns ? { keyColumns: [...this.keyColumns] } : {}),
      };
      action = `writing ${pointerKey}`;
      await putObject(this.client, this.bucket, pointerKey, JSON.stringify(pointer), 'application/json', this.meter);
    } catch (error) {
      throw toSinkError(error, this.description, action);
    }
    if (previous) await this.deleteOlderThan(batch.partitionId, previous.batchId);
  }

  /** Deletes the partition's snapshots with a batch id below `keepFrom`. */
  private async deleteOlderThan(partitionId: string, keepFrom: number): Promise<void> {
    try {
      const keys = await listKeys(this.client, this.bucket, s3SnapshotDir(this.prefix, partitionId), this.meter);
      const old = keys.filter((k) => {
        const id = snapshotBatchIdOf(k);
        return id !== undefined && id < keepFrom;
      });
      if (old.length > 0) await deleteKeys(this.client, this.bucket, old);
      this.lastCleanupError = undefined;
    } catch (error) {
      this.lastCleanupError = error;
    }
  }
}
