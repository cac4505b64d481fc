/**
 * `sluice dev --input`: the file's bytes become Kinesis records as a producer would send them,
 * one line one record. Bytes, not text: a line that is not valid UTF-8 reaches the decoder as it
 * is and is dead-lettered there (decoding the file as text would turn it into U+FFFD and count it).
 * Nothing is dropped or changed without a word: a UTF-8 byte-order mark at the start of the file
 * and the CR of CR LF line ends are removed and reported; blank lines are skipped and counted; a
 * record Kinesis would refuse (over 1 MiB with its partition key, or a key over 256 characters) is
 * reported with its line number and skipped, and the run goes on.
 *
 * Two things a file can say besides its records:
 * - `#wave` alone on a line: the records after it are put only once those before it are processed
 *   (committed, the watermark moved on), so a file can hold late data (Spark's late rows).
 * - `key<TAB>record` (JSON sources): the record's own partition key, as a producer would give it.
 *   Without one, the key is the value of the source's declared `partitionKey` column, else a
 *   random key (seeded). A key prefix that contradicts the declared column is refused: the
 *   query's state relies on the producer keying by that column.
 */
import type { KinesisSourceSpec } from '../../query/query-definition.js';
import { createPrng, partitionKeyReader, randomPartitionKey } from '../sample-events.js';

/** Kinesis's limit on one record: data plus partition key, 1 MiB. */
export const KINESIS_MAX_RECORD_BYTES = 1024 * 1024;
/** Kinesis's limit on a partition key, in Unicode characters. */
export const KINESIS_MAX_PARTITION_KEY_CHARS = 256;

const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const LF = 0x0a;
const CR = 0x0d;
const utf8 = new TextDecoder('utf-8', { fatal: true });
const WAVE_MARKER = /^#\s*wave\s*$/i;
/** A key before a TAB, then a JSON record: a JSON record never starts with a key and a TAB. */
const KEY_PREFIX = /^([^\t{["\s][^\t]*)\t(?=\s*[{[])/;

export interface InputRecord {
  readonly data: Buffer;
  readonly partitionKey: string;
  /** 1-based line of the file. */
  readonly line: number;
  /** 1 + the `#wave` markers before the line. */
  readonly wave: number;
}

export interface InputFile {
  readonly records: InputRecord[];
  /** What was removed or skipped, one sentence each, for the run's report. */
  readonly notes: string[];
  readonly skipped: readonly { readonly line: number; readonly reason: string }[];
}

export function recordsFromInputBytes(bytes: Buffer, source: KinesisSourceSpec, seed = 1): InputFile {
  const rnd = createPrng(seed);
  const keyOf = partitionKeyReader(source);
  const notes: string[] = [];
  const skipped: { line: number; reason: string }[] = [];
  const records: InputRecord[] = [];
  let body = bytes;
  if (body.subarray(0, 3).equals(UTF8_BOM)) {
    body = body.subarray(3);
    notes.push('the file starts with a UTF-8 byte-order mark; it was removed (it is not part of the first record)');
  }
  let crlf = 0;
  let blank = 0;
  let invalidUtf8 = 0;
  let line = 0;
  let wave = 1;
  let ownKeys = 0;
  const json = (source.format ?? 'json') === 'json';
  for (let start = 0; start <= body.length;) {
    const end = body.indexOf(LF, start);
    const stop = end === -1 ? body.length : end;
    line++;
    let data = body.subarray(start, stop);
    start = stop + 1;
    if (data.length > 0 && data[data.length - 1] === CR) {
      data = data.subarray(0, -1);
      crlf++;
    }
    if (end === -1 && data.length === 0) break; // the file ends with a line break
    let text: string | undefined;
    try {
      text = utf8.decode(data);
    } catch {
      invalidUtf8++;
    }
    if (text !== undefined && text.trim() === '') {
      blank++;
      continue;
    }
    if (text !== undefined && WAVE_MARKER.test(text.trim())) {
      wave++;
      continue;
    }
    const prefix = json && text !== undefined ? KEY_PREFIX.exec(text) : null;
    let ownKey: string | undefined;
    if (prefix) {
      ownKey = prefix[1]!;
      data = data.subarray(Buffer.byteLength(prefix[0], 'utf8'));
      text = text!.slice(prefix[0].length);
    }
    const columnKey = text === undefined ? undefined : keyOf(text);
    if (ownKey !== undefined && columnKey !== undefined && ownKey !== columnKey) {
      skipped.push({ line, reason: `its key prefix '${ownKey}' differs from its ${source.partitionKey} '${columnKey}' (the query relies on records being keyed by ${source.partitionKey})` });
      continue;
    }
    if (ownKey !== undefined) ownKeys++;
    const declaredKey = ownKey ?? columnKey;
    if (declaredKey !== undefined && [...declaredKey].length > KINESIS_MAX_PARTITION_KEY_CHARS) {
      skipped.push({ line, reason: `its partition key (${source.partitionKey}) has ${[...declaredKey].length} characters, over Kinesis's ${KINESIS_MAX_PARTITION_KEY_CHARS}` });
      continue;
    }
    const partitionKey = declaredKey ?? randomPartitionKey(rnd);
    const size = data.length + Buffer.byteLength(partitionKey, 'utf8');
    if (size > KINESIS_MAX_RECORD_BYTES) {
      skipped.push({ line, reason: `${size} bytes with its partition key, over Kinesis's ${KINESIS_MAX_RECORD_BYTES}-byte (1 MiB) record limit` });
      continue;
    }
    records.push({ data: Buffer.from(data), partitionKey, line, wave });
  }
  if (crlf > 0) notes.push(`${crlf} line${crlf === 1 ? '' : 's'} ended in CR LF; the CR was removed`);
  if (blank > 0) notes.push(`${blank} blank line${blank === 1 ? ' was' : 's were'} skipped`);
  if (invalidUtf8 > 0) notes.push(`${invalidUtf8} line${invalidUtf8 === 1 ? ' is' : 's are'} not valid UTF-8; put as they are (the decoder dead-letters them)`);
  if (ownKeys > 0) notes.push(`${ownKeys} line${ownKeys === 1 ? ' gives its' : 's give their'} own partition key (key TAB record)`);
  if (wave > 1) notes.push(`${wave - 1} #wave marker${wave === 2 ? '' : 's'}: ${wave} waves, each put once the one before is processed`);
  for (const s of skipped) notes.push(`line ${s.line} skipped: ${s.reason}`);
  return { records, notes, skipped };
}
