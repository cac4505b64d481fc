import { typeToString, type DataType, type StructField } from '../plan/data-types.js';
import { isTimeWithoutDate, parseTimestamp, parseTimestampUnbounded, TIME_WITHOUT_DATE_TEXT, TIMESTAMP_RANGE_TEXT } from '../core/timestamps.js';
import { parseDecimal, toPrecision, type Decimal } from '../core/decimal.js';
import { parseDate } from '../core/dates.js';
import { JsonLayoutCache } from './json-layout-decoder.js';
import { INT_MAX, INT_MIN, parseLongDigits } from '../core/long.js';

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
const hasOwn = Object.prototype.hasOwnProperty;

/**
 * JSON.parse rounds an integer beyond 2^53. Before parsing a record that has one (16+ digits), such
 * literals are quoted with this prefix (a NUL and a per-process nonce no record can guess), so the
 * readers get the exact digits: a long keeps them all, a double rounds them as JSON.parse would.
 */
const BIG_INTEGER = `\u0000${globalThis.crypto.randomUUID().slice(0, 8)}:`;
const BIG_INTEGER_ESCAPED = `\\u0000${BIG_INTEGER.slice(1)}`;
const TOKENS = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;

function protectBigIntegers(text: string): string {
  if (!/\d{16}/.test(text)) return text;
  return text.replace(TOKENS, (token) => (token.length >= 16 && /^-?\d{16,}$/.test(token) ? `"${BIG_INTEGER_ESCAPED}${token}"` : token));
}

/**
 * With a decimal field, every number of 16+ characters is protected (fractions too): a double
 * holds 15 significant digits exactly, a decimal up to 38. The other readers see it as before.
 */
function protectLongNumbers(text: string): string {
  if (!/[\d.]{16}/.test(text)) return text;
  return text.replace(TOKENS, (token) => (token.length >= 16 && token[0] !== '"' ? `"${BIG_INTEGER_ESCAPED}${token}"` : token));
}

function hasDecimal(type: DataType): boolean {
  if (typeof type === 'string') return false;
  if (type.kind === 'decimal') return true;
  if (type.kind === 'array') return hasDecimal(type.element);
  if (type.kind === 'map') return hasDecimal(type.value);
  return type.fields.some((f) => hasDecimal(f.type));
}

/** A JSON value as a decimal(p, s): a number (its exact text when protected) or a decimal string. */
function readDecimal(v: unknown, precision: number, scale: number): Decimal | typeof INVALID {
  const text = bigIntegerDigits(v) ?? (typeof v === 'number' ? String(v) : typeof v === 'string' ? v : null);
  const parsed = text === null ? null : parseDecimal(text);
  return (parsed && toPrecision(parsed, precision, scale)) ?? INVALID;
}

/** Spark's JSON reader takes binary as a base64 string. */
function readBase64(v: unknown): Uint8Array | typeof INVALID {
  if (typeof v !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(v) || v.length % 4 === 1) return INVALID;
  return new Uint8Array(Buffer.from(v, 'base64'));
}

/** The digits of a protected integer, or null for any other value. */
function bigIntegerDigits(v: unknown): string | null {
  return typeof v === 'string' && v.startsWith(BIG_INTEGER) ? v.slice(BIG_INTEGER.length) : null;
}

/** A protected integer back as JSON.parse would have read it (for the readers of other types). */
function plainNumber(v: unknown): unknown {
  const digits = bigIntegerDigits(v);
  return digits === null ? v : Number(digits);
}

function timestampScale(unit: NumericTimestamps): number {
  return unit === 'seconds' ? 1_000_000 : unit === 'millis' ? 1_000 : 1;
}

