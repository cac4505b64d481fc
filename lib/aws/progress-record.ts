/**
 * The stored form of a progress record in the checkpoint table.
 *
 * The record rides in commit N's transaction, where DynamoDB charges 2 write units per started KB
 * of each item. As JSON it is about 1.4 KB (two UUIDs, four 56-digit sequence numbers, the sink's
 * description): 4 units. Brotli brings it to about 0.6 KB, and it is written as attributes of the
 * commit item itself (`commitProgressAttributes`): the commit item stays under 1 KB, so the record
 * costs no write unit at all, where an item of its own in the transaction cost 2. The record is
 * unchanged (every field kept), so `sluice status` and `sluice progress` show the same information.
 *
 * Earlier versions wrote it to a ring of items `progress#NN` (with a TTL); those are still read
 * (`parseProgressRecord`), so records written before an upgrade stay visible until they expire.
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

/** The attribute that gives the format of a record folded into a commit item (whose `fmt` is the commit's). */
export const COMMIT_PROGRESS_FORMAT_ATTRIBUTE = 'pfmt';

/** Batch N's record as attributes of commit N's item: no TTL (the commit log's purge removes it). */
export function commitProgressAttributes(progress: object): Item {
  return {
    [COMMIT_PROGRESS_FORMAT_ATTRIBUTE]: { N: String(PROGRESS_RECORD_FORMAT_VERSION) },
    [PROGRESS_COMPRESSED_ATTRIBUTE]: { B: brotliCompressSync(Buffer.from(JSON.stringify(progress)), BROTLI_OPTIONS) },
  };
}

/** The record a commit item carries, or undefined (committed without one, or before records were folded). */
export function parseCommitProgress<T>(item: Item, pk: string): T | undefined {
  const fmt = item[COMMIT_PROGRESS_FORMAT_ATTRIBUTE]?.N;
  if (fmt === undefined) return undefined;
  return parseProgressRecord<T>({ ...item, fmt: { N: fmt } }, pk);
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
