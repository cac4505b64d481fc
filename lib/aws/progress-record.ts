/**
 * The stored form of a progress record in the checkpoint table's ring (`progress#NN`).
 *
 * The record rides in commit N's transaction, where DynamoDB charges 2 write units per started KB.
 * As JSON it is about 1.4 KB (two UUIDs, four 56-digit sequence numbers, the sink's description):
 * 4 units, about 40% of a batch's checkpoint writes. Brotli brings it to about 0.6 KB, so the item
 * stays under 1 KB: 2 units. The record is unchanged (every field kept), so `sluice status` and
 * `sluice progress` show the same information.
 *
 * Format 2: the JSON, Brotli-compressed, in the binary attribute `entryBr`. Format 1 (the JSON in
 * the string attribute `entry`, written by earlier versions) is still read, so a ring written
 * before an upgrade stays readable until its slots are overwritten.
 */
import { brotliCompressSync, brotliDecompressSync, constants } from 'node:zlib';
import { CheckpointError } from '../errors/sluice-error.js';
import { PROGRESS_RECORDS } from '../runtime/runtime-config.js';
import type { Item } from './dynamodb-cost.js';

export const PROGRESS_RECORD_FORMAT_VERSION = 2;
/** The attribute that holds the compressed record (format 2). */
export const PROGRESS_COMPRESSED_ATTRIBUTE = 'entryBr';

/** A small JSON text: a window sized to it and the text mode keep compression quick. */
const BROTLI_OPTIONS = {
  params: {
    [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
    [constants.BROTLI_PARAM_QUALITY]: 11,
    [constants.BROTLI_PARAM_LGWIN]: 16,
  },
};

/** Batch N's ring item: key, format, batch id, the compressed record and its TTL. */
export function progressRecordItem(key: Item, batchId: number, progress: object, nowMs: number): Item {
  return {
    ...key,
    fmt: { N: String(PROGRESS_RECORD_FORMAT_VERSION) },
    batchId: { N: String(batchId) },
    [PROGRESS_COMPRESSED_ATTRIBUTE]: { B: brotliCompressSync(Buffer.from(JSON.stringify(progress)), BROTLI_OPTIONS) },
    [PROGRESS_RECORDS.ttlAttribute]: { N: String(Math.floor(nowMs / 1000) + PROGRESS_RECORDS.ttlSeconds) },
  };
}

/** The record a ring item holds, in either format. */
export function parseProgressRecord<T>(item: Item, pk: string): T {
  const fmt = Number(item.fmt?.N ?? '1');
  if (fmt > PROGRESS_RECORD_FORMAT_VERSION) {
    throw new CheckpointError(`Progress record ${pk} ${item.sk?.S} has format ${fmt}; this Sluice reads up to ${PROGRESS_RECORD_FORMAT_VERSION}.`, {
      code: 'CHECKPOINT_FORMAT_TOO_NEW', hint: 'read the progress with the Sluice version that runs the query.',
    });
  }
  const compressed = item[PROGRESS_COMPRESSED_ATTRIBUTE]?.B;
  const text = compressed !== undefined ? brotliDecompressSync(compressed).toString('utf8') : item.entry?.S;
  if (text === undefined) throw new CheckpointError(`Progress record ${pk} ${item.sk?.S} has no entry.`, { code: 'CHECKPOINT_CORRUPT' });
  return JSON.parse(text) as T;
}
