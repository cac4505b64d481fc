/**
 * S3DeadLetterWriter: one JSON object per dead-lettered record, holding every DeadLetterRecord field,
 * at `${prefix}${queryName}/${shardId}/${sequenceNumber}.json`. The key is the record's identity, so
 * a re-run batch rewrites the same objects instead of adding copies. Key segments are percent-encoded
 * when they are not URL-safe (query names, shard ids and sequence numbers normally are).
 */
import type { S3Client } from '@aws-sdk/client-s3';
import type { CostMeter } from '../core/cost-meter.js';
import type { DeadLetterRecord, DeadLetterWriter } from '../sources/dead-letter.js';
import {
  encodeKeySegment, getObjectText, listKeys, mapWithConcurrency, normalizePrefix, putObject, toSinkError,
} from './s3-util.js';

export interface S3DeadLetterWriterOptions {
  readonly client: S3Client;
  readonly bucket: string;
  /** Key prefix, e.g. `dead-letter/`; a trailing `/` is added when missing. */
  readonly prefix: string;
  readonly meter?: CostMeter;
  /** PUTs in flight at once (default 16). */
  readonly concurrency?: number;
}

export function deadLetterKey(prefix: string, record: Pick<DeadLetterRecord, 'queryName' | 'shardId' | 'sequenceNumber'>): string {
  return `${normalizePrefix(prefix)}${encodeKeySegment(record.queryName)}/${encodeKeySegment(record.shardId)}/${encodeKeySegment(record.sequenceNumber)}.json`;
}

function recordJson(r: DeadLetterRecord): string {
  const out: DeadLetterRecord = {
    queryName: r.queryName,
    shardId: r.shardId,
    sequenceNumber: r.sequenceNumber,
    partitionKey: r.partitionKey,
    approximateArrivalTimestampMs: r.approximateArrivalTimestampMs,
    dataBase64: r.dataBase64,
    reason: r.reason,
  };
  return JSON.stringify(out);
}

export class S3DeadLetterWriter implements DeadLetterWriter {
  readonly description: string;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly meter: CostMeter | undefined;
  private readonly concurrency: number;

  constructor(options: S3DeadLetterWriterOptions) {
    this.client = options.client;
    this.bucket = options.bucket;
    this.prefix = normalizePrefix(options.prefix);
    this.meter = options.meter;
    this.concurrency = Math.max(1, options.concurrency ?? 16);
    this.description = `S3DeadLetterWriter[s3://${this.bucket}/${this.prefix}]`;
  }

  async write(records: readonly DeadLetterRecord[]): Promise<void> {
    // The same record twice in one call is one object; write it once.
    const byKey = new Map<string, DeadLetterRecord>();
    for (const r of records) byKey.set(deadLetterKey(this.prefix, r), r);
    await mapWithConcurrency([...byKey], this.concurrency, async ([key, record]) => {
      try {
        await putObject(this.client, this.bucket, key, recordJson(record), 'application/json', this.meter);
      } catch (error) {
        throw toSinkError(error, this.description, `writing ${key}`);
      }
    });
  }
}

function compareSequenceNumbers(a: string, b: string): number {
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) {
    const x = BigInt(a);
    const y = BigInt(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Every dead letter under `prefix` (all queries, or one: pass `${prefix}${queryName}/`-style prefix),
 * ordered by query name, shard id, then sequence number (numerically).
 */
export async function readDeadLetters(
  client: S3Client, bucket: string, prefix: string, options: { meter?: CostMeter; concurrency?: number } = {},
): Promise<DeadLetterRecord[]> {
  const keys = (await listKeys(client, bucket, normalizePrefix(prefix), options.meter)).filter((k) => k.endsWith('.json'));
  const records = await mapWithConcurrency(keys, options.concurrency ?? 16, async (key) => {
    const text = await getObjectText(client, bucket, key, options.meter);
    return text === undefined ? undefined : (JSON.parse(text) as DeadLetterRecord);
  });
  return records
    .filter((r): r is DeadLetterRecord => r !== undefined)
    .sort((a, b) => (a.queryName < b.queryName ? -1 : a.queryName > b.queryName ? 1
      : a.shardId < b.shardId ? -1 : a.shardId > b.shardId ? 1
        : compareSequenceNumbers(a.sequenceNumber, b.sequenceNumber)));
}