function readerFor(type: DataType, numericTimestamps: NumericTimestamps): FieldReader {
  const scale = timestampScale(numericTimestamps);
  switch (type) {
    case 'int':
      return (v) => (typeof v === 'number' && Number.isInteger(v) && v >= INT_MIN && v <= INT_MAX ? v : INVALID);
    case 'long':
      return (v) => {
        if (typeof v === 'number') return Number.isSafeInteger(v) ? v : INVALID;
        const digits = bigIntegerDigits(v);
        return digits === null || !/^-?\d+$/.test(digits) ? INVALID : parseLongDigits(digits) ?? INVALID;
      };
    case 'double':
      // 1e400 is Infinity to JSON.parse: out of range, as Spark's parser says, not a value.
      return (v) => {
        const n = plainNumber(v);
        return typeof n === 'number' && Number.isFinite(n) ? n : INVALID;
      };
    case 'string':
      return (v) => {
        if (typeof v === 'string') return bigIntegerDigits(v) ?? v;
        return typeof v === 'number' || typeof v === 'boolean' ? String(v) : INVALID;
      };
    case 'boolean':
      return (v) => (typeof v === 'boolean' ? v : INVALID);
    case 'timestamp':
      return (raw) => {
        const v = plainNumber(raw);
        if (typeof v === 'number') {
          const micros = Math.round(v * scale);
          return Number.isSafeInteger(micros) ? micros : INVALID;
        }
        if (typeof v === 'string') return parseTimestamp(v) ?? INVALID;
        return INVALID;
      };
    case 'date':
      return (v) => (typeof v === 'string' ? parseDate(v) ?? INVALID : INVALID);
    case 'binary':
      return readBase64;
    case 'null':
    case 'interval':
      return () => INVALID;
    default:
      if (type.kind === 'decimal') {
        const { precision, scale: decimalScale } = type;
        return (v) => readDecimal(v, precision, decimalScale);
      }
      if (type.kind === 'map') {
        if (type.key !== 'string') return () => INVALID;
        const value = readerFor(type.value, numericTimestamps);
        return (v) => {
          if (v === null || typeof v !== 'object' || Array.isArray(v)) return INVALID;
          const out = new Map<string, unknown>();
          for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
            const r = x === null ? null : value(x);
            if (r === INVALID) return INVALID;
            out.set(k, r);
          }
          return out;
        };
      }
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
  if (bigIntegerDigits(v) !== null) return 'a number';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  return `a ${typeof v}`;
}

