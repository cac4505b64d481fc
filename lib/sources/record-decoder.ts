/**
 * Turns a Kinesis record's bytes into a row of the query's schema, or a reason it cannot. JSON
 * objects by field name (the default), CSV lines in schema order, or the raw UTF-8 string. Given the
 * columns the query reads, it decodes and checks only those, as the JSON memory stream does.
 */
import type { DataType, StructField } from '../plan/data-types.js';
import { parseDate } from '../core/dates.js';
import { parseDecimal, toPrecision } from '../core/decimal.js';
import { isTimeWithoutDate, parseTimestamp, parseTimestampUnbounded, TIME_WITHOUT_DATE_TEXT, TIMESTAMP_RANGE_TEXT } from '../core/timestamps.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import { INT_MAX, INT_MIN, parseLongDigits } from '../core/long.js';
import { createJsonDecoder, type DecodeResult } from './json-decoder.js';
import type { RecordSourceSpec } from './record-format.js';

export interface RecordDecoder {
  (data: Uint8Array): DecodeResult;
  /**
   * The same decoding of only `columns` (case-insensitive; the others are NULL and not checked):
   * Spark's column pruning, so that a field the query never reads cannot make a record invalid.
   */
  forColumns?(columns: readonly string[]): RecordDecoder;
}

