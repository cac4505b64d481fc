/**
 * The engine's side of `npm run bench:engine` alone, for a CPU profile of its hot path:
 *   node --max-semi-space-size=64 --cpu-prof --conditions=sluice-source --import tsx bench/windowed-aggregation.profile.ts
 * Prints each run's CPU time and garbage-collection pauses (`PROFILE_RUNS`, default 10; the first 3 warm up).
 */
import { PerformanceObserver } from 'node:perf_hooks';
import { makeBatches, runEngine } from './windowed-aggregation.bench.js';

let gcMs = 0;
let gcCount = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcMs += e.duration;
    gcCount++;
  }
}).observe({ entryTypes: ['gc'] });

const batches = makeBatches();
const cpuMs: number[] = [];
for (let i = 0; i < Number(process.env.PROFILE_RUNS ?? 10); i++) {
  gcMs = 0;
  gcCount = 0;
  const run = await runEngine(batches);
  // GC entries arrive asynchronously: let them in before reading the totals.
  await new Promise((resolve) => setTimeout(resolve, 5));
  if (i >= 3) cpuMs.push(run.cpuSec * 1000);
  console.log(`run ${i}: ${(run.cpuSec * 1000).toFixed(0)} ms CPU, ${gcCount} GCs (${gcMs.toFixed(0)} ms paused)${i < 3 ? ', warm-up' : ''}`);
}
cpuMs.sort((a, b) => a - b);
if (cpuMs.length > 0) console.log(`median CPU per run after warm-up: ${cpuMs[cpuMs.length >> 1]!.toFixed(1)} ms`);
