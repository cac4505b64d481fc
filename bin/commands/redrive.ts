/**
 * `sluice redrive <query>`: dead-lettered records back into the source stream, each at most once;
 * with `--skipped`, the batches the event source mappings gave up (recorded skipped ranges) re-read
 * from the stream and put back, once.
 */
import { type Command, InvalidArgumentError } from 'commander';
import { redriveDeadLetters } from '../../lib/aws/dead-letter-redrive.js';
import { redriveSkippedBatches, sourceCheckOf, type RecordCheck, type SkippedRedriveReport } from '../../lib/aws/skipped-batch-redrive.js';
import { importQueryModule } from '../../lib/query/query-module.js';
import { addAwsOptions, connect, EXIT, print, type AwsOptions, type Connected } from './common.js';

function parseTime(value: string): number {
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new InvalidArgumentError('--since must be a time, e.g. 2026-12-04T10:00:00Z.');
  return ms;
}

type RedriveOptions = AwsOptions & { since?: number; shard?: string; dryRun?: boolean; skipped?: boolean; queryModule?: string; range?: string };

export function registerRedriveCommand(program: Command): void {
  addAwsOptions(program
    .command('redrive')
    .description('put dead-lettered records back into the source stream after a fix, each at most once (a ledger in the checkpoint table '
      + 'marks them); a re-driven record that fails again is reported, not re-driven. With --skipped: the batches the event source '
      + 'mapping gave up instead, re-read from the stream while it retains them')
    .argument('<query>', 'the query\'s name')
    .option('--since <time>', 'only records that arrived at or after this time', parseTime)
    .option('--shard <id>', 'only this shard\'s dead letters (or skipped ranges)')
    .option('--skipped', 're-drive the recorded skipped ranges (`sluice status` lists them) instead of the dead letters')
    .option('--range <sequence number>', 'with --skipped: only the skipped range starting at this sequence number')
    .option('--query-module <file>', 'with --skipped: decode each record with this query module\'s source; what it refuses is dead-lettered with the reason')
    .option('--dry-run', 'list what would be re-driven'))
    .action(async (query: string, opts: RedriveOptions) => {
      if (opts.queryModule && !opts.skipped) throw new InvalidArgumentError('--query-module goes with --skipped.');
      if (opts.range && !opts.skipped) throw new InvalidArgumentError('--range goes with --skipped.');
      if (opts.skipped && opts.since !== undefined) throw new InvalidArgumentError('--since filters dead letters; skipped ranges are re-driven whole.');
      const definition = opts.queryModule ? await importQueryModule(opts.queryModule) : undefined;
      const c = await connect(query, opts);
      try {
        if (opts.skipped) await skipped(c, opts, definition ? sourceCheckOf(definition, c.deployment) : undefined);
        else await deadLetters(c, opts);
      } finally {
        c.close();
      }
    });
}

async function deadLetters(c: Connected, opts: RedriveOptions): Promise<void> {
  const report = await redriveDeadLetters(c.clients, c.deployment, { sinceMs: opts.since, shardId: opts.shard, dryRun: opts.dryRun });
  print(opts, report, () => [
    opts.dryRun ? `would re-drive ${report.wouldRedrive} record(s)` : `re-drove ${report.redriven.length} record(s) into ${c.deployment.streamName}`,
    `already re-driven before: ${report.alreadyRedriven}`,
    ...(report.failedAgain.length > 0 ? [`failed again after a re-drive (not re-driven again): ${report.failedAgain.length}`,
      ...report.failedAgain.map((f) => `  ${f.shardId}/${f.sequenceNumber}: ${f.reason}`)] : []),
    ...(report.unconfirmed.length > 0 ? [`claimed by a run that stopped before confirming (check the stream; not sent again): ${report.unconfirmed.join(', ')}`] : []),
  ].join('\n'));
  process.exitCode = report.failedAgain.length > 0 || report.unconfirmed.length > 0 ? EXIT.unhealthy : EXIT.ok;
}

async function skipped(c: Connected, opts: RedriveOptions, check: RecordCheck | undefined): Promise<void> {
  const report: SkippedRedriveReport = await redriveSkippedBatches(c.clients, c.deployment, {
    shardId: opts.shard, dryRun: opts.dryRun, ...(opts.range ? { firstSequenceNumber: opts.range } : {}), ...(check ? { check } : {}),
  });
  print(opts, report, () => [
    `${opts.dryRun ? 'would re-drive' : 're-drove'} ${report.redriven} record(s) of ${report.ranges.filter((r) => r.outcome).length} skipped range(s)`,
    `dead-lettered: ${report.deadLettered} refused by the source, ${report.skippedAgain} skipped again after a re-drive`,
    `committed after all (left alone): ${report.alreadyCommitted}`,
    `expired from the stream (lost): ${report.expired}`,
    `ranges re-driven before: ${report.alreadyRedriven}`,
    ...report.ranges.map((r) => `  ${r.partitionId} ${r.first}..${r.last}: ${r.outcome
      ? `${r.outcome.redriven} re-driven, ${r.outcome.deadLettered + r.outcome.skippedAgain} dead-lettered, ${r.outcome.alreadyCommitted} committed, ${r.outcome.expired} expired${
        r.outcome.expiredRange ? ` (lost: ${r.outcome.expiredRange.first}..${r.outcome.expiredRange.last})` : ''}`
      : ''}${r.note ? ` (${r.note})` : ''}`),
  ].join('\n'));
  // Records lost to retention, or a range that cannot be re-driven, need a person.
  process.exitCode = report.expired > 0 || report.ranges.some((r) => !r.outcome) ? EXIT.unhealthy : EXIT.ok;
}
