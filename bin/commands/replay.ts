/**
 * `sluice replay start|status|run|cutover|abort <query>`: recompute a deployed query from an earlier
 * stream position beside the live run (a shadow), then make it the live one (lib/aws/replay.ts).
 */
import { type Command, InvalidArgumentError } from 'commander';
import {
  abortReplay, cutoverReplay, DEFAULT_SWEEP_AFTER_MS, replayStatus, rollbackReplay, runtimeConfigOf, startReplay, sweepAbortedReplays,
} from '../../lib/aws/replay.js';
import { createScheduledTriggerHandler } from '../../lib/aws/scheduled-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { importQueryModule } from '../../lib/query/query-module.js';
import type { QueryDefinition } from '../../lib/query/query-definition.js';
import { addAwsOptions, connect, EXIT, positiveInt, print, table, type AwsOptions } from './common.js';

function positiveIntOrZero(name: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a whole number, 0 or more.`);
    return n;
  };
}

function parseTime(value: string): number {
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new InvalidArgumentError('--from must be an ISO time, e.g. 2026-12-04T10:00:00Z.');
  return ms;
}

async function queryModuleFor(query: string, file: string | undefined): Promise<QueryDefinition | undefined> {
  if (!file) return undefined;
  const definition = await importQueryModule(file);
  if (definition.name !== query) throw new InvalidArgumentError(`--query-module ${file} defines query '${definition.name}', not '${query}'.`);
  return definition;
}

type Connection = Awaited<ReturnType<typeof connect>>;

/**
 * Runs the scheduled handler in replay mode until the shadow has caught up with the live run;
 * answers the rounds it took, or null when it had not after `maxRounds`.
 */
async function driveShadow(
  query: string, definition: QueryDefinition, c: Connection, opts: AwsOptions & { batchSize: number; maxRounds: number }, report = true,
): Promise<number | null> {
  const handler = createScheduledTriggerHandler(definition, {
    config: runtimeConfigOf(c.deployment), clients: c.clients, observability: createQuietObservability(query), drainBatchSize: opts.batchSize,
    onInvocation: (shardId, result) => {
      if (opts.json) return;
      for (const p of result.progress) process.stdout.write(`shadow ${shardId} batch ${p.batchId}: ${p.numInputRows} row(s) in, ${p.sink.numOutputRows} out\n`);
    },
  });
  for (let round = 1; round <= opts.maxRounds; round++) {
    const summary = await handler({ mode: 'replay' });
    if (!summary.replay) throw new InvalidArgumentError(`No replay of '${query}' is running (\`sluice replay start\` first).`);
    if (summary.replay.error) throw new Error(summary.replay.error);
    const failed = summary.replay.shards.filter((s) => s.error);
    if (failed.length > 0) throw new Error(`the shadow failed: ${failed.map((s) => `${s.shardId}: ${s.error}`).join('; ')}`);
    const status = await replayStatus(c.clients, c.deployment);
    if (status.ready) {
      if (report) print(opts, { ready: true, rounds: round, shards: status.shards }, () => `replay ${status.shadow!.runId}: caught up with the live run (${round} round(s)); ready for the cutover`);
      return round;
    }
  }
  print(opts, { ready: false }, () => `replay not caught up after ${opts.maxRounds} round(s): the live run moves faster; run again`);
  return null;
}

