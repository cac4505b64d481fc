/**
 * `sluice dev` end to end, as a user runs it: `sluice dev --shards 2 --out DIR` (bin/sluice.ts from the sources) starts
 * the embedded emulators, runs the default query (hourly sales per store, update mode → DynamoDB)
 * over the generated sample events through the real handlers, prints every batch and writes the
 * final sink contents and the dead letters.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSalesEvents } from '../../lib/local/sample-events.js';
import { runSluice } from '../support/sluice-cli.js';


const readJsonLines = (path: string): Record<string, unknown>[] =>
  readFileSync(path, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);

/** What update mode must leave in DynamoDB: every (hour, store) over the on-time events, summed. */
function expectedHourlySales(): Map<string, { sales: number; orders: number }> {
  const out = new Map<string, { sales: number; orders: number }>();
  for (const r of generateSalesEvents({ seed: 3 })) {
    if (r.kind !== 'event') continue;
    const e = JSON.parse(r.data) as { store_id: string; amount: number; ts: string };
    const hour = `${e.ts.slice(0, 13)}:00:00Z`;
    const key = `${hour}|${e.store_id}`;
    const agg = out.get(key) ?? { sales: 0, orders: 0 };
    out.set(key, { sales: agg.sales + e.amount, orders: agg.orders + 1 });
  }
  return out;
}

describe('sluice dev (embedded emulators, real handlers)', () => {
  let out: string;
  let result: { code: number | null; stdout: string; stderr: string };

  beforeAll(async () => {
    out = mkdtempSync(join(tmpdir(), 'sluice-dev-test-'));
    result = await runSluice(['dev', '--shards', '2', '--out', out], 150_000);
  }, 160_000);

  afterAll(() => { if (out) rmSync(out, { recursive: true, force: true }); });

  it('exits 0 and prints each batch: shard, batch id, progress and the output table', () => {
    expect(result.code, result.stderr).toBe(0);
    const { stdout } = result;
    expect(stdout).toMatch(/query 'hourly-sales-update' \(update mode → dynamodb sink\), 2 shards/);
    for (const shard of ['shardId-000000000000', 'shardId-000000000001']) {
      expect(stdout).toMatch(new RegExp(`\\[${shard}\\] batch 0: \\d+ input rows, watermark none, \\d+ state rows, \\d+ late rows dropped, \\d+ dead-lettered, cost [\\d.]+ WCU, [\\d.]+ RCU, \\d+ S3 PUTs, \\d+ output rows`));
    }
    expect(stdout).toMatch(/\|\s+window\|store_id\|\s*sales\|orders\|/);
    // Windows print as readable timestamps, not epoch micros.
    expect(stdout).toMatch(/\{2024-05-01 12:00:00, 2024-05-01 13:00:00\}/);
    expect(stdout).toMatch(/watermark 2024-05-01 1\d:\d\d:00/);
    expect(stdout).toMatch(/== wave 2: put 5 records/);
    expect(stdout).toMatch(/tick: caught up \(idle\)/);
  });

  it('drops the late rows of wave 2 and dead-letters the malformed records, with reasons', () => {
    const { stdout } = result;
    const late = [...stdout.matchAll(/(\d+) late rows dropped,/g)].reduce((n, m) => n + Number(m[1]), 0);
    expect(late).toBe(3);
    expect(stdout).toMatch(/rows: \d+ in, \d+ out, 3 late rows dropped by the watermark/);
    expect(stdout).toMatch(/dead letters: 2 /);
    expect(stdout).toMatch(/malformed JSON/);
    expect(stdout).toMatch(/field 'amount' should be double but is a string/);

    const deadLetters = readJsonLines(join(out, 'dead-letters.jsonl'));
    expect(deadLetters).toHaveLength(2);
    for (const d of deadLetters) {
      expect(d.queryName).toBe('hourly-sales-update');
      expect(String(d.shardId)).toMatch(/^shardId-00000000000[01]$/);
      expect(typeof d.sequenceNumber).toBe('string');
      expect(typeof d.data).toBe('string');
    }
    expect(deadLetters.some((d) => /malformed JSON/.test(String(d.reason)))).toBe(true);
    expect(deadLetters.some((d) => /amount/.test(String(d.reason)))).toBe(true);
  });

  it('leaves exactly the hourly sales of the on-time events in the DynamoDB sink (--out)', () => {
    const rows = readJsonLines(join(out, 'sink-dynamodb.jsonl'));
    const expected = expectedHourlySales();
    expect(rows).toHaveLength(expected.size);
    for (const row of rows) {
      expect(Object.keys(row)).toEqual(['window', 'store_id', 'sales', 'orders']);
      const window = row.window as { start: string; end: string };
      const want = expected.get(`${window.start}|${String(row.store_id)}`);
      expect(want, `${window.start} ${String(row.store_id)}`).toBeDefined();
      expect({ sales: row.sales, orders: row.orders }).toEqual(want);
    }
    expect(result.stdout).toMatch(new RegExp(`sink: dynamodb://\\S+ holds ${expected.size} rows`));
  });
});

describe('sluice explain', () => {
  it('prints the plans and the repartition boundary, or the refusal with how to fix it', async () => {
    const { execFileSync } = await import('node:child_process');
    const run = (...args: string[]): string => execFileSync(process.execPath, ['--conditions=sluice-source', '--import', 'tsx', 'bin/sluice.ts', 'explain', ...args], { encoding: 'utf8' });
    const staged = run('examples/hourly-sales-per-product.ts');
    expect(staged).toMatch(/== Incremental plan \(output mode: update\) ==/);
    expect(staged).toMatch(/rows routed by \[product\] to internal stream 1\./);
    expect(staged).toMatch(/Stage 2 \(each shard of internal stream 1 = a state partition\): Aggregate by \[window, product\]/);
    expect(run('examples/hourly-sales-live.ts')).toMatch(/one stage: the state is co-partitioned/);
    let refusal = '';
    try {
      run('examples/hourly-sales-per-product.ts', '--no-repartition');
    } catch (error) {
      refusal = String((error as { stderr?: string }).stderr);
    }
    expect(refusal).toMatch(/partitioned by 'store_id', which is not among these keys[\s\S]*How to fix:/);
  });
});
