/**
 * `npm run bench`: the engine's throughput against the hand-written baseline (a ratio), then the
 * repartition hop's cost. `--json` prints one object: `engineEventsPerSec`, `baselineEventsPerSec`,
 * `ratio`, and `repartitionHop` (per 1,000 input events, for a few batch sizes and shard counts).
 */
import { measureWindowedAggregation, printWindowedAggregation } from './windowed-aggregation.bench.js';
import { measureRepartitionHop, printRepartitionHop } from './repartition-hop.bench.js';

const engine = await measureWindowedAggregation();
const repartitionHop = await measureRepartitionHop();
if (process.argv.includes('--json')) {
  console.log(JSON.stringify({ ...engine, repartitionHop }));
} else {
  printWindowedAggregation(engine);
  console.log('');
  printRepartitionHop(repartitionHop);
}