export function registerReplayCommand(program: Command): void {
  const replay = program
    .command('replay')
    .description('recompute a query from an earlier stream position in a shadow (its own checkpoint namespace and sink location) '
      + 'beside the live run, then cut over to it: start, run, status, cutover, abort, rollback');

  addAwsOptions(replay
    .command('start')
    .description('create the shadow: every shard is read from --from (closed parent shards included, while the stream retains them)')
    .argument('<query>', 'the query\'s name')
    .requiredOption('--from <time>', 'the stream position to recompute from, an ISO time (GetShardIterator AT_TIMESTAMP)', parseTime)
    .option('--query-module <file>', 'the fixed query, not deployed yet: `sluice replay run` drives the shadow with it '
      + '(without: the deployed scheduled function drives it with the deployed code)')
    .option('--sink-table <name>', 'DynamoDB sink: the table the shadow writes (created if missing); required for such a query'))
    .action(async (query: string, opts: AwsOptions & { from: number; queryModule?: string; sinkTable?: string }) => {
      const definition = await queryModuleFor(query, opts.queryModule);
      const c = await connect(query, opts);
      try {
        const run = await startReplay(c.clients, c.deployment, { fromMs: opts.from, ...(definition ? { definition } : {}), ...(opts.sinkTable ? { sinkTable: opts.sinkTable } : {}) });
        print(opts, run, () => [
          `replay ${run.runId} of ${query} started from ${new Date(run.fromMs).toISOString()}`,
          `namespace: ${run.namespace}`,
          run.sinkPrefix ? `sink: s3://${c.deployment.sinkBucket}/${run.sinkPrefix}` : `sink: table ${run.sinkTable}`,
          run.drivenBy === 'cli'
            ? `driven by: sluice replay run ${query} --query-module ${opts.queryModule}`
            : 'driven by: the deployed scheduled function, at each tick',
        ].join('\n'));
      } finally {
        c.close();
      }
    });

  addAwsOptions(replay
    .command('run')
    .description('drive the shadow in this process, as the scheduled function would: read every shard and run batches until it has '
      + 'caught up with the live run; exit 0 when ready for the cutover')
    .argument('<query>', 'the query\'s name')
    .requiredOption('--query-module <file>', 'the query the shadow runs (the fixed one)')
    .option('--batch-size <n>', 'records per batch', positiveInt('--batch-size'), 1000)
    .option('--max-rounds <n>', 'give up after this many passes over the shards (the live run may keep moving)', positiveInt('--max-rounds'), 20))
    .action(async (query: string, opts: AwsOptions & { queryModule: string; batchSize: number; maxRounds: number }) => {
      const definition = (await queryModuleFor(query, opts.queryModule))!;
      const c = await connect(query, opts);
      try {
        const rounds = await driveShadow(query, definition, c, opts);
        process.exitCode = rounds === null ? EXIT.unhealthy : EXIT.ok;
      } finally {
        c.close();
      }
    });

  addAwsOptions(replay
    .command('status')
    .description('the shadow\'s progress against the live run, per shard; exit 0 when it has caught up (ready for the cutover), 1 otherwise')
    .argument('<query>', 'the query\'s name'))
    .action(async (query: string, opts: AwsOptions) => {
      const c = await connect(query, opts);
      try {
        const { pointer: _pointer, ...status } = await replayStatus(c.clients, c.deployment);
        print(opts, status, () => (status.shadow
          ? [
            `${status.shadow.rollback ? `rollback ${status.shadow.runId} of ${query} to ${status.shadow.namespace}` : `replay ${status.shadow.runId} of ${query} from ${new Date(status.shadow.fromMs).toISOString()}`}: ${status.ready ? 'READY (caught up; `sluice replay cutover`)' : 'catching up'}`,
            `live namespace: ${status.active}; shadow: ${status.shadow.namespace}`,
            table(['shard', 'live batch', 'shadow batch', 'records behind'], status.shards.map((s) => [
              s.label, s.liveBatch === null ? '-' : String(s.liveBatch), s.shadowBatch === null ? '-' : String(s.shadowBatch), `${s.behind}${s.capped ? '+' : ''}`,
            ])),
          ]
          : [`no replay of ${query} is running; live namespace: ${status.active}${status.retired.length > 0 ? ` (retired: ${status.retired.join(', ')})` : ''}`]).join('\n'));
        process.exitCode = status.ready ? EXIT.ok : EXIT.unhealthy;
      } finally {
        c.close();
      }
    });

  addAwsOptions(replay
    .command('cutover')
    .description('make the caught-up shadow the live namespace in one conditional write (refused, exit 1, before it has caught up); '
      + 'the old namespace is kept for rollback')
    .argument('<query>', 'the query\'s name'))
    .action(async (query: string, opts: AwsOptions) => {
      const c = await connect(query, opts);
      try {
        const result = await cutoverReplay(c.clients, c.deployment);
        print(opts, result, () => [
          `${result.already ? 'already cut over' : 'cut over'}: ${query} now runs in ${result.namespace} (the old namespace ${result.retired} is kept)`,
          result.readerPointer
            ? `readers: the live sink prefix is s3://${c.deployment.sinkBucket}/${result.readerPointer.prefix} (named by s3://${c.deployment.sinkBucket}/${result.readerPointer.key})`
            : `readers: the live sink table is ${result.sinkTable ?? c.deployment.sinkTable}`,
        ].join('\n'));
      } finally {
        c.close();
      }
    });

  addAwsOptions(replay
    .command('rollback')
    .description('make the namespace the last cutover retired live again: it becomes the shadow, catches up from where the cutover '
      + 'stopped it, then is cut over to (refused, exit 1, when its checkpoint or sink is gone or the stream no longer holds the records since)')
    .argument('<query>', 'the query\'s name')
    .option('--query-module <file>', 'the query the retired namespace ran, not deployed: drive it here until caught up, then cut over '
      + '(without: the deployed scheduled function catches it up; then `sluice replay cutover`)')
    .option('--batch-size <n>', 'records per batch', positiveInt('--batch-size'), 1000)
    .option('--max-rounds <n>', 'give up after this many passes over the shards', positiveInt('--max-rounds'), 20))
    .action(async (query: string, opts: AwsOptions & { queryModule?: string; batchSize: number; maxRounds: number }) => {
      const definition = await queryModuleFor(query, opts.queryModule);
      const c = await connect(query, opts);
      try {
        const run = await rollbackReplay(c.clients, c.deployment, definition ? { definition } : {});
        if (!definition) {
          print(opts, run, () => `rolling ${query} back to ${run.namespace} (run ${run.runId}): the deployed scheduled function brings it up to date; `
            + `then \`sluice replay cutover ${query}\``);
          return;
        }
        if (await driveShadow(query, definition, c, opts, false) === null) {
          process.exitCode = EXIT.unhealthy;
          return;
        }
        const result = await cutoverReplay(c.clients, c.deployment, { definition });
        print(opts, result, () => `rolled back: ${query} runs in ${result.namespace} again (${result.retired} is kept)`);
      } finally {
        c.close();
      }
    });

  addAwsOptions(replay
    .command('abort')
    .description('remove the shadow: forget it (its writers are refused from now on), then delete its checkpoint, state and sink objects')
    .argument('<query>', 'the query\'s name'))
    .action(async (query: string, opts: AwsOptions) => {
      const c = await connect(query, opts);
      try {
        const result = await abortReplay(c.clients, c.deployment);
        print(opts, result, () => `replay ${result.runId} of ${query} removed: ${result.checkpointItems} checkpoint item(s), `
          + `${result.stateItems} state item(s), ${result.sinkObjects} sink object(s) deleted`);
      } finally {
        c.close();
      }
    });
  addAwsOptions(replay
    .command('sweep')
    .description('delete once more what aborted replays wrote (a batch in flight during an abort may still write after it), '
      + 'for runs aborted longer ago than --older-than, then forget them')
    .argument('<query>', 'the query\'s name')
    .option('--older-than <minutes>', 'only runs aborted at least this long ago: the longest a writer that began before the abort can run',
      positiveIntOrZero('--older-than'), DEFAULT_SWEEP_AFTER_MS / 60_000))
    .action(async (query: string, opts: AwsOptions & { olderThan: number }) => {
      const c = await connect(query, opts);
      try {
        const result = await sweepAbortedReplays(c.clients, c.deployment, { olderThanMs: opts.olderThan * 60_000 });
        print(opts, result, () => [
          ...result.swept.map((r) => `replay ${r.runId} swept: ${r.checkpointItems} checkpoint item(s), ${r.stateItems} state item(s), ${r.sinkObjects} sink object(s) deleted`),
          ...result.pending.map((r) => `replay ${r.runId} aborted ${new Date(r.abortedAtMs).toISOString()}: too recent, a batch in flight may still write; sweep again later`),
          ...(result.swept.length + result.pending.length === 0 ? [`no aborted replay of ${query} to sweep`] : []),
        ].join('\n'));
      } finally {
        c.close();
      }
    });
}
