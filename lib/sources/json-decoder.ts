import { typeToString, type DataType, type StructField } from '../plan/data-types.js';
import { parseTimestamp } from '../execution/values.js';

export type DecodeResult = { readonly ok: true; readonly row: unknown[] } | { readonly ok: false; readonly reason: string };

export interface JsonDecoderOptions {
  /** How a JSON number in a timestamp field is read; strings are always ISO-8601 / `yyyy-MM-dd HH:mm:ss`. */
  readonly numericTimestamps?: 'seconds' | 'millis' | 'micros';
  /** Decode only these fields (the others become NULL): the query's used columns. */
  readonly onlyFields?: readonly string[];
}

type NumericTimestamps = 'seconds' | 'millis' | 'micros';
/** Reads one non-NULL JSON value, or returns INVALID; `explain` then says why (the slow path). */
type FieldReader = (value: unknown) => unknown;
const INVALID = Symbol('invalid');
const INT_MIN = -(2 ** 31);
const INT_MAX = 2 ** 31 - 1;
/** Spark's LongType range; a JSON number beyond ±2^53 can be in it but is no longer exact here. */
const LONG_LIMIT = 2 ** 63;
const hasOwn = Object.prototype.hasOwnProperty;

function timestampScale(unit: NumericTimestamps): number {
  return unit === 'seconds' ? 1_000_000 : unit === 'millis' ? 1_000 : 1;
}

function readerFor(type: DataType, numericTimestamps: NumericTimestamps): FieldReader {
  const scale = timestampScale(numericTimestamps);
  switch (type) {
    case 'int':
      return (v) => (typeof v === 'number' && Number.isInteger(v) && v >= INT_MIN && v <= INT_MAX ? v : INVALID);
    case 'long':
      return (v) => (typeof v === 'number' && Number.isSafeInteger(v) ? v : INVALID);
    case 'double':
      return (v) => (typeof v === 'number' ? v : INVALID);
    case 'string':
      return (v) => (typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : INVALID);
    case 'boolean':
      return (v) => (typeof v === 'boolean' ? v : INVALID);
    case 'timestamp':
      return (v) => {
        if (typeof v === 'number') {
          const micros = Math.round(v * scale);
          return Number.isSafeInteger(micros) ? micros : INVALID;
        }
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
          const out = new Array<unknown>(v.length);
          for (let i = 0; i < v.length; i++) {
            const x = v[i];
            if (x === null) {
              out[i] = null;
              continue;
            }
            const r = element(x);
            if (r === INVALID) return INVALID;
            out[i] = r;
          }
          return out;
        };
      }
      {
        const fields = type.fields.map((f) => [f.name, readerFor(f.type, numericTimestamps)] as const);
        return (v) => {
          if (v === null || typeof v !== 'object' || Array.isArray(v)) return INVALID;
          const out: Record<string, unknown> = {};
          for (const [name, read] of fields) {
            const x = hasOwn.call(v, name) ? (v as Record<string, unknown>)[name] : null;
            const r = x === undefined || x === null ? null : read(x);
            if (r === INVALID) return INVALID;
            if (name === '__proto__') Object.defineProperty(out, name, { value: r, enumerable: true, writable: true, configurable: true });
            else out[name] = r;
          }
          return out;
        };
      }
  }
}

function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  return `a ${typeof v}`;
}

