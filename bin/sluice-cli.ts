/**
 * The `sluice` command line (bin/sluice.ts registers the TypeScript loader, then imports this).
 *
 *   sluice dev [query-module] [--input events.jsonl] [--shards N] [--out DIR] [--batch-size N]
 *              [--mode append|update|complete] [--seed S]
 *   sluice explain [query-module] [--shards N] [--no-repartition]
 */

import { Command, InvalidArgumentError, Option } from 'commander';
import { runDev } from '../lib/local/dev/run-dev.js';
import { hourlySalesQuery } from '../lib/local/dev/default-query.js';
import { importQueryModule } from '../lib/query/query-module.js';
import { explainQuery } from '../lib/query/validate-query.js';
import type { OutputMode } from '../lib/core/output-mode.js';
import { SluiceError } from '../lib/errors/sluice-error.js';

function positiveInt(name: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`${name} must be a positive integer.`);
    return n;
  };
}

const program = new Command()
  .name('sluice')
  .description('Sluice: Spark Structured Streaming\'s model as a serverless pipeline (Kinesis → Lambda → DynamoDB/S3)')
  .showHelpAfterError();

program
  .command('dev')
  .description('run a query locally, end to end: embedded Kinesis/DynamoDB/S3 emulators, the real Lambda handlers, '
    + 'a local event source mapping; prints every batch')
  .argument('[query-module]', 'a module whose default export is a QueryDefinition (default: hourly sales per store)')
  .option('--input <file>', 'events to put, one JSON object (or CSV line) per line (default: generated sample sales)')
  .option('--shards <n>', 'Kinesis shards', positiveInt('--shards'), 2)
  .option('--out <dir>', 'write the final sink contents and dead-letters.jsonl here')
  .option('--batch-size <n>', 'records per Lambda invocation (the event source mapping\'s BatchSize)', positiveInt('--batch-size'), 25)
  .addOption(new Option('--mode <mode>', 'output mode (the default query: update → DynamoDB, append → S3 files, complete → S3 snapshot)')
    .choices(['append', 'update', 'complete']))
  .option('--seed <n>', 'seed of the generated sample events', positiveInt('--seed'))
  .action(async (queryModule: string | undefined, opts: { input?: string; shards: number; out?: string; batchSize: number; mode?: OutputMode; seed?: number }) => {
    await runDev({
      queryModule, input: opts.input, shards: opts.shards, out: opts.out, batchSize: opts.batchSize, mode: opts.mode,
      seed: opts.seed, handleSignals: true,
    });
  });

program
  .command('explain')
  .description('validate a query module without running it and print its logical and incremental plans, '
    + 'and where a repartition stage cuts it (or why the query is refused)')
  .argument('[query-module]', 'a module whose default export is a QueryDefinition (default: hourly sales per store)')
  .option('--shards <n>', 'source stream shards (1 needs no partition key for stateful queries)', positiveInt('--shards'))
  .option('--no-repartition', 'refuse instead of adding a repartition stage')
  .action(async (queryModule: string | undefined, opts: { shards?: number; repartition: boolean }) => {
    const definition = queryModule ? await importQueryModule(queryModule) : hourlySalesQuery();
    process.stdout.write(`${explainQuery(definition, { expectedShardCount: opts.shards, allowRepartition: opts.repartition })}\n`);
  });

try {
  await program.parseAsync(process.argv);
  // Emulator children and SDK sockets are gone; exit at once rather than wait for stray timers.
  process.exit(0);
} catch (error) {
  if (error instanceof SluiceError) {
    process.stderr.write(`${error.message}\n`);
  } else {
    // The stack helps with unexpected failures; SLUICE_DEBUG=1 shows it.
    const e = error as Error;
    process.stderr.write(`sluice: ${process.env.SLUICE_DEBUG ? e?.stack ?? String(error) : e?.message ?? String(error)}\n`);
  }
  process.exit(1);
}
