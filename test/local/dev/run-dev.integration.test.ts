/**
 * `sluice dev <query-module> --input events.jsonl`: a user's module (default export: a
 * StreamingQueryDefinition) over a user's events, here a complete-mode count per store written to
 * the S3 snapshot sink, on one shard with small batches.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, runSluice } from '../../support/sluice-cli.js';

const lib = (path: string): string => pathToFileURL(join(PROJECT_ROOT, 'lib', path)).href;

const MODULE = `
import { defineQuery } from '${lib('query/query-definition.ts')}';
import { col, count, sum } from '${lib('index.ts')}';

export default defineQuery({
  name: 'sales-per-store',
  source: { format: 'json', schema: 'store_id string, amount double, ts timestamp', partitionKey: 'store_id' },
  transform: (events) => events.groupBy(col('store_id')).agg(count().as('orders'), sum('amount').as('sales')),
  outputMode: 'complete',
  sink: { kind: 's3-snapshot', prefix: 'per-store/' },
});
`;

const stores = ['north', 'south', 'east'];
const events = Array.from({ length: 23 }, (_, i) => ({ store_id: stores[i % 3]!, amount: (i + 1) * 0.5, ts: `2024-05-01T10:${String(i).padStart(2, '0')}:00Z` }));
const lines = [...events.map((e) => JSON.stringify(e)), '{"store_id": "north", "amount": 1', JSON.stringify({ store_id: 'south', amount: 'two', ts: '2024-05-01T11:00:00Z' })];

describe('sluice dev with a query module and an input file', () => {
  let dir: string;
  let result: { code: number | null; stdout: string; stderr: string };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-dev-input-'));
    writeFileSync(join(dir, 'per-store.mts'), MODULE);
    writeFileSync(join(dir, 'events.jsonl'), `${lines.join('\n')}\n`);
    result = await runSluice(['dev', join(dir, 'per-store.mts'), '--input', join(dir, 'events.jsonl'), '--shards', '1', '--batch-size', '5', '--out', join(dir, 'out')], 150_000);
  }, 160_000);

  afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

  it('runs the module\'s query in batches of 5 on one shard', () => {
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/query 'sales-per-store' \(complete mode → s3-snapshot sink\), 1 shard, batch size 5/);
    expect(result.stdout).toMatch(/events: .*events\.jsonl \(25 records\)/);
    const batches = [...result.stdout.matchAll(/\[shardId-000000000000\] batch (\d+): (\d+) input rows/g)];
    expect(batches.map((m) => Number(m[1]))).toEqual(batches.map((_, i) => i));
    expect(batches.reduce((n, m) => n + Number(m[2]), 0)).toBe(23);
    expect(Math.max(...batches.map((m) => Number(m[2])))).toBeLessThanOrEqual(5);
    expect(result.stdout).toMatch(/\|store_id\|orders\|\s*sales\|/);
  });

  it('writes the final snapshot and the two dead letters to --out', () => {
    const rows = readFileSync(join(dir, 'out', 'sink-snapshot.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const expected = stores.map((s) => {
      const mine = events.filter((e) => e.store_id === s);
      return { store_id: s, orders: mine.length, sales: mine.reduce((n, e) => n + e.amount, 0) };
    });
    expect(rows.sort((a, b) => String(a.store_id).localeCompare(String(b.store_id))))
      .toEqual(expected.sort((a, b) => a.store_id.localeCompare(b.store_id)));
    const dead = readFileSync(join(dir, 'out', 'dead-letters.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { reason: string; data: string });
    expect(dead).toHaveLength(2);
    expect(dead.map((d) => d.data).sort()).toEqual([lines[23]!, lines[24]!].sort());
    expect(dead.some((d) => /malformed JSON/.test(d.reason))).toBe(true);
    expect(dead.some((d) => /amount/.test(d.reason))).toBe(true);
  });
});
