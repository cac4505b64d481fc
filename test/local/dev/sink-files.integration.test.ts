/**
 * `sluice dev --out DIR` with a Parquet sink partitioned by store: DIR/sink-files/ holds the
 * committed files in their Hive folders (nothing of the sink's `_` folders), and DuckDB reads them.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, runSluice } from '../../support/sluice-cli.js';
import { parquetTable, queryWithDuckDb } from '../../support/duckdb-reader.js';

const lib = (path: string): string => pathToFileURL(join(PROJECT_ROOT, 'lib', path)).href;

const MODULE = `
import { defineQuery } from '${lib('query/query-definition.ts')}';

export default defineQuery({
  name: 'sales-lake',
  source: { format: 'json', schema: 'store_id string, amount double, ts timestamp' },
  transform: (events) => events,
  outputMode: 'append',
  sink: { kind: 's3-files', format: 'parquet', partitionBy: ['store_id'], prefix: 'lake/' },
});
`;

const stores = ['north', 'south/east'];
const events = Array.from({ length: 12 }, (_, i) => ({ store_id: stores[i % 2]!, amount: i + 0.5, ts: `2024-05-01T10:${String(i).padStart(2, '0')}:00Z` }));

describe('sluice dev --out with a Parquet files sink', () => {
  let dir: string;
  let result: { code: number | null; stdout: string; stderr: string };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-dev-lake-'));
    writeFileSync(join(dir, 'lake.mts'), MODULE);
    writeFileSync(join(dir, 'events.jsonl'), `${events.map((e) => JSON.stringify(e)).join('\n')}\n`);
    result = await runSluice(['dev', join(dir, 'lake.mts'), '--input', join(dir, 'events.jsonl'), '--shards', '1', '--batch-size', '5', '--out', join(dir, 'out')], 150_000);
  }, 160_000);

  afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

  it('copies the committed files in their folders, and DuckDB reads every row', async () => {
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/copied \d+ committed sink files to .*sink-files/);
    const files = join(dir, 'out', 'sink-files');
    expect(existsSync(join(files, 'store_id=north'))).toBe(true);
    expect(existsSync(join(files, 'store_id=south%2Feast'))).toBe(true);
    expect(existsSync(join(files, '_sluice_metadata'))).toBe(false);
    const read = await queryWithDuckDb((f) => `SELECT store_id, amount FROM ${f} ORDER BY amount`, parquetTable(files));
    expect(read.rows).toEqual(events.map((e) => ({ store_id: e.store_id, amount: e.amount })));
  });
});
