/**
 * `sluice spill gc <query>`: deletes the S3 objects a spilling DynamoDB sink (onUnwritableRow:
 * 'spill') left that no item points to, as the scheduled function does once a day
 * (lib/aws/spill-gc-run.ts): a run tombstones new orphans and deletes those tombstoned at least a
 * grace ago that are still unreferenced, so an orphan goes at the second run a grace apart.
 */
import { type Command, InvalidArgumentError } from 'commander';
import { DEFAULT_SPILL_GC_GRACE_MS, MIN_SPILL_GC_GRACE_MS } from '../../lib/aws/dynamodb-spill-gc.js';
import { runSpillGc } from '../../lib/aws/spill-gc-run.js';
import { addAwsOptions, connect, EXIT, print, type AwsOptions } from './common.js';

type SpillGcCliOptions = AwsOptions & { dryRun?: boolean; graceHours?: number };

function graceHours(value: string): number {
  const hours = Number(value);
  if (!Number.isFinite(hours) || hours * 3600_000 < MIN_SPILL_GC_GRACE_MS) {
    throw new InvalidArgumentError(`--grace-hours must be a number of hours of at least ${MIN_SPILL_GC_GRACE_MS / 3600_000} (a writer's tombstone look-up holds that long, with a margin).`);
  }
  return hours;
}

export function registerSpillCommand(program: Command): void {
  const spill = program.command('spill').description("the S3 objects of a DynamoDB sink with onUnwritableRow: 'spill'");
  addAwsOptions(spill
    .command('gc')
    .description('tombstone spilled objects no item points to (live, replay and retired sink tables), and delete those tombstoned '
      + 'a grace ago that are still unreferenced; the scheduled function does the same once a day')
    .argument('<query>', 'the query\'s name')
    .option('--grace-hours <n>', `how old an object or tombstone must be before it is judged (default ${DEFAULT_SPILL_GC_GRACE_MS / 3600_000})`, graceHours)
    .option('--dry-run', 'scan and list what would be tombstoned and deleted; change nothing'))
    .action(async (query: string, opts: SpillGcCliOptions) => {
      const c = await connect(query, opts);
      try {
        const report = await runSpillGc({
          queryName: c.deployment.sluiceQuery, config: c.deployment, clients: c.clients, dryRun: opts.dryRun === true,
          ...(opts.graceHours !== undefined ? { graceMs: opts.graceHours * 3600_000 } : {}),
        });
        if (report === null) {
          // A usage error: commander prints only those it raises itself.
          process.stderr.write(`query '${query}' has no DynamoDB sink that spills to S3 (its deployment names no sink table and bucket together).\n`);
          process.exitCode = EXIT.usage;
          return;
        }
        print(opts, report, () => {
          if ('skipped' in report) return 'another collector run holds the lease; try again when it ends';
          const verb = report.dryRun ? 'would ' : '';
          return [
            `scanned ${report.scan.tables.join(', ')}: ${report.scan.items} item(s), ${report.scan.requests} request(s), ${report.scan.readUnits} read unit(s)`,
            `spilled objects: ${report.objects}, referenced: ${report.referenced}`,
            `${verb}tombstone ${report.marked.length}, ${verb}delete ${report.deleted.length}, ${verb}unmark ${report.unmarked.length} (referenced again); tombstones within the grace: ${report.pending}`,
            ...(report.stoppedBy ? [report.progress ? 'stopped within the scan before the lease ran out: run again to continue it' : 'stopped before the lease ran out: run again'] : []),
          ].join('\n');
        });
        process.exitCode = 'skipped' in report || report.stoppedBy ? EXIT.unhealthy : EXIT.ok;
      } finally {
        c.close();
      }
    });
}
