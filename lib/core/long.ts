/**
 * Spark's `long` (64-bit) as an engine value: a JavaScript number while it is a safe integer
 * (|v| <= 2^53 - 1, the usual case, fast), a bigint beyond. The representation is canonical (a
 * value that fits a safe integer is never a bigint), so `===`, `String(v)` and grouping keys agree
 * for equal values. Arithmetic past the int64 range raises ARITHMETIC_OVERFLOW, as Spark 4 does
 * with ANSI mode on (its default): `Math.addExact` in Add/Subtract/Multiply/UnaryMinus and in the
 * `sum` of longs.
 */
import { AnsiDataError } from './ansi-errors.js';
import { Decimal } from './decimal.js';

export type LongValue = number | bigint;

export const LONG_MIN = -(2n ** 63n);
export const LONG_MAX = 2n ** 63n - 1n;
export const INT_MIN = -(2 ** 31);
export const INT_MAX = 2 ** 31 - 1;

/** Spark's ArithmeticException under ANSI mode: the batch fails, as Spark's query does. */
export class ArithmeticOverflowError extends AnsiDataError {}

export function overflow(type: 'int' | 'long', what: string): ArithmeticOverflowError {
  return new ArithmeticOverflowError(`[ARITHMETIC_OVERFLOW] ${type} overflow in ${what}: the exact result is outside Spark's ${type} range.`, {
    code: 'ARITHMETIC_OVERFLOW', errorClass: 'ARITHMETIC_OVERFLOW', retryable: false,
    hint: type === 'long' ? "cast to double before aggregating, or filter the values that overflow; Spark 4 (ANSI mode) fails the query the same way." : 'cast to long first.',
  });
}

/** The canonical value of an exact integer, or null beyond the int64 range. */
export function longFromBigInt(v: bigint): LongValue | null {
  if (v < LONG_MIN || v > LONG_MAX) return null;
  return v >= -9007199254740991n && v <= 9007199254740991n ? Number(v) : v;
}

function checked(v: bigint, what: string): LongValue {
  const r = longFromBigInt(v);
  if (r === null) throw overflow('long', what);
  return r;
}

const big = (v: LongValue): bigint => (typeof v === 'bigint' ? v : BigInt(v));

/** a + b, exact; ARITHMETIC_OVERFLOW past the int64 range. */
export function addLong(a: LongValue, b: LongValue, what = 'addition'): LongValue {
  if (typeof a === 'number' && typeof b === 'number') {
    const r = a + b;
    // A rounded sum is never a safe integer when the exact one is not (rounding is monotonic).
    if (Number.isSafeInteger(r)) return r;
  }
  return checked(big(a) + big(b), what);
}

export function subtractLong(a: LongValue, b: LongValue): LongValue {
  if (typeof a === 'number' && typeof b === 'number') {
    const r = a - b;
    if (Number.isSafeInteger(r)) return r;
  }
  return checked(big(a) - big(b), 'subtraction');
}

export function multiplyLong(a: LongValue, b: LongValue): LongValue {
  if (typeof a === 'number' && typeof b === 'number') {
    const r = a * b;
    if (Number.isSafeInteger(r)) return r === 0 ? 0 : r; // no -0 among integers
  }
  return checked(big(a) * big(b), 'multiplication');
}

export function negateLong(a: LongValue): LongValue {
  return typeof a === 'number' ? 0 - a : checked(-a, 'negation');
}

/** Java's `%` on longs (truncated), exact; NULL for a zero divisor is the caller's. */
export function remainderLong(a: LongValue, b: LongValue): LongValue {
  if (typeof a === 'number' && typeof b === 'number') return (a % b) + 0;
  return longFromBigInt(big(a) % big(b))!;
}

/** 32-bit int arithmetic: the double result is exact whenever it is in range. */
export function checkedInt(r: number, what: string): number {
  if (r < INT_MIN || r > INT_MAX) throw overflow('int', what);
  return r + 0;
}

/** Decimal digits (`-?\d+`, as JSON and CSV write integers) as a long, or null beyond int64. */
export function parseLongDigits(text: string): LongValue | null {
  if (text.length <= 15) return Number(text);
  return longFromBigInt(BigInt(text));
}

/** Number() of a long, for double arithmetic (rounded, as Spark's long-to-double cast). */
export function longToDouble(v: LongValue): number {
  return typeof v === 'bigint' ? Number(v) : v;
}

