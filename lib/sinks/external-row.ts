import type { DataType, StructField } from '../plan/data-types.js';
import { timestampToIso } from '../core/timestamps.js';
import { formatDate } from '../core/dates.js';
import { stringifyWithLongs } from '../core/long.js';

/**
 * An engine value (timestamps as epoch micros) as the JSON a sink writes. A long beyond 2^53 stays
 * a bigint: DynamoDB's marshall writes it as a number (38 digits fit), JSON text through
 * `stringifyExternalRow`. As Spark's JSON writer: a date `"2024-01-02"`, binary base64 text, a map
 * an object (keys as text); a decimal stays a `Decimal`, written as a bare JSON number with its
 * exact digits (`1.50`) by `stringifyExternalRow` and as an exact DynamoDB number by the upsert sink.
 */
export function toExternalValue(value: unknown, type: DataType): unknown {
  if (value === null || value === undefined) return null;
  if (type === 'timestamp') return timestampToIso(value as number);
  if (type === 'date') return formatDate(value as number);
  if (type === 'binary') return Buffer.from(value as Uint8Array).toString('base64');
  if (typeof type === 'object' && type.kind === 'map') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of value as Map<unknown, unknown>) out[String(toExternalValue(k, type.key))] = toExternalValue(v, type.value);
    return out;
  }
  if (typeof type === 'object' && type.kind === 'array') {
    return (value as unknown[]).map((v) => toExternalValue(v, type.element));
  }
  if (typeof type === 'object' && type.kind === 'struct') {
    const struct = value as Record<string, unknown>;
    return Object.fromEntries(type.fields.map((f) => [f.name, toExternalValue(struct[f.name], f.type)]));
  }
  return value;
}

/** One output row as a JSON object keyed by column name. */
export function toExternalRow(row: readonly unknown[], schema: readonly StructField[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i < schema.length; i++) out[schema[i]!.name] = toExternalValue(row[i], schema[i]!.type);
  return out;
}

/** One output row as a JSON line's text: longs beyond 2^53 (bigints) as bare digits, as Spark writes a long. */
export function stringifyExternalRow(row: readonly unknown[], schema: readonly StructField[]): string {
  return stringifyWithLongs(toExternalRow(row, schema));
}