export interface RecordDecoderOptions {
  /** Decode only these columns (default: all). */
  readonly columns?: readonly string[];
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function decodeText(data: Uint8Array): string | null {
  try {
    return utf8.decode(data);
  } catch {
    return null;
  }
}

export function createRecordDecoder(spec: RecordSourceSpec, schema: readonly StructField[], options: RecordDecoderOptions = {}): RecordDecoder {
  const decode = textDecoder(spec, schema, options.columns);
  // One pruned decoder per column set: a long-lived decoder (one per container) hands every shard
  // source the same one, with the JSON layouts it has already learned.
  const pruned = new Map<string, RecordDecoder>();
  const forColumns = (columns: readonly string[]): RecordDecoder => {
    const key = columns.map((c) => c.toLowerCase()).sort().join('\u0000');
    let decoder = pruned.get(key);
    if (!decoder) pruned.set(key, (decoder = createRecordDecoder(spec, schema, { columns })));
    return decoder;
  };
  return Object.assign(decode, { forColumns });
}

function textDecoder(spec: RecordSourceSpec, schema: readonly StructField[], columns: readonly string[] | undefined): (data: Uint8Array) => DecodeResult {
  const format = spec.format ?? 'json';
  if (format === 'raw') {
    return (data) => {
      const text = decodeText(data);
      return text === null ? { ok: false, reason: 'the record is not valid UTF-8' } : { ok: true, row: [text] };
    };
  }
  const parse = format === 'json'
    ? createJsonDecoder(schema, { numericTimestamps: spec.numericTimestamps ?? 'seconds', onlyFields: columns })
    : createCsvDecoder(schema, spec.csvDelimiter ?? ',', columns);
  return (data) => {
    const text = decodeText(data);
    return text === null ? { ok: false, reason: 'the record is not valid UTF-8' } : parse(text);
  };
}

type CsvReader = (text: string) => unknown | typeof INVALID;
const INVALID = Symbol('invalid');

function csvReader(type: DataType): CsvReader {
  switch (type) {
    case 'string': return (t) => t;
    // Exact digits: a long beyond 2^53 is a bigint; an int is -2^31..2^31-1, a long -2^63..2^63-1.
    case 'int': return (t) => { const n = /^[+-]?\d+$/.test(t) ? Number(t) : NaN; return n >= INT_MIN && n <= INT_MAX ? n + 0 : INVALID; };
    case 'long': return (t) => (/^[+-]?\d+$/.test(t) ? parseLongDigits(t.startsWith('+') ? t.slice(1) : t) ?? INVALID : INVALID);
    case 'double': return (t) => (t.trim() !== '' && Number.isFinite(Number(t)) ? Number(t) : INVALID);
    case 'boolean': return (t) => (/^true$/i.test(t) ? true : /^false$/i.test(t) ? false : INVALID);
    case 'timestamp': return (t) => parseTimestamp(t) ?? INVALID;
    case 'date': return (t) => parseDate(t) ?? INVALID;
    default:
      if (typeof type === 'object' && type.kind === 'decimal') {
        const { precision, scale } = type;
        return (t) => { const d = parseDecimal(t); return (d && toPrecision(d, precision, scale)) ?? INVALID; };
      }
      throw new IllegalArgumentError(`CSV records cannot hold ${typeof type === 'string' ? type : type.kind} columns.`, {
        code: 'CSV_UNSUPPORTED_TYPE', hint: 'use format json for arrays and structs.',
      });
  }
}

/** RFC 4180 fields: quotes around a field, doubled quotes inside one. */
export function splitCsvLine(line: string, delimiter: string): string[] | null {
  const fields: string[] = [];
  let i = 0;
  for (;;) {
    if (line[i] === '"') {
      let value = '';
      i++;
      for (;;) {
        const q = line.indexOf('"', i);
        if (q < 0) return null;
        value += line.slice(i, q);
        if (line[q + 1] === '"') { value += '"'; i = q + 2; continue; }
        i = q + 1;
        break;
      }
      fields.push(value);
      if (i === line.length) return fields;
      if (line[i] !== delimiter) return null;
      i++;
    } else {
      const d = line.indexOf(delimiter, i);
      if (d < 0) { fields.push(line.slice(i)); return fields; }
      fields.push(line.slice(i, d));
      i = d + 1;
    }
  }
}

function csvReason(field: StructField, text: string): string {
  if (field.type === 'timestamp' && parseTimestampUnbounded(text) !== null) {
    return `field ${field.name}: '${text}' is outside the timestamp range held exactly (${TIMESTAMP_RANGE_TEXT})`;
  }
  if (field.type === 'timestamp' && isTimeWithoutDate(text)) return `field ${field.name}: '${text}' is a time without a date (${TIME_WITHOUT_DATE_TEXT})`;
  if ((field.type === 'int' || field.type === 'long') && /^[+-]?\d+$/.test(text)) {
    return `field ${field.name}: '${text}' is out of range for ${field.type} (${field.type === 'int' ? `${INT_MIN} to ${INT_MAX}` : '-2^63 to 2^63-1'})`;
  }
  if (field.type === 'double' && Number.isNaN(Number(text)) === false && text.trim() !== '') {
    return `field ${field.name}: '${text}' is out of range for double`;
  }
  return `field ${field.name}: '${text}' is not a valid ${String(field.type)}`;
}

function createCsvDecoder(schema: readonly StructField[], delimiter: string, columns: readonly string[] | undefined): (text: string) => DecodeResult {
  const readers = schema.map((f) => csvReader(f.type));
  // An unread field is still counted (the line's shape), but neither converted nor checked.
  const wanted = columns === undefined ? null : new Set(columns.map((c) => c.toLowerCase()));
  const used = schema.map((f) => wanted === null || wanted.has(f.name.toLowerCase()));
  return (text) => {
    const fields = splitCsvLine(text.replace(/\r?\n$/, ''), delimiter);
    if (fields === null) return { ok: false, reason: 'malformed CSV: unbalanced quotes' };
    if (fields.length !== schema.length) {
      return { ok: false, reason: `expected ${schema.length} CSV fields (${schema.map((f) => f.name).join(', ')}) but found ${fields.length}` };
    }
    const row = new Array<unknown>(schema.length);
    for (let i = 0; i < schema.length; i++) {
      const text = fields[i]!;
      if (text === '' || !used[i]) { row[i] = null; continue; }
      const value = readers[i]!(text);
      if (value === INVALID) return { ok: false, reason: csvReason(schema[i]!, text) };
      row[i] = value;
    }
    return { ok: true, row };
  };
}