/**
 * JSON text of a value that may hold longs beyond 2^53 (bigints), written as bare digits, as
 * Spark writes a long. JSON.stringify alone throws on a bigint; values without one take it as is.
 */
export function stringifyWithLongs(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
    return writeJson(value) ?? 'null';
  }
}

function writeJson(v: unknown): string | undefined {
  if (typeof v === 'bigint') return String(v);
  // A Decimal (lib/core/decimal.ts) holds a bigint, so it lands here: its exact digits as a JSON number.
  if (v instanceof Decimal) return v.toString();
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map((x) => writeJson(x) ?? 'null').join(',')}]`;
  const toJson = (v as { toJSON?: () => unknown }).toJSON;
  if (typeof toJson === 'function') return writeJson(toJson.call(v));
  const parts: string[] = [];
  for (const key of Object.keys(v)) {
    const text = writeJson((v as Record<string, unknown>)[key]);
    if (text !== undefined) parts.push(`${JSON.stringify(key)}:${text}`);
  }
  return `{${parts.join(',')}}`;
}

const LONG_TAG = '\u0000long';
const DECIMAL_TAG = '\u0000decimal';
const BINARY_TAG = '\u0000binary';
const MAP_TAG = '\u0000map';

/**
 * JSON.stringify replacer for engine values in transit (repartition records): a bigint, a decimal
 * (`[scale, unscaled digits]`), binary (base64) and a map (its entries) as tagged objects.
 */
export function longReplacer(_key: string, v: unknown): unknown {
  if (typeof v === 'bigint') return { [LONG_TAG]: String(v) };
  if (v instanceof Decimal) return { [DECIMAL_TAG]: [v.scale, String(v.unscaled)] };
  if (v instanceof Uint8Array) return { [BINARY_TAG]: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') };
  if (v instanceof Map) return { [MAP_TAG]: [...v.entries()] };
  return v;
}

/** Whether JSON text may hold a tagged value (`longReplacer`'s tags all start with a NUL). */
export function mayHoldTaggedValues(text: string): boolean {
  return text.includes('\\u0000');
}

/** JSON.parse reviver undoing `longReplacer` (it runs inside out, so map entries arrive revived). */
export function longReviver(_key: string, v: unknown): unknown {
  if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 1) {
    const o = v as Record<string, unknown>;
    if (typeof o[LONG_TAG] === 'string') return BigInt(o[LONG_TAG]);
    const decimal = o[DECIMAL_TAG];
    if (Array.isArray(decimal) && decimal.length === 2) return new Decimal(BigInt(decimal[1] as string), decimal[0] as number);
    if (typeof o[BINARY_TAG] === 'string') return new Uint8Array(Buffer.from(o[BINARY_TAG], 'base64'));
    if (Array.isArray(o[MAP_TAG])) return new Map(o[MAP_TAG] as [unknown, unknown][]);
  }
  return v;
}

const LONG_TEXT_TAG = '\u0000long:';

/**
 * JSON.parse that keeps integers beyond 2^53 exact (as canonical longs: a bigint within int64, a
 * rounded number past it), where JSON.parse alone rounds them; the reverse of `stringifyWithLongs`.
 * Text without a run of 16 digits takes JSON.parse as is.
 */
export function parseJsonWithLongs(text: string): unknown {
  if (!/\d{16}/.test(text)) return JSON.parse(text);
  let out = '';
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      out += c;
      if (c === '\\') out += text[++i] ?? '';
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') { inString = true; out += c; continue; }
    const number = c === '-' || (c >= '0' && c <= '9') ? /^-?\d+(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400)) : null;
    if (!number) { out += c; continue; }
    const token = number[0];
    const isLongInteger = number[1] === undefined && number[2] === undefined && token.replace('-', '').length > 15;
    out += isLongInteger ? JSON.stringify(`${LONG_TEXT_TAG}${token}`) : token;
    i += token.length - 1;
  }
  return JSON.parse(out, (_key, v: unknown) => {
    if (typeof v !== 'string' || !v.startsWith(LONG_TEXT_TAG)) return v;
    const digits = v.slice(LONG_TEXT_TAG.length);
    return parseLongDigits(digits) ?? Number(digits);
  });
}