function show(v: unknown): string {
  const text = JSON.stringify(v);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** Why `read` refused `v`: the path of the offending value and what is wrong with it. */
function explain(type: DataType, v: unknown, path: string, numericTimestamps: NumericTimestamps): string {
  const expected = typeToString(type);
  const wrongType = (): string => `field '${path}' should be ${expected} but is ${kindOf(v)}: ${show(v)}`;
  switch (type) {
    case 'int':
    case 'long':
      if (typeof v !== 'number') return wrongType();
      if (!Number.isInteger(v)) return `field '${path}' should be ${expected} but is a fractional number: ${show(v)}`;
      if (type === 'int' || Math.abs(v) >= LONG_LIMIT) {
        return `field '${path}' is out of range for ${expected}: ${show(v)} (${type === 'int' ? `${INT_MIN} to ${INT_MAX}` : '-2^63 to 2^63-1'})`;
      }
      return `field '${path}' is a long beyond ±2^53-1 that cannot be held exactly (JavaScript numbers): ${show(v)}`;
    case 'timestamp':
      if (typeof v === 'number') {
        return `field '${path}' is out of range for timestamp: ${show(v)} (read as ${numericTimestamps} since the epoch)`;
      }
      if (typeof v === 'string') {
        return `field '${path}' should be timestamp but ${show(v)} is not a valid ISO-8601 or 'yyyy-MM-dd HH:mm:ss[.SSSSSS]' time`;
      }
      return wrongType();
    case 'null':
    case 'interval':
      return `field '${path}' has type ${expected}, which JSON records cannot carry`;
    case 'double':
    case 'string':
    case 'boolean':
      return wrongType();
    default:
      if (type.kind === 'array') {
        if (!Array.isArray(v)) return wrongType();
        const element = readerFor(type.element, numericTimestamps);
        for (let i = 0; i < v.length; i++) {
          if (v[i] !== null && element(v[i]) === INVALID) return explain(type.element, v[i], `${path}[${i}]`, numericTimestamps);
        }
        return wrongType();
      }
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return wrongType();
      for (const f of type.fields) {
        const x = hasOwn.call(v, f.name) ? (v as Record<string, unknown>)[f.name] : null;
        if (x !== null && x !== undefined && readerFor(f.type, numericTimestamps)(x) === INVALID) {
          return explain(f.type, x, `${path}.${f.name}`, numericTimestamps);
        }
      }
      return wrongType();
  }
}

/**
 * Decodes one JSON object per record into a positional row of the schema. A record that is not
 * JSON, not an object, or has a field of the wrong type is reported with the reason (the runtime
 * routes it to the dead-letter location); a missing field is NULL, as in Spark's JSON reader.
 * Integers must fit the field (int: 32-bit; long: exactly representable, ±2^53-1); numeric
 * timestamps are read in `numericTimestamps` units (seconds by default, as Spark).
 */
export function createJsonDecoder(schema: readonly StructField[], options: JsonDecoderOptions = {}): (text: string) => DecodeResult {
  const wanted = options.onlyFields ? new Set(options.onlyFields.map((f) => f.toLowerCase())) : null;
  const numericTimestamps = options.numericTimestamps ?? 'seconds';
  const fields = schema.map((f, i) => ({
    name: f.name,
    index: i,
    type: f.type,
    read: readerFor(f.type, numericTimestamps),
    used: wanted === null || wanted.has(f.name.toLowerCase()),
  })).filter((f) => f.used);
  const names = fields.map((f) => f.name);
  const readers = fields.map((f) => f.read);
  const indexes = fields.map((f) => f.index);
  const count = fields.length;
  const width = schema.length;
  return (text) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      return { ok: false, reason: `malformed JSON: ${(error as Error).message}` };
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      return { ok: false, reason: `the record is not a JSON object but ${kindOf(parsed)}: ${show(parsed)}` };
    }
    const row = new Array<unknown>(width);
    for (let i = 0; i < width; i++) row[i] = null;
    for (let i = 0; i < count; i++) {
      const v = (parsed as Record<string, unknown>)[names[i]!];
      if (v === undefined || v === null) continue;
      // Only an object or function can come from Object.prototype (`constructor`, `toString`...).
      if (typeof v === 'object' || typeof v === 'function') {
        if (!hasOwn.call(parsed, names[i]!)) continue;
      }
      const r = readers[i]!(v);
      if (r === INVALID) {
        const f = fields[i]!;
        return { ok: false, reason: explain(f.type, v, f.name, numericTimestamps) };
      }
      row[indexes[i]!] = r;
    }
    return { ok: true, row };
  };
}