function show(v: unknown): string {
  const text = bigIntegerDigits(v) ?? (typeof v === 'number' && !Number.isFinite(v) ? `${v} (the number overflows a double)` : JSON.stringify(v));
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** Why `read` refused `v`: the path of the offending value and what is wrong with it. */
function explain(type: DataType, v: unknown, path: string, numericTimestamps: NumericTimestamps): string {
  const expected = typeToString(type);
  const wrongType = (): string => `field '${path}' should be ${expected} but is ${kindOf(v)}: ${show(v)}`;
  const outOfRange = (range: string): string => `field '${path}' is out of range for ${expected}: ${show(v)} (${range})`;
  switch (type) {
    case 'int':
    case 'long': {
      const n = plainNumber(v);
      if (typeof n !== 'number') return wrongType();
      if (!Number.isInteger(n) && Number.isFinite(n)) return `field '${path}' should be ${expected} but is a fractional number: ${show(v)}`;
      if (type === 'int' || bigIntegerDigits(v) !== null || !(Math.abs(n) < 2 ** 63)) return outOfRange(type === 'int' ? `${INT_MIN} to ${INT_MAX}` : '-2^63 to 2^63-1');
      return `field '${path}' is a long written with a fraction or exponent beyond ±2^53-1, which is not exact: ${show(v)}`;
    }
    case 'double':
      if (typeof plainNumber(v) === 'number') return outOfRange('a finite double, magnitude below 1.8e308');
      return wrongType();
    case 'timestamp':
      if (typeof v === 'number') {
        return `field '${path}' is out of range for timestamp: ${show(v)} (read as ${numericTimestamps} since the epoch; ${TIMESTAMP_RANGE_TEXT})`;
      }
      if (typeof v === 'string') {
        if (parseTimestampUnbounded(v) !== null) return `field '${path}' is outside the timestamp range held exactly (${TIMESTAMP_RANGE_TEXT}): ${show(v)}`;
        if (isTimeWithoutDate(v)) return `field '${path}' is a time without a date: ${show(v)} (${TIME_WITHOUT_DATE_TEXT})`;
        return `field '${path}' should be timestamp but ${show(v)} is not a valid time (Spark's forms: yyyy[-m[-d]][T|space h[:m[:s[.fraction]]]][zone])`;
      }
      return wrongType();
    case 'null':
    case 'interval':
      return `field '${path}' has type ${expected}, which JSON records cannot carry`;
    case 'date':
      if (typeof v === 'string') return `field '${path}' should be date but ${show(v)} is not a valid 'yyyy-MM-dd' date`;
      return wrongType();
    case 'binary':
      if (typeof v === 'string') return `field '${path}' should be binary (a base64 string) but ${show(v)} is not base64`;
      return wrongType();
    case 'string':
    case 'boolean':
      return wrongType();
    default:
      if (type.kind === 'decimal') {
        const text = bigIntegerDigits(v) ?? (typeof v === 'number' || typeof v === 'string' ? String(v) : null);
        if (text === null) return wrongType();
        if (parseDecimal(text) === null) return `field '${path}' should be ${expected} but ${show(v)} is not a decimal number`;
        return outOfRange(`at most ${type.precision - type.scale} integral digits`);
      }
      if (type.kind === 'map') {
        if (type.key !== 'string') return `field '${path}' has type ${expected}: JSON object keys are strings, so a map read from JSON needs string keys`;
        if (v === null || typeof v !== 'object' || Array.isArray(v)) return wrongType();
        for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
          if (x !== null && readerFor(type.value, numericTimestamps)(x) === INVALID) return explain(type.value, x, `${path}.${k}`, numericTimestamps);
        }
        return wrongType();
      }
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
  const parse = createJsonParseDecoder(schema, options);
  const fast = createFastPath(schema, options);
  if (fast === null) return parse;
  const { layouts, learn } = fast;
  return (text) => {
    const row = layouts.decode(text) ?? learn(text);
    return row !== null ? { ok: true, row } : parse(text);
  };
}

/**
 * As `createJsonDecoder`, for the engine's own scans: the row, or the reason as a string, so the
 * usual record costs no result object. A record of a known layout is read with no call in
 * between (each layer of closures cost about a sixth of the decoding).
 */
export function createJsonRowDecoder(schema: readonly StructField[], options: JsonDecoderOptions = {}): (text: string) => unknown[] | string {
  const parse = createJsonParseDecoder(schema, options);
  const slowPath = (text: string): unknown[] | string => {
    const result = parse(text);
    return result.ok ? result.row : result.reason;
  };
  const fast = createFastPath(schema, options);
  if (fast === null) return slowPath;
  const { layouts, learn } = fast;
  return (text) => layouts.decode(text) ?? learn(text) ?? slowPath(text);
}

interface FastPath {
  /** The records of layouts seen before. */
  readonly layouts: JsonLayoutCache;
  /** Any other record through the scanner, whose record teaches its layout; null: not sure, fall back. */
  readonly learn: (text: string) => unknown[] | null;
}

/**
 * The row of a usual record without JSON.parse, or null: first the layouts of earlier records
 * (one regular expression each), then the scanner, whose record teaches its layout.
 */
function createFastPath(schema: readonly StructField[], options: JsonDecoderOptions): FastPath | null {
  const scanner = FlatRecordScanner.create(schema, options);
  if (scanner === null) return null;
  const fields = usedFields(schema, options);
  const layouts = new JsonLayoutCache(fields, schema.length, timestampScale(options.numericTimestamps ?? 'seconds'));
  const keys: string[] = [];
  const learn = (text: string): unknown[] | null => {
    const row = scanner.scan(text, keys);
    if (row !== null) layouts.learn(keys);
    return row;
  };
  return { layouts, learn };
}

interface UsedField {
  readonly name: string;
  readonly index: number;
  readonly type: DataType;
}

function usedFields(schema: readonly StructField[], options: JsonDecoderOptions): UsedField[] {
  const wanted = options.onlyFields ? new Set(options.onlyFields.map((f) => f.toLowerCase())) : null;
  return schema
    .map((f, index) => ({ name: f.name, index, type: f.type }))
    .filter((f) => wanted === null || wanted.has(f.name.toLowerCase()));
}

/**
 * The reference decoder: JSON.parse, then each used field read from the object. Gives the reason
 * for every failure; `createJsonDecoder` falls back to it whenever its scanner is not sure.
 * @internal exported for tests
 */
export function createJsonParseDecoder(schema: readonly StructField[], options: JsonDecoderOptions = {}): (text: string) => DecodeResult {
  const numericTimestamps = options.numericTimestamps ?? 'seconds';
  const fields = usedFields(schema, options);
  const names = fields.map((f) => f.name);
  const protect = fields.some((f) => hasDecimal(f.type)) ? protectLongNumbers : protectBigIntegers;
  const readers = fields.map((f) => readerFor(f.type, numericTimestamps));
  const indexes = fields.map((f) => f.index);
  const count = fields.length;
  const width = schema.length;
  return (text) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(protect(text));
    } catch {
      try {
        JSON.parse(text);
      } catch (error) {
        return { ok: false, reason: `malformed JSON: ${(error as Error).message}` };
      }
      return { ok: false, reason: 'malformed JSON' };
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

/** A backslash (escapes) or a control character (newlines, tabs, or invalid) anywhere in the text. */
const NOT_FLAT = /[\u0000-\u001f\\]/;
/** Exact powers of ten: at most 15 decimal digits divided by one is a correctly rounded double. */
const POW10 = Array.from({ length: 23 }, (_, k) => 10 ** k);

const enum Kind { String, Int, Long, Double, Boolean, Timestamp, Other }

function kindOfType(type: DataType): Kind {
  switch (type) {
    case 'string': return Kind.String;
    case 'int': return Kind.Int;
    case 'long': return Kind.Long;
    case 'double': return Kind.Double;
    case 'boolean': return Kind.Boolean;
    case 'timestamp': return Kind.Timestamp;
    default: return Kind.Other;
  }
}

/**
 * The fast path for the usual record: one compact JSON object (no escapes, no newlines or tabs)
 * whose values are strings, numbers, booleans or null. Reads the used fields straight into the
 * row without building the object. Anything else (an escape, a nested value, a value of the wrong
 * type for its field, malformed or trailing text) returns null, and the caller decodes the record
 * with JSON.parse instead, so rows and failure reasons are always the reference decoder's. Numbers
 * are read as JSON.parse reads them: up to 15 digits over an exact power of ten (Clinger's fast
 * path, correctly rounded), otherwise Number() of the literal.
 */
class FlatRecordScanner {
  private constructor(
    private readonly names: readonly string[],
    private readonly kinds: readonly Kind[],
    private readonly indexes: readonly number[],
    private readonly width: number,
    private readonly scale: number,
  ) {}

  /** Null when the schema has duplicate used names (JSON.parse semantics are then simpler to keep). */
  static create(schema: readonly StructField[], options: JsonDecoderOptions): FlatRecordScanner | null {
    const fields = usedFields(schema, options);
    if (new Set(fields.map((f) => f.name)).size !== fields.length) return null;
    return new FlatRecordScanner(
      fields.map((f) => f.name),
      fields.map((f) => kindOfType(f.type)),
      fields.map((f) => f.index),
      schema.length,
      timestampScale(options.numericTimestamps ?? 'seconds'),
    );
  }

  /** The row, or null to fall back; `keys` (if given) receives the record's keys in order. */
  scan(text: string, keys?: string[]): unknown[] | null {
    if (NOT_FLAT.test(text)) return null;
    if (keys) keys.length = 0;
    const n = text.length;
    let i = 0;
    while (text.charCodeAt(i) === 0x20) i++;
    if (text.charCodeAt(i) !== 0x7b /* { */) return null;
    const row = new Array<unknown>(this.width);
    for (let k = 0; k < this.width; k++) row[k] = null;
    i++;
    while (text.charCodeAt(i) === 0x20) i++;
    if (text.charCodeAt(i) === 0x7d /* } */) {
      i++;
    } else {
      for (;;) {
        if (text.charCodeAt(i) !== 0x22 /* " */) return null;
        const keyEnd = text.indexOf('"', i + 1);
        if (keyEnd < 0) return null;
        const f = this.fieldAt(text, i + 1, keyEnd - i - 1);
        if (keys) keys.push(text.slice(i + 1, keyEnd));
        i = keyEnd + 1;
        while (text.charCodeAt(i) === 0x20) i++;
        if (text.charCodeAt(i) !== 0x3a /* : */) return null;
        i++;
        while (text.charCodeAt(i) === 0x20) i++;
        i = this.value(text, i, f, row);
        if (i < 0) return null;
        while (text.charCodeAt(i) === 0x20) i++;
        const c = text.charCodeAt(i);
        i++;
        if (c === 0x7d /* } */) break;
        if (c !== 0x2c /* , */) return null;
        while (text.charCodeAt(i) === 0x20) i++;
      }
    }
    while (text.charCodeAt(i) === 0x20) i++;
    return i === n ? row : null;
  }

  /** The used field named text[start, start + length), or -1. */
  private fieldAt(text: string, start: number, length: number): number {
    const names = this.names;
    next: for (let f = 0; f < names.length; f++) {
      const name = names[f]!;
      if (name.length !== length) continue;
      for (let k = 0; k < length; k++) if (name.charCodeAt(k) !== text.charCodeAt(start + k)) continue next;
      return f;
    }
    return -1;
  }

  /** Reads the value at `i` (into the row if `f` is a used field); its end, or -1 to fall back. */
  private value(text: string, i: number, f: number, row: unknown[]): number {
    const c = text.charCodeAt(i);
    const kind = f < 0 ? Kind.Other : this.kinds[f]!;
    if (c === 0x22 /* " */) {
      const end = text.indexOf('"', i + 1);
      if (end < 0) return -1;
      if (f >= 0) {
        if (kind === Kind.String) {
          // V8 slices strings of 13+ characters: a slice kept in state would keep the whole record.
          row[this.indexes[f]!] = end - i - 1 < 13 ? text.slice(i + 1, end) : (JSON.parse(text.slice(i, end + 1)) as string);
        } else if (kind === Kind.Timestamp) {
          const micros = parseTimestamp(text.slice(i + 1, end));
          if (micros === null) return -1;
          row[this.indexes[f]!] = micros;
        } else {
          return -1;
        }
      }
      return end + 1;
    }
    if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
      const start = i;
      let d = c;
      const negative = d === 0x2d;
      if (negative) d = text.charCodeAt(++i);
      let mantissa = 0;
      let digits = 0;
      if (d === 0x30) {
        d = text.charCodeAt(++i);
      } else if (d >= 0x31 && d <= 0x39) {
        do {
          mantissa = mantissa * 10 + (d - 0x30);
          digits++;
          d = text.charCodeAt(++i);
        } while (d >= 0x30 && d <= 0x39);
      } else {
        return -1;
      }
      let fraction = 0;
      if (d === 0x2e /* . */) {
        d = text.charCodeAt(++i);
        if (!(d >= 0x30 && d <= 0x39)) return -1;
        do {
          mantissa = mantissa * 10 + (d - 0x30);
          digits++;
          fraction++;
          d = text.charCodeAt(++i);
        } while (d >= 0x30 && d <= 0x39);
      }
      let exact = digits <= 15;
      let integer = fraction === 0;
      if (d === 0x65 || d === 0x45 /* e E */) {
        exact = false;
        integer = false;
        d = text.charCodeAt(++i);
        if (d === 0x2b || d === 0x2d) d = text.charCodeAt(++i);
        if (!(d >= 0x30 && d <= 0x39)) return -1;
        do d = text.charCodeAt(++i); while (d >= 0x30 && d <= 0x39);
      }
      if (f < 0) return i;
      if (integer && !exact) {
        // 16+ digits: a long takes them exactly; a string column its digits (the reference decoder's).
        if (kind === Kind.String) return -1;
        if (kind === Kind.Long) {
          const long = parseLongDigits(text.slice(start, i));
          if (long === null) return -1;
          row[this.indexes[f]!] = long;
          return i;
        }
      }
      let v: number;
      if (exact) {
        v = fraction === 0 ? mantissa : mantissa / POW10[fraction]!;
        if (negative) v = -v;
      } else {
        v = Number(text.slice(start, i));
      }
      switch (kind) {
        case Kind.Double:
          if (!Number.isFinite(v)) return -1;
          break;
        case Kind.Long:
          if (!Number.isSafeInteger(v)) return -1;
          break;
        case Kind.Int:
          if (!Number.isInteger(v) || v < INT_MIN || v > INT_MAX) return -1;
          break;
        case Kind.Timestamp:
          v = Math.round(v * this.scale);
          if (!Number.isSafeInteger(v)) return -1;
          break;
        case Kind.String:
          row[this.indexes[f]!] = String(v);
          return i;
        default:
          return -1;
      }
      row[this.indexes[f]!] = v;
      return i;
    }
    if (c === 0x6e /* n */) {
      if (!text.startsWith('null', i)) return -1;
      if (f >= 0) row[this.indexes[f]!] = null; // a repeated key: the last value wins, as in JSON.parse
      return i + 4;
    }
    if (c === 0x74 /* t */ || c === 0x66 /* f */) {
      const value = c === 0x74;
      const end = value ? (text.startsWith('true', i) ? i + 4 : -1) : (text.startsWith('false', i) ? i + 5 : -1);
      if (end < 0 || f < 0) return end;
      if (kind === Kind.Boolean) row[this.indexes[f]!] = value;
      else if (kind === Kind.String) row[this.indexes[f]!] = value ? 'true' : 'false';
      else return -1;
      return end;
    }
    return -1;
  }
}
