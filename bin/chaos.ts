/**
 * `npm run chaos -- --seed S --runs R`: the exactly-once chaos harness (lib/local/chaos/run-chaos.ts).
 * Prints one line per run and ends with `runs=R lost=L duplicated=D mismatched=M`; the exit code
 * is non-zero when any of them is, when a planned fault never happened, or when the in-memory
 * engine disagrees with the fault-free run. `--large` runs thousands of rows.
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
  .option('--no-stages', 'leave out the queries of several stages (a chain of two aggregates; a join of two streams, then an aggregate)')
  .option('--late-rows <n>', 'late rows put in wave 2, after every shard went idle', int(0), 3)
  .option('--events-per-store-hour <n>', 'average events per store and hour', int(1), 4)
  .option('--large', 'thousands of rows: 11 stores, 8 hours, 30 events per store and hour, batch size 100')
  .option('--max-retries <n>', 'retries before the event source mapping gives a batch up (-1: forever)', (v: string) => (v === '-1' ? -1 : int(0)(v)), 4)
  .option('--poison <n>', 'records that crash the function every time (dead-lettered by the on-failure destination)', int(0), 2)
  .option('--no-scheduled-faults', 'run the scheduled function without faults')
  .option('--reshard', 'also plan reshard-mid-run: split or merge the stream a function reads, mid-run')
  .option('--expire-planned', 'also plan planned-then-expired (opt-in until the runs pass; under the simulated retention timeline: a planned batch\'s first records fail until given up, then expire from the stream)')
  .parse(process.argv);

const opts = program.opts<{
  seed: number; runs: number; shards: number; batchSize: number; stores: number; hours: number; extraFaults: number; verbose?: boolean; trace?: boolean;
  lateRows: number; repartition: boolean; stages: boolean; eventsPerStoreHour: number; large?: boolean; maxRetries: number; poison: number; scheduledFaults: boolean; reshard?: boolean; expirePlanned?: boolean;
}>();
const large = opts.large === true;
const given = (name: string): boolean => program.getOptionValueSource(name) === 'cli';

try {
  const report = await runChaos({
    seed: opts.seed, runs: opts.runs, shards: opts.shards,
    batchSize: large && !given('batchSize') ? 100 : opts.batchSize,
    stores: large && !given('stores') ? 11 : Math.min(opts.stores, 11),
    hours: large && !given('hours') ? 8 : opts.hours,
    eventsPerStoreHour: large && !given('eventsPerStoreHour') ? 30 : opts.eventsPerStoreHour,
    extraFaults: opts.extraFaults, verbose: opts.verbose === true, trace: opts.trace === true, lateRows: opts.lateRows, repartition: opts.repartition, stages: opts.stages,
    maxRetries: opts.maxRetries, poisonRecords: opts.poison, scheduledFaults: opts.scheduledFaults, reshard: opts.reshard === true, expirePlanned: opts.expirePlanned === true,
  });
  // Loss, duplicates, mismatches, a planned fault that never happened, or memory disagreeing.
  process.exit(report.ok ? 0 : 1);
} catch (error) {
  process.stderr.write(`chaos: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exit(2);
}
