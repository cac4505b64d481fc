import type { DataType, StructField } from '../plan/data-types.js';
import { timestampToIso } from '../core/timestamps.js';
import { stringifyWithLongs } from '../core/long.js';

/**
 * An engine value (timestamps as epoch micros) as the JSON a sink writes. A long beyond 2^53 stays
 * a bigint: DynamoDB's marshall writes it as a number (38 digits fit), JSON text through
 * `stringifyExternalRow`.
 */
export function toExternalValue(value: unknown, type: DataType): unknown {
  if (value === null || value === undefined) return null;
  if (type === 'timestamp') return timestampToIso(value as number);
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
