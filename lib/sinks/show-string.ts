/**
 * Values as Spark's console sink prints them (Dataset.showString, which casts every cell with
 * ToPrettyString): NULL, timestamps `2024-01-01 12:00:00` (UTC; a fraction only when there is
 * one), doubles as Java prints them (`14.0`, `1.0E7`), arrays `[a, b]`, structs `{a, 1}`.
 */
import { formatTimestamp } from '../core/timestamps.js';
import { formatDate } from '../core/dates.js';
import { Decimal } from '../core/decimal.js';
import type { DataType } from '../plan/data-types.js';

export function showValue(value: unknown, type?: DataType): string {
  if (value === null || value === undefined) return 'NULL';
  if (type === 'timestamp' && typeof value === 'number') return formatTimestamp(value);
  if (type === 'double' && typeof value === 'number') return javaDoubleString(value);
  if (type === 'date' && typeof value === 'number') return formatDate(value);
  // Spark shows binary as its bytes in hex, `[68 69]`, and a map as `{a -> 1, b -> NULL}`.
  if (value instanceof Decimal) return value.toString();
  if (value instanceof Uint8Array) return `[${[...value].map((b) => b.toString(16).toUpperCase().padStart(2, '0')).join(' ')}]`;
  if (typeof type === 'object' && type.kind === 'map' && value instanceof Map) {
    return `{${[...value].map(([k, v]) => `${showValue(k, type.key)} -> ${showValue(v, type.value)}`).join(', ')}}`;
  }
  if (typeof type === 'object' && type.kind === 'array' && Array.isArray(value)) {
    return `[${value.map((v) => showValue(v, type.element)).join(', ')}]`;
  }
  if (typeof type === 'object' && type.kind === 'struct' && typeof value === 'object') {
    const struct = value as Record<string, unknown>;
    return `{${type.fields.map((f) => showValue(struct[f.name], f.type)).join(', ')}}`;
  }
  return showUntyped(value);
}

/** Without a schema: arrays and objects still in Spark's shape (a window's start/end as timestamps). */
function showUntyped(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (Array.isArray(value)) return `[${value.map(showUntyped).join(', ')}]`;
  if (typeof value === 'object') {
    const o = value as Record<string, unknown>;
    if (typeof o.start === 'number' && typeof o.end === 'number' && Object.keys(o).length === 2) {
      return `{${formatTimestamp(o.start)}, ${formatTimestamp(o.end)}}`;
    }
    return `{${Object.values(o).map(showUntyped).join(', ')}}`;
  }
  return String(value);
}

/** Java's Double.toString: at least one decimal, scientific notation outside [1e-3, 1e7). */
export function javaDoubleString(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (!Number.isFinite(v)) return v > 0 ? 'Infinity' : '-Infinity';
  if (v === 0) return Object.is(v, -0) ? '-0.0' : '0.0';
  const abs = Math.abs(v);
  if (abs >= 1e-3 && abs < 1e7) {
    const s = String(v);
    return s.includes('.') || s.includes('e') ? s : `${s}.0`;
  }
  const [mantissa, exponent] = v.toExponential().split('e') as [string, string];
  return `${mantissa.includes('.') ? mantissa : `${mantissa}.0`}E${Number(exponent)}`;
}

/** Spark's cell truncation (show's `truncate = 20`): longer cells keep 17 characters and `...`. */
export function truncateCell(text: string, width: number): string {
  if (width <= 0 || text.length <= width) return text;
  return width < 4 ? text.slice(0, width) : `${text.slice(0, width - 3)}...`;
}
