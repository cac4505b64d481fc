/**
 * `sluice dev --quiet --rate 200/s --input FILE` where the file has a `#wave` marker and lines
 * with their own partition keys: late data made from a file, and only the summary printed.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runSluice } from '../../support/sluice-cli.js';

const sale = (store: string, time: string, amount = 10): string => JSON.stringify({ store_id: store, amount, ts: `2024-05-01T${time}:00Z` });
const wave1 = ['10:05', '10:40', '11:10', '11:50', '12:30'].flatMap((t, i) => [sale('north', t, i + 1), `south\t${sale('south', t, 2 * (i + 1))}`]);
// After wave 1 the watermark is 12:30 − 15 minutes: 09:10 is late, 12:40 is not.
const wave2 = [sale('north', '09:10', 100), `north\t${sale('north', '12:40', 5)}`];

describe('sluice dev with #wave, key prefixes, --rate and --quiet', () => {
  let dir: string;
  let result: { code: number | null; stdout: string; stderr: string };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-dev-waves-'));
    writeFileSync(join(dir, 'events.jsonl'), `${[...wave1, '#wave', ...wave2].join('\n')}\n`);
    result = await runSluice(['dev', '--input', join(dir, 'events.jsonl'), '--shards', '1', '--batch-size', '4', '--rate', '200/s', '--quiet'], 150_000);
  }, 160_000);

  afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

  it('prints only the summary', () => {
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).not.toMatch(/\[shardId-\d+\] batch \d+:/);
    expect(result.stdout).not.toMatch(/== wave/);
    expect(result.stdout.trimStart()).toMatch(/^== summary ==/);
  });

  it('puts the second wave after the first is processed, so its old row is late and dropped', () => {
    expect(result.stdout).toMatch(/records put: 12 in 2 waves = 12 read as input rows \+ 0 dead-lettered/);
    expect(result.stdout).toMatch(/rows: 12 in, \d+ out, 1 late rows dropped by the watermark/);
    const batches = /batches: (\d+) committed = (\d+) with input rows \+ (\d+) no-data batch/.exec(result.stdout);
    const by = /run by: (\d+) in \d+ Lambda invocations? of the event source mapping .* \+ (\d+) by the scheduled tick/.exec(result.stdout);
    expect(batches, result.stdout).not.toBeNull();
    expect(by, result.stdout).not.toBeNull();
    const [, all, withInput, noData] = batches!.map(Number);
    const [, byMapping, byTick] = by!.map(Number);
    expect(withInput! + noData!).toBe(all);
    expect(byMapping! + byTick!).toBe(all);
    // 12 records in batches of at most 4: at least 3 batches read rows.
    expect(withInput).toBeGreaterThanOrEqual(3);
  });
});
