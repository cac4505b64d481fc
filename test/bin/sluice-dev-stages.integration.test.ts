/**
 * `sluice dev` of queries that run in several stages, through the real CLI: three streams joined
 * twice on different keys (three stages, two internal streams, `--input <source>=<file>` per
 * stream), and one stream deduplicated then counted (three stages). Each prints every stage's
 * batches and ends with the in-memory engine's rows in its sink.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import type { StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { runSluice, type CliResult } from '../support/sluice-cli.js';
import { canonicalRow, joinEvents, prng } from '../support/join-queries.js';
import { inMemoryThree, shipmentsByAmount } from '../support/chain-queries.js';
import joinJoin from './fixtures/dev-join-join.js';
import dedupThenCount from './fixtures/dev-dedup-then-count.js';

const fixture = (name: string): string => join(import.meta.dirname, 'fixtures', name);
const jsonLines = (rows: readonly object[]): string => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
const sinkRows = (dir: string): string[] => readFileSync(join(dir, 'sink-files.jsonl'), 'utf8').split('\n').filter(Boolean)
  .map((l) => canonicalRow(JSON.parse(l) as Record<string, unknown>)).sort();

describe('sluice dev: three streams, two joins on different keys (three stages)', () => {
  const events = joinEvents(120, 11);
  const three = { ...events, shipments: shipmentsByAmount(events.orders, 5) };
  let dir: string;
  let result: CliResult;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-dev-stages-'));
    for (const [name, rows] of Object.entries(three)) writeFileSync(join(dir, `${name}.jsonl`), jsonLines(rows));
    result = await runSluice(['dev', fixture('dev-join-join.ts'), '--shards', '2', '--out', join(dir, 'out'),
      ...Object.keys(three).flatMap((name) => ['--input', `${name}=${join(dir, `${name}.jsonl`)}`])], 400_000);
  }, 410_000);

  afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

  it('exits 0 and prints each stage\'s batches: the source streams\', the first join\'s, the second join\'s with its output', () => {
    expect(result.code, result.stderr + result.stdout.slice(-3000)).toBe(0);
    const { stdout } = result;
    expect(stdout).toMatch(/stage 1 \(orders\) → internal stream 1; stage 1 \(payments\) → internal stream 1; stage 1 \(shipments\) → internal stream 1; stage 2 → internal stream 2; stage 3 → sink/);
    expect(stdout).toMatch(/\[stage 1 shardId-00000000000[01]\] batch 0: \d+ input rows, .* \(routed by \[order_id = ref, \(forwarded\)\] to internal stream 1\)/);
    expect(stdout).toMatch(/\[stage 2 shardId-00000000000[01]\] batch \d+: \d+ input rows, .* \(routed by \[amount = zone\] to internal stream 2\)/);
    expect(stdout).toMatch(/\[stage 3 shardId-00000000000[01]\] batch \d+: \d+ input rows, .*[1-9]\d* output rows/);
    // The last stage's batches print their rows, as Spark's console sink does.
    expect(stdout).toMatch(/\|order_id\|amount\|\s*ts\|ref\|paid\|\s*pts\|\s*sid\|zone\|\s*sts\|/);
    expect(stdout).toMatch(/stages: \d+ batches of stage 1 \(decode, route rows by state key: \d+ rows routed\) \+ \d+ of stage 2 \(state, rows routed on\) \+ \d+ of stage 3 \(state and sink\)/);
  });

  it('leaves the in-memory engine\'s rows in the sink', async () => {
    const expected = await inMemoryThree(joinJoin, three);
    expect(expected.length).toBeGreaterThan(10);
    expect(sinkRows(join(dir, 'out'))).toEqual(expected);
  });
});

describe('sluice dev: one stream, duplicates dropped then counted (three stages)', () => {
  const rand = prng(7);
  const base = Date.UTC(2024, 4, 1, 12, 0);
  // Every fifth event is sent twice (a producer's retry): the deduplication drops the copy.
  const events = Array.from({ length: 300 }, (_, i) => ({
    user_id: `u${Math.floor(rand() * 60)}`, event_type: rand() < 0.5 ? 'view' : 'click', ts: new Date(base + i * 15_000).toISOString(),
  })).flatMap((e, i) => (i % 5 === 0 ? [e, e] : [e]));
  let dir: string;
  let result: CliResult;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-dev-chain-'));
    writeFileSync(join(dir, 'events.jsonl'), jsonLines(events));
    result = await runSluice(['dev', fixture('dev-dedup-then-count.ts'), '--shards', '2', '--input', join(dir, 'events.jsonl'), '--out', join(dir, 'out')], 300_000);
  }, 310_000);

  afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

  it('exits 0, prints every stage\'s batches and leaves the in-memory engine\'s rows in the sink', async () => {
    expect(result.code, result.stderr + result.stdout.slice(-3000)).toBe(0);
    expect(result.stdout).toMatch(/stage 1 → internal stream 1; stage 2 → internal stream 2; stage 3 → sink/);
    expect(result.stdout).toMatch(/\[stage 2 shardId-00000000000[01]\] batch \d+: .*\(routed by nothing: one partition to internal stream 2\)/);
    expect(result.stdout).toMatch(/\|\s+window\|events\|/);
    const session = new SluiceSession();
    const input = session.memoryStream('user_id string, event_type string, ts timestamp');
    const def = dedupThenCount as StreamingQueryDefinition;
    const df = def.transform(input.df, session);
    const sink = new MemorySink();
    const q = await df.writeStream.outputMode('append').sink(sink).start();
    input.stream.addData(events.map((e) => [e.user_id, e.event_type, parseTimestamp(e.ts)]));
    await q.processAllAvailable();
    await q.stop();
    const schema = df.plan.output.map((a) => ({ name: a.name, type: a.type }));
    const expected = sink.allRows().map((r) => canonicalRow(toExternalRow(r, schema as never) as Record<string, unknown>)).sort();
    expect(expected.length).toBeGreaterThan(3);
    // 360 records, 60 of them copies: 300 events, of which the last 15 minutes' 60 stay in a window the watermark has not closed.
    expect(expected.reduce((n, r) => n + (JSON.parse(r) as { events: number }).events, 0)).toBe(240);
    expect(sinkRows(join(dir, 'out'))).toEqual(expected);
  });
});
