/**
 * The functions' bundles (issue 17): bytes per function, built with the construct's own esbuild
 * options (bench/function-bundles.ts), and init (module load + handler construction, which the
 * generated entry does at load) in a fresh Node process per sample, against an empty handler's init
 * in the same run, as wall time and as CPU time (which a loaded machine moves far less). Samples
 * alternate between the bundles so that machine load falls on all alike;
 * `BENCH_BUNDLE_SAMPLES` sets how many per bundle (median reported); `BENCH_BUNDLE_SOURCE_MAPS=1`
 * starts every process with --enable-source-maps (what `debugSourceMaps` deploys).
 *
 * `BENCH_BUNDLE_BASELINE=<git revision>` builds that revision's bundles as well (with its own
 * bench/function-bundles.ts, from `git archive`) and alternates their samples with these: a
 * before/after in one run, under the same load (`baseline` in the result).
 */
import { spawnSync } from 'node:child_process';
import { buildBaselineBundles, buildEmptyBundle, buildFunctionBundles, type BuiltBundle } from './function-bundles.js';
import { RUNTIME_ENV } from '../lib/runtime/runtime-config.js';

export interface BundleFigures {
  readonly name: string;
  readonly bytes: number;
  readonly sourceMapBytes: number;
  readonly initMsMedian: number;
  /** CPU time of the same init (user + system, all threads): far less moved by other processes' load than wall time. */
  readonly initCpuMsMedian: number;
}

export interface BundlesResult {
  readonly functions: BundleFigures[];
  /** The same functions built from BENCH_BUNDLE_BASELINE's revision, measured alternately with these. */
  readonly baseline?: { readonly revision: string; readonly functions: BundleFigures[] };
  readonly emptyInitMsMedian: number;
  readonly emptyInitCpuMsMedian: number;
  /** The `--json` summary. */
  readonly summary: { maxBytes: number; initMsMedian: number; emptyInitMsMedian: number; initCpuMsMedian: number; emptyInitCpuMsMedian: number };
}

/** A configuration the handlers accept at construction (nothing is called before an invocation). */
const FAKE_ENV: Record<string, string> = {
  [RUNTIME_ENV.checkpointTable]: 'bench-checkpoint', [RUNTIME_ENV.stateTable]: 'bench-state',
  [RUNTIME_ENV.deadLetterBucket]: 'bench-dead-letters', [RUNTIME_ENV.streamName]: 'bench-stream',
  AWS_REGION: 'eu-west-1', AWS_ACCESS_KEY_ID: 'bench', AWS_SECRET_ACCESS_KEY: 'bench',
};
const SINK_ENV: Record<string, Record<string, string>> = {
  'update-dynamodb': { [RUNTIME_ENV.sinkTable]: 'bench-sink' },
  'per-product-repartitioned': { [RUNTIME_ENV.sinkTable]: 'bench-sink', [RUNTIME_ENV.repartitionStreamName]: 'bench-repartition' },
};

// Timed inside the child: process start-up is the same for every bundle and not the bundle's cost.
// The clock stops when the event loop is empty, so that work the load starts without waiting for
// it (a module loaded in the background for the first invocation) is counted too.
// Prints "<wall ms> <cpu ms>".
const INIT_SCRIPT = `const t=process.hrtime.bigint();const c=process.cpuUsage();const m=require(process.argv[1]);`
  + `if(typeof m.handler!=='function')throw new Error('no handler');`
  + `process.once('beforeExit',()=>{const u=process.cpuUsage(c);`
  + `process.stdout.write(Number(process.hrtime.bigint()-t)/1e6+' '+(u.user+u.system)/1e3)})`;

