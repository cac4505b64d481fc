/**
 * What writing one state snapshot costs in memory and time: the whole JSON text compressed at once
 * (the baseline, as the state store wrote it before) against the text streamed into gzip a piece at
 * a time (lib/aws/state-payload-stream.ts), over the same state, each in its own Node process with
 * the construct's semi-space flag (and --expose-gc for the live-set reading). Ratios in one run, as the project's benchmarks report.
 *
 *   node --conditions=sluice-source --import tsx bench/state-snapshot-memory.bench.ts
 *   SNAPSHOT_KEYS=300000 ...                       (default 1,000,000 keys)
 *
 * The state: the windowed count+sum of bench/limits.ts, one entry per (window, user) key.
 * Reported per mode: the peak resident set above the one before the write (what could pass the
 * function's memory mid-write), the resident set after the write, the live set after a GC, the
 * write's wall time, the payload's bytes (equal in both modes).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { encodeStateJson } from '../lib/aws/state-json.js';
import { gzipJsonParts } from '../lib/aws/state-payload-stream.js';
import { liveBytesAfterGc } from './live-set.js';

const MB = 1024 * 1024;
type Mode = 'whole' | 'streamed';

async function child(mode: Mode, keys: number): Promise<Record<string, unknown>> {
  const state = new Map<string, unknown>();
  for (let i = 0; i < keys; i++) {
    state.set(`[{"start":1714521600000000,"end":1714608000000000},"user-${i}"]`, [[1, (i % 997) / 10, 0], { count: 1 }]);
  }
  (globalThis as { gc?: () => void }).gc?.();
  const before = process.memoryUsage().rss;
  const t0 = performance.now();
  let payload: Buffer;
  if (mode === 'whole') {
    const entries = [...state.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    payload = gzipSync(encodeStateJson({ e: entries }, entries.map((e) => e[1])));
  } else {
    const sorted = [...state.keys()].sort();
    payload = await gzipJsonParts(['{"e":[', { elements: (function* () { for (const k of sorted) yield [k, state.get(k)]; })() }, ']}']);
  }
  const ms = performance.now() - t0;
  const after = process.memoryUsage().rss;
  const peak = process.resourceUsage().maxRSS * 1024;
  const live = liveBytesAfterGc();
  return {
    mode, keys, payloadBytes: payload.byteLength, writeMs: Math.round(ms), rssBeforeMb: Math.round(before / MB),
    peakAboveBeforeMb: Math.round((peak - before) / MB), rssAfterMb: Math.round(after / MB), liveAfterGcMb: Math.round(live / MB),
  };
}

function run(mode: Mode, keys: number): Record<string, number | string> {
  const out = spawnSync(process.execPath, ['--max-semi-space-size=64', '--expose-gc', '--conditions=sluice-source', '--import', 'tsx', fileURLToPath(import.meta.url)], {
    env: { ...process.env, SNAPSHOT_CHILD: JSON.stringify({ mode, keys }) }, encoding: 'utf8', maxBuffer: 16 * MB,
  });
  const line = out.stdout.trim().split('\n').pop() ?? '';
  if (out.status !== 0 || !line.startsWith('{')) throw new Error(`${mode} failed (${out.status}): ${out.stderr.slice(-2000)}`);
  return JSON.parse(line) as Record<string, number | string>;
}

function main(): void {
  const keys = Number(process.env.SNAPSHOT_KEYS ?? 1_000_000);
  const whole = run('whole', keys);
  const streamed = run('streamed', keys);
  console.log(JSON.stringify(whole));
  console.log(JSON.stringify(streamed));
  const ratio = (k: string): number => +(Number(streamed[k]) / Number(whole[k])).toFixed(2);
  console.log(`state-snapshot-memory ${keys} keys, streamed / whole: peak above before ${ratio('peakAboveBeforeMb')}, `
    + `rss after ${ratio('rssAfterMb')}, live after GC ${ratio('liveAfterGcMb')}, write time ${ratio('writeMs')}, same bytes ${whole.payloadBytes === streamed.payloadBytes}`);
}

const input = process.env.SNAPSHOT_CHILD;
if (input) {
  const { mode, keys } = JSON.parse(input) as { mode: Mode; keys: number };
  child(mode, keys).then((r) => { console.log(JSON.stringify(r)); process.exit(0); }, (e: unknown) => { console.error(e); process.exit(1); });
} else if (import.meta.url === `file://${process.argv[1]}`) {
  main();
}
