/**
 * `sluice progress --follow` against a query running through the real Kinesis handler on the
 * emulators: it prints each progress record once, as its batch commits, in the order of the
 * handler's reports, and stops on SIGINT, after --max records or after --timeout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { hourlySalesQuery } from '../../lib/local/dev/default-query.js';
import type { DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';
import type { StreamingQueryProgress } from '../../lib/runtime/progress.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';
import { PROJECT_ROOT, runSluice, emulatorCliEnv } from '../support/sluice-cli.js';

const QUERY = 'follow-sales';
const stores = ['north', 'south', 'east', 'west', 'central'];
const sales = (n: number, from: number) => Array.from({ length: n }, (_, k) => {
  const i = from + k;
  const e = { store_id: stores[(i * 7) % stores.length]!, amount: 1 + ((i * 13) % 29), ts: new Date(Date.UTC(2024, 4, 1, 14, 0) + i * 4 * 60_000).toISOString() };
  return { data: JSON.stringify(e), partitionKey: e.store_id };
});

let emulators: EmulatorSet;
let dir: string;
let args: (more: string[]) => string[];
let env: Record<string, string>;

type Printed = StreamingQueryProgress & { partitionId: string };

/** The `sluice` process, its JSON lines so far, and a wait for a condition on them. */
function follow(more: string[]) {
  const child: ChildProcess = spawn(process.execPath, ['--conditions=sluice-source', '--import', 'tsx', join(PROJECT_ROOT, 'bin/sluice.ts'), ...args(more)],
    { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => { stdout += c.toString(); });
  child.stderr!.on('data', (c: Buffer) => { stderr += c.toString(); });
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  const lines = (): Printed[] => stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Printed);
  const until = async (ok: (printed: Printed[]) => boolean, what: string): Promise<Printed[]> => {
    for (const started = Date.now(); Date.now() - started < 90_000; await new Promise((r) => setTimeout(r, 200))) {
      if (ok(lines())) return lines();
    }
    child.kill('SIGKILL');
    throw new Error(`sluice progress --follow never printed ${what}:\n${stdout}\n${stderr}`);
  };
  return { child, exited, lines, until, stderr: () => stderr };
}

/** Every batch the handler's invocations committed, once each, as `shard/batch`. */
function committed(deployment: Deployment): string[] {
  const keys = new Set<string>();
  for (const { shardId, result } of deployment.results) for (const p of result.progress) keys.add(`${shardId}/${p.batchId}`);
  return [...keys].sort();
}
const keysOf = (printed: readonly Printed[]) => printed.map((p) => `${p.partitionId}/${p.batchId}`).sort();

beforeAll(async () => {
  emulators = await startEmulators();
  dir = mkdtempSync(join(tmpdir(), 'sluice-follow-test-'));
  env = emulatorCliEnv(emulators);
});
afterAll(async () => {
  await emulators?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('sluice progress --follow', () => {
  it('prints each batch\'s progress once as it commits, and stops on SIGINT, --max and --timeout', async () => {
    const deployment = await deploy(emulators, hourlySalesQuery('update', QUERY), 2);
    const file = join(dir, 'deployment.json');
    writeFileSync(file, JSON.stringify({ ...deployment.config, sluiceQuery: QUERY } satisfies DeploymentDescriptor));
    args = (more) => [...more, '--deployment', file, '--endpoint', `kinesis=${emulators.endpoints.kinesis}`,
      '--endpoint', `dynamodb=${emulators.endpoints.dynamodb}`, '--endpoint', `s3=${emulators.endpoints.s3}`];

    await deployment.put(sales(20, 0));
    await deployment.drain();
    const first = committed(deployment);
    expect(first.length).toBeGreaterThan(2);

    const f = follow(['progress', QUERY, '--follow', '--json', '--interval', '1']);
    const before = await f.until((p) => p.length >= first.length, `the ${first.length} records committed before it started`);
    expect(keysOf(before)).toEqual(first);

    // The query keeps running: the next batches' records follow, each once, and nothing else.
    await deployment.put(sales(16, 20));
    await deployment.drain();
    const all = committed(deployment);
    expect(all.length).toBeGreaterThan(first.length);
    const after = await f.until((p) => p.length >= all.length, `the ${all.length - first.length} records committed while it followed`);
    await new Promise((r) => setTimeout(r, 2_500));
    expect(keysOf(f.lines())).toEqual(all);
    // Printed in commit order: within a shard, batch ids increase.
    for (const shard of new Set(after.map((p) => p.partitionId))) {
      const ids = after.filter((p) => p.partitionId === shard).map((p) => p.batchId);
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
    }
    // Each printed record is the handler's report of that batch.
    for (const p of after) {
      const reported = deployment.results.find((r) => r.shardId === p.partitionId && r.result.progress.some((q) => q.batchId === p.batchId))!
        .result.progress.find((q) => q.batchId === p.batchId)!;
      expect({ rows: p.numInputRows, out: p.sink.numOutputRows }).toEqual({ rows: reported.numInputRows, out: reported.sink.numOutputRows });
    }
    f.child.kill('SIGINT');
    expect(await f.exited, f.stderr()).toBe(0);

    const max = await runSluice(args(['progress', QUERY, '--follow', '--json', '--max', '3']), 60_000, env);
    expect(max.code, max.stderr).toBe(0);
    expect(max.stdout.trim().split('\n')).toHaveLength(3);

    const timed = await runSluice(args(['progress', QUERY, '--follow', '--json', '--interval', '1', '--timeout', '2']), 60_000, env);
    expect(timed.code, timed.stderr).toBe(0);
    expect(keysOf(timed.stdout.trim().split('\n').map((l) => JSON.parse(l) as Printed))).toEqual(all);
  }, 300_000);
});
