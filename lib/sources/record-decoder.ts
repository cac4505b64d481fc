/**
 * Turns a Kinesis record's bytes into a row of the query's schema, or a reason it cannot. JSON
 * objects by field name (the default), CSV lines in schema order, or the raw UTF-8 string.
 */
import type { DataType, StructField } from '../plan/data-types.js';
import { parseTimestamp } from '../core/timestamps.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import { createJsonDecoder, type DecodeResult } from './json-decoder.js';
import type { RecordSourceSpec } from './record-format.js';

export type RecordDecoder = (data: Uint8Array) => DecodeResult;

const utf8 = new TextDecoder('utf-8', { fatal: true });

function decodeText(data: Uint8Array): string | null {
  try {
    return utf8.decode(data);
  } catch {
    return null;
  }
}

export function createRecordDecoder(spec: RecordSourceSpec, schema: readonly StructField[]): RecordDecoder {
  const format = spec.format ?? 'json';
  if (format === 'raw') {
    return (data) => {
      const text = decodeText(data);
      return text === null ? { ok: false, reason: 'the record is not valid UTF-8' } : { ok: true, row: [text] };
    };
  }
  const parse = format === 'json'
    ? createJsonDecoder(schema, { numericTimestamps: spec.numericTimestamps ?? 'seconds' })
    : createCsvDecoder(schema, spec.csvDelimiter ?? ',');
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
    case 'int':
    case 'long': return (t) => (/^[+-]?\d+$/.test(t) && Number.isSafeInteger(Number(t)) && (type === 'long' || Math.abs(Number(t)) <= 2 ** 31) ? Number(t) : INVALID);
    case 'double': return (t) => (t.trim() !== '' && Number.isFinite(Number(t)) ? Number(t) : INVALID);
    case 'boolean': return (t) => (/^true$/i.test(t) ? true : /^false$/i.test(t) ? false : INVALID);
    case 'timestamp': return (t) => parseTimestamp(t) ?? INVALID;
    default:
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

function createCsvDecoder(schema: readonly StructField[], delimiter: string): (text: string) => DecodeResult {
  const readers = schema.map((f) => csvReader(f.type));
  return (text) => {
    const fields = splitCsvLine(text.replace(/\r?\n$/, ''), delimiter);
    if (fields === null) return { ok: false, reason: 'malformed CSV: unbalanced quotes' };
    if (fields.length !== schema.length) {
      return { ok: false, reason: `expected ${schema.length} CSV fields (${schema.map((f) => f.name).join(', ')}) but found ${fields.length}` };
    }
    const row = new Array<unknown>(schema.length);
    for (let i = 0; i < schema.length; i++) {
      const text = fields[i]!;
      if (text === '') { row[i] = null; continue; }
      const value = readers[i]!(text);
      if (value === INVALID) return { ok: false, reason: `field ${schema[i]!.name}: '${text}' is not a valid ${String(schema[i]!.type)}` };
      row[i] = value;
    }
    return { ok: true, row };
  };
}
