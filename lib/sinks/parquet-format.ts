/**
 * Result rows as Parquet, the way Spark writes them: every column OPTIONAL; `int` INT32, `long`
 * INT64, `double` DOUBLE, `boolean` BOOLEAN, `string` UTF8 byte arrays, `timestamp` INT64
 * microseconds adjusted to UTC, arrays as the standard three-level LIST (`list`/`element`), structs
 * (the `window` struct) as groups; `date` INT32 DATE (days), `decimal(p,s)` DECIMAL on INT32 (p <= 9),
 * INT64 (p <= 18) or a fixed-length byte array (Spark's non-legacy layout), `binary` a plain
 * BYTE_ARRAY, maps the standard MAP group (`key_value` of `key`, `value`); snappy compression.
 *
 * Writer: hyparquet-writer, chosen by measurement against @dsnp/parquetjs and parquet-wasm (bundle
 * 61 KB minified against 1 MB and 0.26 MB + a 4.9 MB wasm; the other figures are in bench/lake.bench.ts's
 * header and the closing note). It supports every type above; parquetjs writes no UTC
 * timestamps nor standard lists.
 *
 * `toParquetValue` is the one place an engine value becomes a Parquet value (if `long` values
 * change representation, only it changes); `parquetRowProblem` tells, per row, why a row cannot be
 * written (the sink dead-letters it instead of failing the batch).
 */
import { parquetWriteBuffer } from 'hyparquet-writer';
import type { SchemaElement } from 'hyparquet';
import type { DataType, StructField } from '../plan/data-types.js';
import { Decimal } from '../core/decimal.js';

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const TIMESTAMP_MICROS_UTC = { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MICROS' } as const;

/** Types Spark's Parquet writer refuses (void, intervals); refused at definition. */
export function unwritableParquetType(type: DataType): string | null {
  if (type === 'null') return 'void (an untyped NULL column)';
  if (type === 'interval') return 'interval';
  if (typeof type === 'object' && type.kind === 'array') return unwritableParquetType(type.element);
  if (typeof type === 'object' && type.kind === 'map') return unwritableParquetType(type.key) ?? unwritableParquetType(type.value);
  if (typeof type === 'object' && type.kind === 'struct') {
    for (const f of type.fields) {
      const inner = unwritableParquetType(f.type);
      if (inner) return inner;
    }
  }
  return null;
}

function schemaElements(name: string, type: DataType): SchemaElement[] {
  const optional = { name, repetition_type: 'OPTIONAL' } as const;
  if (typeof type === 'object' && type.kind === 'array') {
    return [
      { ...optional, converted_type: 'LIST', num_children: 1 },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      ...schemaElements('element', type.element),
    ];
  }
  if (typeof type === 'object' && type.kind === 'struct') {
    return [{ ...optional, num_children: type.fields.length }, ...type.fields.flatMap((f) => schemaElements(f.name, f.type))];
  }
  if (typeof type === 'object' && type.kind === 'map') {
    return [
      { ...optional, converted_type: 'MAP', num_children: 1 },
      { name: 'key_value', repetition_type: 'REPEATED', num_children: 2 },
      ...schemaElements('key', type.key).map((e, i) => (i === 0 ? { ...e, repetition_type: 'REQUIRED' as const } : e)),
      ...schemaElements('value', type.value),
    ];
  }
  if (typeof type === 'object' && type.kind === 'decimal') {
    const decimal = { ...optional, converted_type: 'DECIMAL', precision: type.precision, scale: type.scale } as const;
    if (type.precision <= 9) return [{ ...decimal, type: 'INT32' }];
    if (type.precision <= 18) return [{ ...decimal, type: 'INT64' }];
    return [{ ...decimal, type: 'FIXED_LEN_BYTE_ARRAY', type_length: bytesForPrecision(type.precision) }];
  }
  switch (type) {
    case 'date': return [{ ...optional, type: 'INT32', converted_type: 'DATE' }];
    case 'binary': return [{ ...optional, type: 'BYTE_ARRAY' }];
    case 'int': return [{ ...optional, type: 'INT32' }];
    case 'long': return [{ ...optional, type: 'INT64' }];
    case 'double': return [{ ...optional, type: 'DOUBLE' }];
    case 'boolean': return [{ ...optional, type: 'BOOLEAN' }];
    case 'string': return [{ ...optional, type: 'BYTE_ARRAY', converted_type: 'UTF8' }];
    case 'timestamp': return [{ ...optional, type: 'INT64', logical_type: TIMESTAMP_MICROS_UTC }];
    default: throw new Error(`type ${String(type)} has no Parquet mapping`);
  }
}

/** Spark's Decimal.minBytesForPrecision: the fewest bytes whose two's complement holds 10^p - 1. */
function bytesForPrecision(precision: number): number {
  let bytes = 1;
  while (2 ** (8 * bytes - 1) < 10 ** precision) bytes++;
  return bytes;
}

/** The Parquet schema (flattened, root first) of the given columns. */
export function parquetSchemaOf(fields: readonly StructField[]): SchemaElement[] {
  return [{ name: 'spark_schema', num_children: fields.length }, ...fields.flatMap((f) => schemaElements(f.name, f.type))];
}

function toInt64(value: unknown): bigint {
  return typeof value === 'bigint' ? value : BigInt(value as number);
}

/** An engine value as hyparquet-writer takes it (INT64 as bigint); assumes `parquetValueProblem` passed. */
export function toParquetValue(value: unknown, type: DataType): unknown {
  if (value === null || value === undefined) return null;
  if (type === 'long' || type === 'timestamp') return toInt64(value);
  if (typeof type === 'object' && type.kind === 'decimal') return (value as Decimal).unscaled;
  if (typeof type === 'object' && type.kind === 'map') {
    return [...(value as Map<unknown, unknown>)].map(([k, v]) => ({ key: toParquetValue(k, type.key), value: toParquetValue(v, type.value) }));
  }
  if (typeof type === 'object' && type.kind === 'array') return (value as unknown[]).map((v) => toParquetValue(v, type.element));
  if (typeof type === 'object' && type.kind === 'struct') {
    const struct = value as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const f of type.fields) out[f.name] = toParquetValue(struct[f.name], f.type);
    return out;
  }
  return value;
}

