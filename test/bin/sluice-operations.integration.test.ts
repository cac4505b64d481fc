/**
 * `sluice status`, `progress`, `state`, `diff` and `redrive` against a query that ran through the real Kinesis-trigger
 * handler on the emulators: what they print must equal what the handler's invocations reported
 * (progress records, state rows) and what the emulators hold (dead letters, records not yet read).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { hourlySalesQuery } from '../../lib/local/dev/default-query.js';
import type { DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';
import type { StreamingQueryProgress } from '../../lib/runtime/progress.js';
import type { PartitionStatus, QueryStatus, StateRow } from '../../lib/aws/query-inspection.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';
import { runSluice, emulatorCliEnv } from '../support/sluice-cli.js';

const QUERY = 'ops-hourly-sales';
const stores = ['north', 'south', 'east', 'west', 'central'];
const sales = Array.from({ length: 48 }, (_, i) => ({
  store_id: stores[(i * 7) % stores.length]!,
  amount: 1 + ((i * 13) % 29),
  ts: new Date(Date.UTC(2024, 4, 1, 14, 0) + i * 4 * 60_000).toISOString(),
}));

let emulators: EmulatorSet;
let dir: string;
let deployment: Deployment;
let descriptorFile: string;
let cliEnv: Record<string, string>;

const cli = (args: string[]) => runSluice([...args, '--deployment', descriptorFile,
  '--endpoint', `kinesis=${emulators.endpoints.kinesis}`, '--endpoint', `dynamodb=${emulators.endpoints.dynamodb}`,
  '--endpoint', `s3=${emulators.endpoints.s3}`], 60_000, cliEnv);

/** The last progress record each shard's invocations reported, by shard. */
function reportedProgress(): Map<string, StreamingQueryProgress[]> {
  const byShard = new Map<string, StreamingQueryProgress[]>();
  for (const { shardId, result } of deployment.results) {
    const list = byShard.get(shardId) ?? [];
    for (const p of result.progress) if (!list.some((q) => q.batchId === p.batchId)) list.push(p);
    byShard.set(shardId, list);
  }
  return byShard;
}

beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-ops-test-'));
  cliEnv = emulatorCliEnv(emulators);
});
afterAll(async () => {
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('sluice status / progress / state on a query run through the real handlers', () => {
  it('report the committed batches, progress, dead letters, lag and state rows the run produced; diff checks resumability; redrive re-drives once', async () => {
    deployment = await deploy(emulators, hourlySalesQuery('update', QUERY), 2);
    const descriptor: DeploymentDescriptor = { ...deployment.config, sluiceQuery: QUERY };
    descriptorFile = join(dir, 'deployment.json');
    writeFileSync(descriptorFile, JSON.stringify(descriptor));
    await deployment.put([
      ...sales.map((s) => ({ data: JSON.stringify(s), partitionKey: s.store_id })),
      { data: '{"store_id": "north", "amount": ', partitionKey: 'north' },
    ]);
    await deployment.drain();
    const reported = reportedProgress();
    expect(reported.size).toBe(2);

    // status: healthy, every shard's last committed batch and last progress as the handler reported
    const status = await cli(['status', QUERY, '--json']);
    expect(status.code, status.stderr).toBe(0);
    const s = JSON.parse(status.stdout) as QueryStatus;
    expect(s.healthy).toBe(true);
    expect(s.deadLetters).toBe(1);
    expect(s.partitions.map((p) => p.partitionId).sort()).toEqual([...reported.keys()].sort());
    for (const p of s.partitions) {
      const last = reported.get(p.partitionId)!.at(-1)!;
      expect(p.lastCommittedBatch).toBe(last.batchId);
      expect(p.pendingBatch).toBeNull();
      expect(p.lastProgress?.batchId).toBe(last.batchId);
      expect(p.lastProgress?.numInputRows).toBe(last.numInputRows);
      expect(p.lastProgress?.stateOperators[0]?.numRowsTotal).toBe(last.stateOperators[0]?.numRowsTotal);
      expect(p.lag).toEqual({ records: 0, capped: false, ms: 0 });
    }
    expect(s.partitions.reduce((n, p) => n + p.deadLetters, 0)).toBe(1);
    const text = await cli(['status', QUERY]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`query ${QUERY}: healthy`));
    expect(text.stdout).toMatch(/dead letters: 1 /);

    // progress: the last records of each shard (the ring keeps 20), oldest first
    const progress = await cli(['progress', QUERY, '--json']);
    expect(progress.code, progress.stderr).toBe(0);
    const lines = progress.stdout.trim().split('\n').map((l) => JSON.parse(l) as StreamingQueryProgress & { partitionId: string });
    for (const [shard, list] of reported) {
      const printed = lines.filter((l) => l.partitionId === shard);
      const expected = list.slice(-20);
      expect(printed.map((p) => p.batchId)).toEqual(expected.map((p) => p.batchId));
      expect(printed.map((p) => p.numInputRows)).toEqual(expected.map((p) => p.numInputRows));
      expect(printed.map((p) => p.sink.numOutputRows)).toEqual(expected.map((p) => p.sink.numOutputRows));
    }

    // state: as many rows per shard as the last batch's state operator holds; --key and --export
    const state = await cli(['state', QUERY, '--json']);
    expect(state.code, state.stderr).toBe(0);
    const rows = state.stdout.trim().split('\n').map((l) => JSON.parse(l) as StateRow);
    for (const [shard, list] of reported) {
      expect(rows.filter((r) => r.partitionId === shard)).toHaveLength(list.at(-1)!.stateOperators[0]!.numRowsTotal);
    }
    // Each row is an (hour, store) group that had sales; the watermark already evicted the older hours.
    const groups = new Set(sales.map((e) => `${e.ts.slice(0, 13)}|${e.store_id}`));
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.length).toBeLessThan(groups.size);
    for (const r of rows) {
      // Key columns in grouping order: the window (microseconds) and the store.
      const [win, store] = r.key as [{ start: number; end: number }, string];
      expect(win.end - win.start).toBe(3_600_000_000);
      expect(groups.has(`${new Date(win.start / 1000).toISOString().slice(0, 13)}|${store}`), JSON.stringify(r.key)).toBe(true);
    }
    const exported = join(dir, 'state.jsonl');
    const north = await cli(['state', QUERY, '--operator', '0', '--key', 'north', '--export', exported]);
    expect(north.code, north.stderr).toBe(0);
    const northRows = readFileSync(exported, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as StateRow);
    expect(northRows.length).toBeGreaterThan(0);
    expect(northRows).toEqual(rows.filter((r) => (r.key as unknown[])[1] === 'north'));

    // diff: a stateless change can resume (exit 0); a changed aggregation cannot (exit 1, the start-time refusal)
    const ok = await cli(['diff', 'test/bin/fixtures/ops-sales-filtered.ts', '--against', QUERY]);
    expect(ok.code, ok.stderr + ok.stdout).toBe(0);
    expect(ok.stdout).toMatch(/can resume query 'ops-hourly-sales' from its checkpoint \(2 partition\(s\) with a checkpoint checked/);
    const bad = await cli(['diff', 'test/bin/fixtures/ops-sales-per-day.ts', '--against', QUERY, '--json']);
    expect(bad.code, bad.stderr).toBe(1);
    const verdict = JSON.parse(bad.stdout) as { compatible: boolean; problems: string[] };
    expect(verdict.compatible).toBe(false);
    expect(verdict.problems).toHaveLength(2);
    expect(verdict.problems.join('\n')).toMatch(/not compatible with its checkpoint: operator 0 \(.*\): aggregates changed from/);

    // redrive --into-stream (opt-in; a one-stage aggregation cannot take its dead letters through a
    // partition of its own): the dead letter goes back into the stream once; the query (not fixed) dead-letters it
    // again under its new sequence number, and a second redrive reports it instead of looping.
    const first = await cli(['redrive', QUERY, '--into-stream', '--json']);
    expect(first.code, first.stderr).toBe(0);
    const r1 = JSON.parse(first.stdout) as { redriven: { newSequenceNumber: string }[]; alreadyRedriven: number; failedAgain: { sequenceNumber: string }[] };
    expect(r1.redriven).toHaveLength(1);
    await deployment.drain();
    const afterDrain = JSON.parse((await cli(['status', QUERY, '--json'])).stdout) as QueryStatus;
    expect(afterDrain.deadLetters).toBe(2);
    const second = await cli(['redrive', QUERY, '--into-stream', '--json']);
    expect(second.code).toBe(1);
    const r2 = JSON.parse(second.stdout) as typeof r1;
    expect(r2.redriven).toHaveLength(0);
    expect(r2.alreadyRedriven).toBe(1);
    expect(r2.failedAgain.map((f) => f.sequenceNumber)).toEqual([r1.redriven[0]!.newSequenceNumber]);

    // records put and not processed: lag in records, and unhealthy once older than --max-lag
    const more = sales.slice(0, 6).map((e) => ({ data: JSON.stringify(e), partitionKey: e.store_id }));
    await deployment.put(more);
    await new Promise((r) => setTimeout(r, 2_100));
    const behind = await cli(['status', QUERY, '--json', '--max-lag', '2']);
    expect(behind.code).toBe(1);
    const b = JSON.parse(behind.stdout) as QueryStatus;
    expect(b.healthy).toBe(false);
    expect(b.partitions.reduce((n: number, p: PartitionStatus) => n + (p.lag?.records ?? 0), 0)).toBe(more.length);
    expect(b.problems.join('\n')).toMatch(/behind its stream/);
  }, 240_000);

  it('exits 2 on a usage error: an unknown query, a bad option', async () => {
    const unknown = await cli(['status', 'no-such-query']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/No deployed Sluice query named 'no-such-query'.*found: ops-hourly-sales/s);
    const bad = await cli(['status', QUERY, '--max-lag', 'soon']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--max-lag must be a positive integer/);
  }, 120_000);
});
