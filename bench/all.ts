/**
 * `npm run bench`: the engine's throughput against the hand-written baseline (a ratio), then the
 * repartition hop's cost. `--json` prints one object: `engineEventsPerSec`, `baselineEventsPerSec`,
 * `ratio`, `repartitionHop` (per 1,000 input events, for a few batch sizes and shard counts), and
 * `lakeFiles` (the files sink's PUTs and bytes per 1M events, JSON Lines and Parquet, with and
 * without compaction).
 */
import { measureWindowedAggregation, printWindowedAggregation } from './windowed-aggregation.bench.js';
import { measureRepartitionHop, printRepartitionHop } from './repartition-hop.bench.js';
import { measureLakeFiles, printLakeFiles } from './lake-files.bench.js';

const engine = await measureWindowedAggregation();
const repartitionHop = await measureRepartitionHop();
const lakeFiles = await measureLakeFiles();
if (process.argv.includes('--json')) {
  console.log(JSON.stringify({ ...engine, repartitionHop, lakeFiles }));
} else {
  printWindowedAggregation(engine);
  console.log('');
  printRepartitionHop(repartitionHop);
  console.log('');
  printLakeFiles(lakeFiles);
}
