/**
 * The data-file formats of the files sink: JSON Lines (one object per row, timestamps as ISO-8601
 * strings) and Parquet. Both hold the columns that are not partition columns (the folder names hold
 * those, as in Spark's file sink).
 */
import { stringifyWithLongs } from '../core/long.js';
import type { StructField } from '../plan/data-types.js';
import { toExternalValue } from './external-row.js';
import { encodeParquet, parquetRowProblem } from './parquet-format.js';

export type FileFormat = 'jsonl' | 'parquet';

export const FILE_EXTENSIONS: Readonly<Record<FileFormat, string>> = { jsonl: 'jsonl', parquet: 'parquet' };
export const FILE_CONTENT_TYPES: Readonly<Record<FileFormat, string>> = {
  jsonl: 'application/x-ndjson', parquet: 'application/vnd.apache.parquet',
};

/** Rows projected to `fields` (by `ordinals`) as one file of `format`. */
export function encodeDataFile(
  format: FileFormat, rows: readonly (readonly unknown[])[], fields: readonly StructField[], ordinals: readonly number[],
): Uint8Array {
  if (format === 'parquet') return encodeParquet(rows, fields, ordinals);
  let out = '';
  for (const row of rows) {
    const record: Record<string, unknown> = {};
    for (let i = 0; i < fields.length; i++) record[fields[i]!.name] = toExternalValue(row[ordinals[i]!], fields[i]!.type);
    out += `${stringifyWithLongs(record)}\n`;
  }
  return Buffer.from(out, 'utf-8');
}

/** Why a row cannot be written in `format` (JSON can write every engine value), or null. */
export function dataRowProblem(
  format: FileFormat, row: readonly unknown[], fields: readonly StructField[], ordinals: readonly number[],
): string | null {
  return format === 'parquet' ? parquetRowProblem(row, fields, ordinals) : null;
}
