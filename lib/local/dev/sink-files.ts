/**
 * `sluice dev --out DIR`: the s3-files sink's committed files, with their Hive folder tree, copied
 * to `DIR/sink-files/` so any reader opens them (`duckdb -c "select * from
 * read_parquet('DIR/sink-files/**' + '/*.parquet', hive_partitioning = true)"`). Only what a table
 * reader sees is copied: no `_`/`.` folder (manifest, staging, rejected rows, compaction log).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { S3Client } from '@aws-sdk/client-s3';
import { getObjectBytes, listKeys, normalizePrefix } from '../../aws/s3-util.js';

export async function copyCommittedSinkFiles(client: S3Client, bucket: string, prefix: string, outDir: string): Promise<string[]> {
  const base = normalizePrefix(prefix);
  const copied: string[] = [];
  for (const key of await listKeys(client, bucket, base)) {
    const relative = key.slice(base.length);
    if (relative.split('/').some((segment) => segment.startsWith('_') || segment.startsWith('.'))) continue;
    const bytes = await getObjectBytes(client, bucket, key);
    if (bytes === undefined) continue;
    const path = join(outDir, 'sink-files', ...relative.split('/'));
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, bytes);
    copied.push(relative);
  }
  return copied;
}
