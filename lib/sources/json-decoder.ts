import type { DataType, StructField } from '../plan/data-types.js';
import { parseTimestamp } from '../execution/values.js';

export type DecodeResult = { readonly ok: true; readonly row: unknown[] } | { readonly ok: false; readonly reason: string };

export interface JsonDecoderOptions {
  /** How a JSON number in a timestamp field is read; strings are always ISO-8601 / `yyyy-MM-dd HH:mm:ss`. */
  readonly numericTimestamps?: 'seconds' | 'millis' | 'micros';
  /** Decode only these fields (the others become NULL): the query's used columns. */
  readonly onlyFields?: readonly string[];
}

type FieldReader = (value: unknown) => unknown;
const INVALID = Symbol('invalid');

function readerFor(type: DataType, numericTimestamps: 'seconds' | 'millis' | 'micros'): FieldReader {
  const scale = numericTimestamps === 'seconds' ? 1_000_000 : numericTimestamps === 'millis' ? 1_000 : 1;
  switch (type) {
    case 'int':
    case 'long':
      return (v) => (typeof v === 'number' && Number.isInteger(v) ? v : INVALID);
    case 'double':
      return (v) => (typeof v === 'number' ? v : INVALID);
    case 'string':
      return (v) => (typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : INVALID);
    case 'boolean':
      return (v) => (typeof v === 'boolean' ? v : INVALID);
    case 'timestamp':
      return (v) => {
        if (typeof v === 'number') return Math.round(v * scale);
        if (typeof v === 'string') return parseTimestamp(v) ?? INVALID;
        return INVALID;
      };
    case 'null':
    case 'interval':
      return () => INVALID;
    default:
      if (type.kind === 'array') {
        const element = readerFor(type.element, numericTimestamps);
        return (v) => {
          if (!Array.isArray(v)) return INVALID;
          const out = v.map((x) => (x === null ? null : element(x)));
          return out.includes(INVALID) ? INVALID : out;
        };
      }
      {
        const fields = type.fields.map((f) => [f.name, readerFor(f.type, numericTimestamps)] as const);
        return (v) => {
          if (v === null || typeof v !== 'object' || Array.isArray(v)) return INVALID;
          const out: Record<string, unknown> = {};
          for (const [name, read] of fields) {
            const x = (v as Record<string, unknown>)[name];
            const r = x === undefined || x === null ? null : read(x);
            if (r === INVALID) return INVALID;
            out[name] = r;
          }
          return out;
        };
      }
  }
}

/**
 * Decodes one JSON object per record into a positional row of the schema. A record that is not
 * JSON, not an object, or has a field of the wrong type is reported with the reason (the runtime
 * routes it to the dead-letter location); a missing field is NULL, as in Spark's JSON reader.
 */
export function createJsonDecoder(schema: readonly StructField[], options: JsonDecoderOptions = {}): (text: string) => DecodeResult {
  const wanted = options.onlyFields ? new Set(options.onlyFields.map((f) => f.toLowerCase())) : null;
  const fields = schema.map((f, i) => ({
    name: f.name,
    index: i,
    type: f.type,
    read: readerFor(f.type, options.numericTimestamps ?? 'seconds'),
    used: wanted === null || wanted.has(f.name.toLowerCase()),
  })).filter((f) => f.used);
  const width = schema.length;
  return (text) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      return { ok: false, reason: `malformed JSON: ${(error as Error).message}` };
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      return { ok: false, reason: 'the record is not a JSON object' };
    }
    const obj = parsed as Record<string, unknown>;
    const row = new Array<unknown>(width).fill(null);
    for (const f of fields) {
      const v = obj[f.name];
      if (v === undefined || v === null) continue;
      const r = f.read(v);
      if (r === INVALID) {
        return { ok: false, reason: `field '${f.name}' should be ${typeof f.type === 'string' ? f.type : f.type.kind} but is ${JSON.stringify(v).slice(0, 60)}` };
      }
      row[f.index] = r;
    }
    return { ok: true, row };
  };
}
