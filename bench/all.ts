/**
 * `npm run bench`: the engine throughput ratio, then the repartition hop's cost. Both read
 * `--json` from the command line (one JSON line each).
 */
await import('./windowed-aggregation.bench.js');
await import('./repartition-hop.bench.js');
