import type { DataType } from '../plan/data-types.js';
import { compareDecimals, Decimal } from '../core/decimal.js';
/** Value helpers for expression evaluation and grouping (timestamp text codecs: lib/core/timestamps.ts). */

/**
 * A string that identifies a grouping key: equal values give equal strings. Numbers, strings,
 * booleans, NULL, structs and arrays are all covered; used as a Map key.
 */
export function encodeKey(values: readonly unknown[]): string {
  if (values.length === 1) {
    const v = values[0];
    if (typeof v === 'string') return `s${v}`;
    // A long beyond 2^53 is a bigint, never equal to a number (the representation is canonical).
    if (typeof v === 'number' || typeof v === 'bigint') return `n${v}`;
  }
  return JSON.stringify(values, keepNonFiniteNumbers);
}

/**
 * JSON writes NaN and ±Infinity as null and cannot write bigints: keep them apart from NULL and each
 * other. A decimal is keyed by its value (1.50 = 1.5, as Spark compares them), binary by its bytes,
 * a map by its entries.
 */
function keepNonFiniteNumbers(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return { '\u0000number': String(value) };
  if (value instanceof Decimal) return { '\u0000decimal': stripTrailingZeros(value) };
  if (value instanceof Uint8Array) return { '\u0000binary': Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') };
  if (value instanceof Map) return { '\u0000map': [...value.entries()] };
  return typeof value === 'number' && !Number.isFinite(value) ? { '\u0000number': String(value) } : value;
}

/** Total order used by sorting and min/max: NULLs first, then numbers, strings, booleans. */
export function compareValues(a: unknown, b: unknown): number {
  if (a === b) return 0;
  if (a === null || a === undefined) return -1;
  if (b === null || b === undefined) return 1;
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0;
  // Longs beyond 2^53 are bigints: < and > compare them with numbers exactly.
  if ((typeof a === 'bigint' || typeof a === 'number') && (typeof b === 'bigint' || typeof b === 'number')) return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'boolean' && typeof b === 'boolean') return a === b ? 0 : a ? 1 : -1;
  if (a instanceof Decimal || b instanceof Decimal) return compareWithDecimal(a, b);
  if (a instanceof Uint8Array && b instanceof Uint8Array) return compareBytes(a, b);
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const c = compareValues(a[i], b[i]);
      if (c !== 0) return c;
    }
    return a.length - b.length;
  }
  if (typeof a === 'object' && typeof b === 'object') {
    return compareValues(Object.values(a as object), Object.values(b as object));
  }
  return String(a) < String(b) ? -1 : 1;
}

export function valuesEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  // A decimal equals a number or another decimal of any scale by value, as Spark widens them.
  if (a instanceof Decimal || b instanceof Decimal) return a !== null && a !== undefined && b !== null && b !== undefined && compareWithDecimal(a, b) === 0;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  return encodeKey([a]) === encodeKey([b]);
}

/**
 * A key encoder specialised for the key's types, equivalent to `encodeKey` but without
 * JSON.stringify for the common shapes (strings, numbers, window structs).
 */
function escapeKeyPart(text: string): string {
  if (text.indexOf('\u0001') < 0 && text.indexOf('\u0003') < 0) return text;
  return text.replace(/\u0003/g, '\u0003\u0003').replace(/\u0001/g, '\u0003a');
}

export function compileKeyEncoder(types: readonly DataType[]): (values: readonly unknown[]) => string {
  const simple = types.every((t) => t === 'string' || t === 'int' || t === 'long' || t === 'double' || t === 'timestamp' || t === 'date' || t === 'boolean' || isWindowStruct(t));
  if (!simple) return encodeKey;
  const parts = types.map((t): ((v: unknown) => string) => {
    if (isWindowStruct(t)) {
      // Window structs repeat (see the timeWindow evaluator): reuse the last one's encoding.
      let lastWindow: unknown = null;
      let lastText = '';
      return (v) => {
        if (v === null || v === undefined) return '\u0002';
        if (v !== lastWindow) {
          lastText = `${(v as { start: number }).start}~${(v as { end: number }).end}`;
          lastWindow = v;
        }
        return lastText;
      };
    }
    // The separator (\u0001) must not occur inside a part, or ["a\u0001'b", "c"] and ["a", "b\u0001'c"] would collide.
    // A missing value (undefined) is NULL, as in Spark: one group with the NULLs.
    if (t === 'string') return (v) => (v === null || v === undefined ? '\u0002' : `'${escapeKeyPart(v as string)}`);
    return (v) => (v === null || v === undefined ? '\u0002' : String(v));
  });
  if (parts.length === 1) return (values) => parts[0]!(values[0]);
  if (parts.length === 2) {
    const [a, b] = parts as [(v: unknown) => string, (v: unknown) => string];
    return (values) => `${a(values[0])}\u0001${b(values[1])}`;
  }
  return (values) => values.map((v, i) => parts[i]!(v)).join('\u0001');
}

function isWindowStruct(t: DataType): boolean {
  return typeof t === 'object' && t.kind === 'struct' && t.fields.length === 2 && t.fields[0]!.name === 'start' && t.fields[1]!.name === 'end';
}

function stripTrailingZeros(v: Decimal): string {
  const text = v.toString();
  return text.includes('.') ? text.replace(/\.?0+$/, '') : text;
}

/** A decimal against a decimal exactly, against a number as doubles (Spark widens to double). */
function compareWithDecimal(a: unknown, b: unknown): number {
  if (a instanceof Decimal && b instanceof Decimal) return compareDecimals(a, b);
  const x = a instanceof Decimal ? a.toNumber() : Number(a);
  const y = b instanceof Decimal ? b.toNumber() : Number(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Spark orders binary by unsigned bytes, then length. */
function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}
