/**
 * `npm run chaos -- --seed S --runs R`: the exactly-once chaos harness (lib/local/chaos/run-chaos.ts).
 * Prints one line per run and ends with `runs=R lost=L duplicated=D mismatched=M`; the exit code
 * is non-zero when any of them is, or when the in-memory engine disagrees with the fault-free run.
 */
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { Command, InvalidArgumentError } from 'commander';
import { runChaos } from '../lib/local/chaos/run-chaos.js';

const int = (min: number) => (value: string): number => {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min) throw new InvalidArgumentError(`must be an integer >= ${min}.`);
  return n;
};

const program = new Command()
  .name('chaos')
  .description('inject Lambda crashes, throttling and duplicate deliveries into the emulator pipeline and check exactly-once')
  .option('--seed <n>', 'seed of the events and of every run\'s faults', int(0), 1)
  .option('--runs <n>', 'runs with faults (each on fresh tables and prefixes)', int(1), 5)
  .option('--shards <n>', 'Kinesis shards', int(1), 2)
  .option('--batch-size <n>', 'records per invocation', int(1), 10)
  .option('--stores <n>', 'stores in the generated events (1-11)', int(1), 6)
  .option('--hours <n>', 'hours of generated events', int(1), 4)
  .option('--extra-faults <n>', 'faults per query and run beyond one of each kind', int(0), 2)
  .option('--verbose', 'print every injected fault')
  .option('--trace', 'print every batch\'s progress')
  .option('--no-repartition', 'leave out the query with a repartition stage (hourly sales per product)')
  .option('--late-rows <n>', 'late rows put in wave 2, after every shard went idle', int(0), 3)
  .parse(process.argv);

const opts = program.opts<{ seed: number; runs: number; shards: number; batchSize: number; stores: number; hours: number; extraFaults: number; verbose?: boolean; trace?: boolean; lateRows: number; repartition: boolean }>();

try {
  const report = await runChaos({
    seed: opts.seed, runs: opts.runs, shards: opts.shards, batchSize: opts.batchSize, stores: Math.min(opts.stores, 11), hours: opts.hours,
    extraFaults: opts.extraFaults, verbose: opts.verbose === true, trace: opts.trace === true, lateRows: opts.lateRows, repartition: opts.repartition,
  });
  const ok = report.lost + report.duplicated + report.mismatched === 0 && report.memory.matches;
  process.exit(ok ? 0 : 1);
} catch (error) {
  process.stderr.write(`chaos: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exit(2);
}
