/**
 * An independent reader for the files sink's output: every object under a prefix is copied to a
 * local folder as it is in the bucket (hidden folders and staged files included, as a reader
 * listing the table location would find them), then DuckDB reads it with `read_parquet('**')`.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { S3Client } from '@aws-sdk/client-s3';
import { DuckDBInstance } from '@duckdb/node-api';
import { getObjectBytes, listKeys, normalizePrefix } from '../../lib/aws/s3-util.js';

/** Copies every object under `prefix` into `dir` (the key below the prefix is the path). */
export async function mirrorPrefix(client: S3Client, bucket: string, prefix: string, dir: string): Promise<string[]> {
  const base = normalizePrefix(prefix);
  const keys = await listKeys(client, bucket, base);
  for (const key of keys) {
    const path = join(dir, key.slice(base.length));
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, (await getObjectBytes(client, bucket, key))!);
  }
  return keys;
}

function plain(value: unknown): unknown {
  if (typeof value === 'bigint') return Number(value);
  if (Array.isArray(value)) return value.map(plain);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, plain(v)]));
  }
  return value;
}

export interface DuckDbResult {
  readonly columns: { name: string; type: string }[];
  readonly rows: Record<string, unknown>[];
}

/** DuckDB's answer to `select` (over `files`, a read_parquet/read_json call) and its result schema. */
export async function queryWithDuckDb(select: (files: string) => string, files: string): Promise<DuckDbResult> {
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  try {
    const sql = select(files);
    const described = await connection.runAndReadAll(`DESCRIBE ${sql}`);
    const columns = described.getRowObjectsJS().map((r) => ({ name: String(r.column_name), type: String(r.column_type) }));
    const result = await connection.runAndReadAll(sql);
    return { columns, rows: result.getRowObjectsJS().map((r) => plain(r) as Record<string, unknown>) };
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}

/** `read_parquet` over every `.parquet` file below `dir`, Hive partition folders as VARCHAR columns. */
export function parquetTable(dir: string): string {
  return `read_parquet('${join(dir, '**', '*.parquet')}', hive_partitioning = true, hive_types_autocast = false)`;
}
