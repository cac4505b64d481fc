/**
 * Hive-style partition folders for the files sink (Spark's `partitionBy`): `dt=2026-12-01/store=n%2F1/`.
 * Values are rendered as Spark casts them to string and escaped with Hive's escapePathName rules
 * (the characters Spark's ExternalCatalogUtils escapes become `%XX`), so Spark, Hive, Athena and
 * DuckDB read the value back unchanged; NULL and `''` go to Hive's default partition, as Spark
 * writes them. Escaping makes any value one safe key segment: `/` cannot add a folder and `..`
 * cannot climb, since the segment is always `column=value`.
 */
import { formatTimestamp } from '../core/timestamps.js';
import { formatDate } from '../core/dates.js';
import { AnalysisError } from '../errors/sluice-error.js';
import type { DataType, StructField } from '../plan/data-types.js';

export const HIVE_DEFAULT_PARTITION = '__HIVE_DEFAULT_PARTITION__';
/** S3's limit on a key, in UTF-8 bytes. */
export const S3_MAX_KEY_BYTES = 1024;

const PARTITION_TYPES: readonly DataType[] = ['int', 'long', 'double', 'string', 'boolean', 'timestamp', 'date'];

function needsEscape(code: number): boolean {
  return (code >= 0x01 && code <= 0x1f) || code === 0x7f || '"#%\'*/:=?\\{[]^'.includes(String.fromCharCode(code));
}

/** Hive's escapePathName: each character Hive escapes becomes `%` and two upper-case hex digits. */
export function escapePathName(value: string): string {
  let out = '';
  for (const ch of value) {
    const code = ch.codePointAt(0)!;
    out += code < 0x80 && needsEscape(code) ? `%${code.toString(16).toUpperCase().padStart(2, '0')}` : ch;
  }
  return out;
}

/** Hive's unescapePathName (the inverse of escapePathName). */
export function unescapePathName(segment: string): string {
  return segment.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

/** A partition value as Spark renders it in a folder name (before escaping); null for NULL. */
export function partitionValueString(value: unknown, type: DataType): string | null {
  if (value === null || value === undefined) return null;
  if (type === 'timestamp') return formatTimestamp(value as number);
  if (type === 'date') return formatDate(value as number);
  return String(value);
}

/** `col=value/` segments for one row; `partitionOrdinals` index the row. */
export function partitionPath(
  row: readonly unknown[], partitionBy: readonly StructField[], partitionOrdinals: readonly number[],
): string {
  let path = '';
  for (let i = 0; i < partitionBy.length; i++) {
    const field = partitionBy[i]!;
    const text = partitionValueString(row[partitionOrdinals[i]!], field.type);
    path += `${escapePathName(field.name)}=${text === null || text === '' ? HIVE_DEFAULT_PARTITION : escapePathName(text)}/`;
  }
  return path;
}

/**
 * Checks `partitionBy` against the result schema at definition: every column exists, appears once,
 * has a type Spark can partition by, and at least one column is left for the data files (as
 * Spark's file sink requires). Returns the partition fields in `partitionBy` order.
 */
export function resolvePartitionColumns(partitionBy: readonly string[], schema: readonly StructField[]): StructField[] {
  const fields: StructField[] = [];
  for (const name of partitionBy) {
    const field = schema.find((f) => f.name === name);
    if (!field) {
      throw new AnalysisError(`partitionBy column '${name}' is not a column of the result [${schema.map((f) => f.name).join(', ')}].`, {
        code: 'UNKNOWN_PARTITION_COLUMN', hint: 'list result column names in sink.partitionBy (select or alias the column first).',
      });
    }
    if (fields.includes(field)) {
      throw new AnalysisError(`partitionBy lists column '${name}' twice.`, { code: 'DUPLICATE_PARTITION_COLUMN' });
    }
    if (!PARTITION_TYPES.includes(field.type)) {
      throw new AnalysisError(`partitionBy column '${name}' has type ${typeof field.type === 'string' ? field.type : field.type.kind}, which cannot name a folder.`, {
        code: 'INVALID_PARTITION_COLUMN_TYPE',
        hint: 'partition by a string, number, boolean or timestamp column; for a window, derive e.g. a date string from window.start.',
      });
    }
    fields.push(field);
  }
  if (fields.length > 0 && fields.length === schema.length) {
    throw new AnalysisError('Cannot use all columns for partitionBy: the data files would have no column.', {
      code: 'ALL_COLUMNS_PARTITIONED', errorClass: 'ALL_PARTITION_COLUMNS_NOT_ALLOWED',
    });
  }
  return fields;
}

/** The UTF-8 length of an S3 key. */
export function keyBytes(key: string): number {
  return Buffer.byteLength(key, 'utf-8');
}
