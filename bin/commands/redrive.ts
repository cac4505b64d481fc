/** `sluice redrive <query>`: dead-lettered records back into the source stream, each at most once. */
import { type Command, InvalidArgumentError } from 'commander';
import { redriveDeadLetters } from '../../lib/aws/dead-letter-redrive.js';
import { addAwsOptions, connect, EXIT, print, type AwsOptions } from './common.js';

function parseTime(value: string): number {
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new InvalidArgumentError('--since must be a time, e.g. 2026-12-04T10:00:00Z.');
  return ms;
}

export function registerRedriveCommand(program: Command): void {
  addAwsOptions(program
    .command('redrive')
    .description('put dead-lettered records back into the source stream after a fix, each at most once (a ledger in the checkpoint table '
      + 'marks them); a re-driven record that fails again is reported, not re-driven. Skipped batches in the on-failure queue are not re-read yet.')
    .argument('<query>', 'the query\'s name')
    .option('--since <time>', 'only records that arrived at or after this time', parseTime)
    .option('--shard <id>', 'only this shard\'s dead letters')
    .option('--dry-run', 'list what would be re-driven'))
    .action(async (query: string, opts: AwsOptions & { since?: number; shard?: string; dryRun?: boolean }) => {
      const c = await connect(query, opts);
      try {
        const report = await redriveDeadLetters(c.clients, c.deployment, { sinceMs: opts.since, shardId: opts.shard, dryRun: opts.dryRun });
        print(opts, report, () => [
          opts.dryRun ? `would re-drive ${report.wouldRedrive} record(s)` : `re-drove ${report.redriven.length} record(s) into ${c.deployment.streamName}`,
          `already re-driven before: ${report.alreadyRedriven}`,
          ...(report.failedAgain.length > 0 ? [`failed again after a re-drive (not re-driven again): ${report.failedAgain.length}`,
            ...report.failedAgain.map((f) => `  ${f.shardId}/${f.sequenceNumber}: ${f.reason}`)] : []),
          ...(report.unconfirmed.length > 0 ? [`claimed by a run that stopped before confirming (check the stream; not sent again): ${report.unconfirmed.join(', ')}`] : []),
        ].join('\n'));
        process.exitCode = report.failedAgain.length > 0 || report.unconfirmed.length > 0 ? EXIT.unhealthy : EXIT.ok;
      } finally {
        c.close();
      }
    });
}
