/**
 * `npm run bench`: the engine's throughput against the hand-written baseline (a ratio), then the
 * repartition hop's cost. `--json` prints one object: `engineEventsPerSec`, `baselineEventsPerSec`,
 * `ratio`, `repartitionHop` (per 1,000 input events, for a few batch sizes and shard counts), and
 * `lakeFiles` (the files sink's PUTs and bytes per 1M events, JSON Lines and Parquet, with and
 * without compaction), and `e2e` (the end-to-end cost benchmark's summary: dollars per 1M events
 * for the three queries, round trips per steady-state invocation besides the sink, state write
 * units per event at 100,000 keys; `BENCH_E2E=0` skips it, `BENCH_E2E_BATCHES` sizes it), and
 * `bundles` (the largest function bundle's bytes, the slowest function's median init and the empty
 * handler's, bench/bundles.bench.ts; `BENCH_BUNDLES=0` skips it), and `statefulTimers` (DynamoDB units and
 * compute per batch of a timer-heavy transformWithState query, bench/stateful-timers.bench.ts;
 * `BENCH_TIMERS=0` skips it), and `timestampParse` (the decoders' event-time parsing against the
 * general ISO-8601 parser, bench/timestamp-parse.bench.ts).
 */
import { measureWindowedAggregation, printWindowedAggregation } from './windowed-aggregation.bench.js';
import { measureRepartitionHop, printRepartitionHop } from './repartition-hop.bench.js';
import { measureLakeFiles, printLakeFiles } from './lake-files.bench.js';
import { measureEndToEndCost, printEndToEndCost } from './e2e-cost.bench.js';
import { measureBundles, printBundles } from './bundles.bench.js';
import { measureStatefulTimers, printStatefulTimers } from './stateful-timers.bench.js';
import { measureTimestampParse, printTimestampParse } from './timestamp-parse.bench.js';

const engine = await measureWindowedAggregation();
const repartitionHop = await measureRepartitionHop();
const lakeFiles = await measureLakeFiles();
const e2e = process.env.BENCH_E2E === '0' ? null : await measureEndToEndCost();
const bundles = process.env.BENCH_BUNDLES === '0' ? null : await measureBundles();
const statefulTimers = process.env.BENCH_TIMERS === '0' ? null : await measureStatefulTimers();
const timestampParse = measureTimestampParse();
if (process.argv.includes('--json')) {
  console.log(JSON.stringify({ ...engine, repartitionHop, lakeFiles, ...(e2e ? { e2e: e2e.summary } : {}), ...(bundles ? { bundles: bundles.summary } : {}), ...(statefulTimers ? { statefulTimers } : {}), timestampParse }));
} else {
  printWindowedAggregation(engine);
  console.log('');
  printRepartitionHop(repartitionHop);
  console.log('');
  printLakeFiles(lakeFiles);
  if (e2e) {
    console.log('');
    printEndToEndCost(e2e);
  }
  if (bundles) {
    console.log('');
    printBundles(bundles);
  }
  if (statefulTimers) {
    console.log('');
    printStatefulTimers(statefulTimers);
  }
  console.log('');
  printTimestampParse(timestampParse);
}
