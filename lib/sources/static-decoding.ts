/**
 * Static data to rows: JSON Lines, Parquet and table items become rows of a schema, given or
 * inferred as Spark's JSON reader infers one. Every format goes through the JSON decoder the
 * streaming sources use, so a value is read by the same rules wherever it comes from.
 */
import { parquetReadObjects } from 'hyparquet';
import { parseJsonWithLongs, stringifyWithLongs } from '../core/long.js';
import { timestampToIso } from '../core/timestamps.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import { arrayOf, structOf, typeToString, type DataType, type StructField } from '../plan/data-types.js';
import { createJsonDecoder } from './json-decoder.js';
import type { StoredObject } from './static-storage.js';

/** A Parquet timestamp, kept apart from a long so the inferred type is timestamp. */
class TimestampMicros {
  constructor(readonly micros: bigint) {}
  toJSON(): string {
    return timestampToIso(Number(this.micros));
  }
}

/** One record per line (blank lines skipped); a line that is not JSON fails the read, naming the object and line. */
export function jsonLinesRecords(objects: readonly StoredObject[]): { readonly record: Record<string, unknown>; readonly where: string }[] {
  const decoder = new TextDecoder();
  const out: { record: Record<string, unknown>; where: string }[] = [];
  for (const { key, bytes } of objects) {
    decoder.decode(bytes).split('\n').forEach((line, i) => {
      if (line.trim() === '') return;
      const where = `${key}:${i + 1}`;
      let value: unknown;
      try {
        value = parseJsonWithLongs(line);
      } catch (error) {
        throw malformed(where, `not JSON (${(error as Error).message.split('\n')[0]})`);
      }
      if (value === null || typeof value !== 'object' || Array.isArray(value)) throw malformed(where, 'not a JSON object');
      out.push({ record: value as Record<string, unknown>, where });
    });
  }
  return out;
}

export async function parquetRecords(objects: readonly StoredObject[]): Promise<{ readonly record: Record<string, unknown>; readonly where: string }[]> {
  const out: { record: Record<string, unknown>; where: string }[] = [];
  for (const { key, bytes } of objects) {
    const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    let rows: Record<string, unknown>[];
    try {
      rows = await parquetReadObjects({ file, parsers: { timestampFromMicroseconds: (micros: bigint) => new TimestampMicros(micros) } });
    } catch (error) {
      throw malformed(key, `not a Parquet file (${(error as Error).message})`);
    }
    rows.forEach((record, i) => out.push({ record: normalizeParquet(record) as Record<string, unknown>, where: `${key} row ${i + 1}` }));
  }
  return out;
}

/** INT64 within 2^53 as a number, as the engine holds a long. */
function normalizeParquet(v: unknown): unknown {
  if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : v;
  if (Array.isArray(v)) return v.map(normalizeParquet);
  if (v !== null && typeof v === 'object' && !(v instanceof TimestampMicros) && !(v instanceof Uint8Array)) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, normalizeParquet(x)]));
  }
  return v;
}

/**
 * Spark's JSON schema inference, over every record: integers are long, other numbers double,
 * objects structs, arrays of the elements' common type; a field whose values disagree is string;
 * a field that is always NULL is string. Top-level fields sorted by name, as Spark sorts them.
 */
export function inferSchema(records: readonly Record<string, unknown>[], keepOrder = false): StructField[] {
  const merged = records.reduce<DataType>((acc, r) => mergeTypes(acc, typeOf(r)), structOf([]));
  const fields = merged !== 'null' && typeof merged === 'object' && merged.kind === 'struct' ? merged.fields : [];
  const finished = fields.map((f) => ({ name: f.name, type: finish(f.type) }));
  return keepOrder ? finished : [...finished].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function typeOf(v: unknown): DataType {
  if (v === null || v === undefined) return 'null';
  if (v instanceof TimestampMicros) return 'timestamp';
  switch (typeof v) {
    case 'boolean': return 'boolean';
    case 'bigint': return 'long';
    case 'number': return Number.isInteger(v) ? 'long' : 'double';
    case 'string': return 'string';
    default:
      if (Array.isArray(v)) return arrayOf(v.map(typeOf).reduce<DataType>(mergeTypes, 'null'));
      return structOf(Object.entries(v as object).map(([name, x]) => ({ name, type: typeOf(x) })));
  }
}

function mergeTypes(a: DataType, b: DataType): DataType {
  if (a === 'null') return b;
  if (b === 'null') return a;
  if (typeof a === 'string' || typeof b === 'string') {
    if (a === b) return a;
    if ((a === 'long' && b === 'double') || (a === 'double' && b === 'long')) return 'double';
    return 'string';
  }
  if (a.kind === 'array' && b.kind === 'array') return arrayOf(mergeTypes(a.element, b.element));
  if (a.kind === 'struct' && b.kind === 'struct') {
    const fields = a.fields.map((f) => ({ ...f }));
    for (const f of b.fields) {
      const i = fields.findIndex((x) => x.name === f.name);
      if (i < 0) fields.push({ ...f });
      else fields[i] = { name: f.name, type: mergeTypes(fields[i]!.type, f.type) };
    }
    return structOf(fields);
  }
  return 'string';
}

/** NULL-only fields become string, as in Spark; nested structs keep their fields sorted too. */
function finish(t: DataType): DataType {
  if (t === 'null') return 'string';
  if (typeof t === 'string') return t;
  if (t.kind === 'array') return arrayOf(finish(t.element));
  if (t.kind === 'struct') return structOf([...t.fields].sort((a, b) => (a.name < b.name ? -1 : 1)).map((f) => ({ name: f.name, type: finish(f.type) })));
  return t;
}

/** The records as rows of `schema`, by the streaming JSON decoder's rules; a value that does not fit fails the read with its place. */
export function recordsToRows(records: readonly { readonly record: Record<string, unknown>; readonly where: string }[], schema: readonly StructField[]): unknown[][] {
  const decode = createJsonDecoder(schema, { numericTimestamps: 'seconds' });
  return records.map(({ record, where }) => {
    const result = decode(stringifyWithLongs(record));
    if (!result.ok) throw malformed(where, result.reason);
    return result.row;
  });
}

function malformed(where: string, reason: string): IllegalArgumentError {
  return new IllegalArgumentError(`Malformed record at ${where}: ${reason}.`, {
    code: 'MALFORMED_STATIC_RECORD', errorClass: 'MALFORMED_RECORD_IN_PARSING',
    hint: 'fix the data, or give a schema (session.read.schema(...)) whose types fit it.',
  });
}

export function describeSchema(schema: readonly StructField[]): string {
  return schema.map((f) => `${f.name} ${typeToString(f.type)}`).join(', ');
}
