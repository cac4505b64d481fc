/**
 * The `sluice` command line (bin/sluice.ts registers the TypeScript loader, then imports this).
 *
 *   sluice dev [query-module] [--input events.jsonl | --input <source>=<file> ...] [--shards N] [--out DIR] [--batch-size N]
 *              [--mode append|update|complete] [--seed S] [--quiet] [--rate N/s] [--ui [port]]
 *   sluice explain [query-module] [--shards N] [--no-repartition]
 *   sluice status|progress|state <query> ...   a deployed query (bin/commands/)
 *   sluice diff <query-module> --against <query>, sluice cost <query-module> --rate N/s
 *   sluice replay start|run|status|cutover|abort <query> ...   recompute a query beside the live run, then switch
 *   sluice spill gc <query> [--dry-run] [--grace-hours N]   delete spilled objects no item points to (two runs a grace apart)
 *
 * Exit codes: 0 healthy or done, 1 unhealthy or failed, 2 usage error (bad option, unknown query).
 */

import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { registerDeployedQueryCommands } from './commands/index.js';
import { EXIT } from './commands/common.js';
import { DeploymentNotFoundError } from '../lib/aws/deployment-lookup.js';
import { runDev } from '../lib/local/dev/run-dev.js';
import { hourlySalesQuery } from '../lib/local/dev/default-query.js';
import { importQueryModule } from '../lib/query/query-module.js';
import { explainQuery } from '../lib/query/validate-query.js';
import type { OutputMode } from '../lib/core/output-mode.js';
import { SluiceError } from '../lib/errors/sluice-error.js';
import { parseRate } from '../lib/local/dev/put-at-rate.js';
import { ProgressBoard } from '../lib/local/dev/ui/progress-board.js';
import { startUiServer } from '../lib/local/dev/ui/ui-server.js';

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
  .showHelpAfterError()
  // Usage errors reach the catch below (exit code 2) instead of commander's own exit(1).
  .exitOverride();

program
  .command('dev')
  .description('run a query locally, end to end: embedded Kinesis/DynamoDB/S3 emulators, the real Lambda handlers, '
    + 'a local event source mapping; prints every batch')
  .argument('[query-module]', 'a module whose default export is a QueryDefinition (default: hourly sales per store)')
  .option('--input <file>', 'events to put, one JSON object (or CSV line) per line (default: generated sample sales); '
    + 'a query over several streams takes <source>=<file> once per source', (value: string, previous: string[] = []) => [...previous, value])
  .option('--shards <n>', 'Kinesis shards', positiveInt('--shards'), 2)
  .option('--out <dir>', 'write the final sink contents and dead-letters.jsonl here')
  .option('--batch-size <n>', 'records per Lambda invocation (the event source mapping\'s BatchSize)', positiveInt('--batch-size'), 25)
  .addOption(new Option('--mode <mode>', 'output mode (the default query: update → DynamoDB, append → S3 files, complete → S3 snapshot)')
    .choices(['append', 'update', 'complete']))
  .option('--seed <n>', 'seed of the generated sample events', positiveInt('--seed'))
  .option('--quiet', 'print only the summary, not every batch')
  .option('--rate <n/s>', 'put the records at this rate (e.g. 200/s, 30/min) instead of each wave at once', (v: string) => {
    try { return parseRate(v); } catch (error) { throw new InvalidArgumentError((error as Error).message); }
  })
  .option('--ui [port]', 'serve a live progress page (Spark UI\'s streaming tab) on 127.0.0.1 (default: a free port); it stays up after the run until Ctrl-C')
  .action(async (queryModule: string | undefined, opts: {
    input?: string[]; shards: number; out?: string; batchSize: number; mode?: OutputMode; seed?: number; quiet?: boolean; rate?: number; ui?: string | boolean;
  }) => {
    const board = opts.ui ? new ProgressBoard() : undefined;
    const port = typeof opts.ui === 'string' ? positiveInt('--ui')(opts.ui) : 0;
    const server = board ? await startUiServer(board, { port }) : undefined;
    if (server) process.stdout.write(`progress page: ${server.url}\n`);
    await runDev({
      queryModule, input: opts.input, shards: opts.shards, out: opts.out, batchSize: opts.batchSize, mode: opts.mode,
      seed: opts.seed, handleSignals: true, quiet: opts.quiet, ratePerSecond: opts.rate, board,
    });
    if (server) {
      process.stdout.write(`progress page: ${server.url} (stays up; Ctrl-C to stop)\n`);
      await new Promise<void>((resolve) => { process.once('SIGINT', () => resolve()); process.once('SIGTERM', () => resolve()); });
      await server.close();
    }
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

registerDeployedQueryCommands(program);

try {
  await program.parseAsync(process.argv);
  // Emulator children and SDK sockets are gone; exit at once rather than wait for stray timers.
  process.exit(process.exitCode ?? EXIT.ok);
} catch (error) {
  // Thrown by an action (commander prints only what its own parsing finds).
  if (error instanceof InvalidArgumentError) process.stderr.write(`error: ${error.message}\n`);
  if (error instanceof CommanderError) {
    // commander printed the problem (or the help/version, exit code 0) already.
    process.exit(error.exitCode === 0 ? EXIT.ok : EXIT.usage);
  }
  if (error instanceof DeploymentNotFoundError) {
    process.stderr.write(`${error.message}\n`);
    process.exit(EXIT.usage);
  }
  if (error instanceof SluiceError) {
    process.stderr.write(`${error.message}\n`);
  } else {
    // The stack helps with unexpected failures; SLUICE_DEBUG=1 shows it.
    const e = error as Error;
    process.stderr.write(`sluice: ${process.env.SLUICE_DEBUG ? e?.stack ?? String(error) : e?.message ?? String(error)}\n`);
  }
  process.exit(1);
}