function isInt64(value: unknown): boolean {
  if (typeof value === 'bigint') return value >= INT64_MIN && value <= INT64_MAX;
  return typeof value === 'number' && Number.isInteger(value) && Number.isSafeInteger(value);
}

/** Why `value` cannot be written as `type` (a path names the nested field), or null. */
export function parquetValueProblem(value: unknown, type: DataType, path: string): string | null {
  if (value === null || value === undefined) return null;
  switch (type) {
    case 'int':
      return typeof value === 'number' && Number.isInteger(value) && value >= INT32_MIN && value <= INT32_MAX
        ? null : `${path}: the value is not a 32-bit integer (Parquet INT32)`;
    case 'long':
      return isInt64(value) ? null : `${path}: the value is not an exact 64-bit integer (Parquet INT64)`;
    case 'timestamp':
      return isInt64(value) ? null : `${path}: the value is not a timestamp in whole microseconds (Parquet INT64 TIMESTAMP_MICROS)`;
    case 'date':
      return typeof value === 'number' && Number.isInteger(value) && value >= INT32_MIN && value <= INT32_MAX ? null : `${path}: the value is not a date (days since the epoch, Parquet INT32 DATE)`;
    case 'binary':
      return value instanceof Uint8Array ? null : `${path}: ${typeof value} is not binary`;
    case 'double':
      return typeof value === 'number' ? null : `${path}: ${typeof value} is not a double`;
    case 'boolean':
      return typeof value === 'boolean' ? null : `${path}: ${typeof value} is not a boolean`;
    case 'string':
      if (typeof value !== 'string') return `${path}: ${typeof value} is not a string`;
      return !UNPAIRED_SURROGATE.test(value) ? null : `${path}: the string holds an unpaired UTF-16 surrogate, which UTF-8 cannot encode`;
    default:
      break;
  }
  if (typeof type === 'object' && type.kind === 'decimal') return value instanceof Decimal ? null : `${path}: ${typeof value} is not a decimal`;
  if (typeof type === 'object' && type.kind === 'map') {
    if (!(value instanceof Map)) return `${path}: ${typeof value} is not a map`;
    for (const [k, v] of value) {
      if (k === null || k === undefined) return `${path}: a map key is NULL`;
      const problem = parquetValueProblem(k, type.key, `${path}.key`) ?? parquetValueProblem(v, type.value, `${path}[${String(k)}]`);
      if (problem) return problem;
    }
    return null;
  }
  if (typeof type === 'object' && type.kind === 'array') {
    if (!Array.isArray(value)) return `${path}: ${typeof value} is not an array`;
    for (let i = 0; i < value.length; i++) {
      const problem = parquetValueProblem(value[i], type.element, `${path}[${i}]`);
      if (problem) return problem;
    }
    return null;
  }
  if (typeof type === 'object' && type.kind === 'struct') {
    if (typeof value !== 'object' || Array.isArray(value)) return `${path}: ${typeof value} is not a struct`;
    for (const f of type.fields) {
      const problem = parquetValueProblem((value as Record<string, unknown>)[f.name], f.type, `${path}.${f.name}`);
      if (problem) return problem;
    }
    return null;
  }
  return `${path}: type ${String(type)} cannot be written to Parquet`;
}

/** Why this row cannot be written to Parquet, or null; `ordinals` index `fields` into the row. */
export function parquetRowProblem(
  row: readonly unknown[], fields: readonly StructField[], ordinals: readonly number[],
): string | null {
  for (let i = 0; i < fields.length; i++) {
    const problem = parquetValueProblem(row[ordinals[i]!], fields[i]!.type, fields[i]!.name);
    if (problem) return problem;
  }
  return null;
}

/** One Parquet file holding `rows` projected to `fields` (by `ordinals`). */
export function encodeParquet(
  rows: readonly (readonly unknown[])[], fields: readonly StructField[], ordinals: readonly number[],
): Uint8Array {
  const columnData = fields.map((f, i) => {
    const ordinal = ordinals[i]!;
    return { name: f.name, data: rows.map((r) => toParquetValue(r[ordinal], f.type)) };
  });
  const buffer = parquetWriteBuffer({
    schema: parquetSchemaOf(fields), columnData, codec: 'SNAPPY', rowGroupSize: 100_000, createdBy: 'sluice',
  });
  return new Uint8Array(buffer);
}