function initMs(bundle: BuiltBundle): { wall: number; cpu: number } {
  const query = bundle.name.split('/')[0]!.replace(/^baseline:/, '');
  const env = { PATH: process.env.PATH ?? '', ...FAKE_ENV, ...(SINK_ENV[query] ?? { [RUNTIME_ENV.sinkBucket]: 'bench-sink' }) };
  const flags = process.env.BENCH_BUNDLE_SOURCE_MAPS === '1' ? ['--enable-source-maps'] : [];
  const run = spawnSync(process.execPath, [...flags, '-e', INIT_SCRIPT, bundle.file], { env, encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`init of ${bundle.name} failed: ${run.stderr}`);
  const [wall, cpu] = run.stdout.split(' ').map(Number);
  return { wall: wall!, cpu: cpu! };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function measureBundles(samples = Number(process.env.BENCH_BUNDLE_SAMPLES ?? 5)): Promise<BundlesResult> {
  const bundles = await buildFunctionBundles();
  const empty = await buildEmptyBundle();
  const baselineRevision = process.env.BENCH_BUNDLE_BASELINE;
  const baseline = baselineRevision ? buildBaselineBundles(baselineRevision) : [];
  const times = new Map<BuiltBundle, { wall: number; cpu: number }[]>([...bundles, ...baseline, empty].map((b) => [b, []]));
  for (let round = 0; round < samples; round++) {
    for (const [bundle, xs] of times) xs.push(initMs(bundle));
  }
  const wall = (b: BuiltBundle): number => median(times.get(b)!.map((x) => x.wall));
  const cpu = (b: BuiltBundle): number => median(times.get(b)!.map((x) => x.cpu));
  const figures = (b: BuiltBundle): BundleFigures => ({ name: b.name, bytes: b.bytes, sourceMapBytes: b.sourceMapBytes, initMsMedian: wall(b), initCpuMsMedian: cpu(b) });
  const functions = bundles.map(figures);
  const emptyInitMsMedian = wall(empty);
  const emptyInitCpuMsMedian = cpu(empty);
  return {
    functions, emptyInitMsMedian, emptyInitCpuMsMedian,
    ...(baselineRevision ? { baseline: { revision: baselineRevision, functions: baseline.map(figures) } } : {}),
    summary: {
      maxBytes: Math.max(...functions.map((f) => f.bytes)),
      initMsMedian: Math.max(...functions.map((f) => f.initMsMedian)),
      emptyInitMsMedian,
      initCpuMsMedian: Math.max(...functions.map((f) => f.initCpuMsMedian)),
      emptyInitCpuMsMedian,
    },
  };
}

export function printBundles(result: BundlesResult): void {
  console.log('Function bundles (construct\'s esbuild options; init = module load + handler construction, fresh process, median):');
  for (const f of result.functions) {
    console.log(`  ${f.name.padEnd(40)} ${(f.bytes / 1000).toFixed(0).padStart(5)} kB code, ${(f.sourceMapBytes / 1000).toFixed(0).padStart(5)} kB map (external), `
      + `init ${f.initMsMedian.toFixed(0)} ms = ${(f.initMsMedian / result.emptyInitMsMedian).toFixed(1)}x the empty handler's, CPU ${f.initCpuMsMedian.toFixed(0)} ms`);
  }
  for (const before of result.baseline?.functions ?? []) {
    const after = result.functions.find((f) => `baseline:${f.name}` === before.name);
    if (!after) continue;
    console.log(`  ${before.name.replace('baseline:', `${result.baseline!.revision}: `).padEnd(40)} ${(before.bytes / 1000).toFixed(0).padStart(5)} kB code, init ${before.initMsMedian.toFixed(0)} ms, `
      + `CPU ${before.initCpuMsMedian.toFixed(0)} ms -> now ${after.initCpuMsMedian.toFixed(0)} ms (${(after.initCpuMsMedian / before.initCpuMsMedian).toFixed(2)}x)`);
  }
  console.log(`  empty handler init ${result.emptyInitMsMedian.toFixed(1)} ms (CPU ${result.emptyInitCpuMsMedian.toFixed(1)} ms); largest bundle ${result.summary.maxBytes} bytes, `
    + `slowest init ${result.summary.initMsMedian.toFixed(0)} ms (CPU ${result.summary.initCpuMsMedian.toFixed(0)} ms)`);
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  printBundles(await measureBundles());
}
