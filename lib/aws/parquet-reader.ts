/**
 * Reading back the Parquet files the files sink writes, as the JSON values its JSON Lines files
 * hold (timestamps as ISO-8601 strings, INT64 as longs: a number within 2^53, an exact bigint
 * beyond, as `parseJsonWithLongs` reads the JSON Lines): for the sink readers, `sluice dev` and
 * compaction. hyparquet is the reader half of the chosen writer.
 */
import { parquetReadObjects } from 'hyparquet';
import { longFromBigInt } from '../core/long.js';
import { timestampToIso } from '../core/timestamps.js';

function int64AsNumber(value: unknown): unknown {
  // An INT64 always fits a long, so `longFromBigInt` never answers null here.
  if (typeof value === 'bigint') return longFromBigInt(value) ?? Number(value);
  if (Array.isArray(value)) return value.map(int64AsNumber);
  if (value !== null && typeof value === 'object' && !(value instanceof Uint8Array)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, int64AsNumber(v)]));
  }
  return value;
}

/** Rows of one Parquet file, JSON-valued. */
export async function parquetRowsAsJson(bytes: Uint8Array): Promise<Record<string, unknown>[]> {
  const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  const rows = await parquetReadObjects({
    file, parsers: { timestampFromMicroseconds: (micros: bigint) => timestampToIso(Number(micros)) },
  });
  return rows.map((r) => int64AsNumber(r) as Record<string, unknown>);
}

/** Rows of one Parquet file as hyparquet decodes them (INT64 as bigint, timestamps as raw micros). */
export async function parquetRowsRaw(bytes: Uint8Array): Promise<Record<string, unknown>[]> {
  const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  return parquetReadObjects({ file, parsers: { timestampFromMicroseconds: (micros: bigint) => micros } });
}
