/** `sluice diff <query-module> --against <query>`: can the new definition resume from the deployed checkpoint? */
import type { Command } from 'commander';
import { checkpointOf, listPartitions } from '../../lib/aws/query-inspection.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { importQueryModule } from '../../lib/query/query-module.js';
import { checkResumable, type ResumeVerdict } from '../../lib/query/resume-check.js';
import { addAwsOptions, connect, EXIT, print, type AwsOptions } from './common.js';

export function registerDiffCommand(program: Command): void {
  addAwsOptions(program
    .command('diff')
    .description('whether a query module can resume from a deployed query\'s checkpoint (the check every function makes at start), '
      + 'before deploying it; exit code 1 when it cannot')
    .argument('<query-module>', 'the new definition: a module whose default export is a StreamingQueryDefinition')
    .requiredOption('--against <query>', 'the deployed query\'s name'))
    .action(async (queryModule: string, opts: AwsOptions & { against: string }) => {
      const definition = await importQueryModule(queryModule);
      const c = await connect(opts.against, opts);
      try {
        const problems: string[] = [];
        let verdicts: ResumeVerdict[] = [];
        if (definition.name !== opts.against) {
          problems.push(`the module's query is named '${definition.name}', not '${opts.against}': the checkpoint and state are keyed by the name, `
            + 'so it would start from an empty checkpoint instead of resuming');
        } else {
          // Compiled as the deployed functions compile it at cold start.
          const query = compileQuery(definition, {
            expectedShardCount: c.deployment.expectedShardCount, allowRepartition: c.deployment.repartitionStreamName !== undefined,
          });
          const { ids } = await listPartitions(c.clients, c.deployment);
          verdicts = await checkResumable(query, ids.map((partitionId) => {
            const stage = partitionId.startsWith('state.') ? 2 : 1;
            return { partitionId, stage, shardId: stage === 2 ? partitionId.slice('state.'.length) : partitionId, checkpoint: checkpointOf(c.clients, c.deployment, partitionId) };
          }));
          for (const v of verdicts) if (!v.compatible) problems.push(`${v.partitionId}: ${v.reason}`);
        }
        const compatible = problems.length === 0;
        const checked = verdicts.filter((v) => v.hadCheckpoint).length;
        print(opts, { query: opts.against, module: queryModule, compatible, problems, partitions: verdicts }, () => (compatible
          ? `${queryModule} can resume query '${opts.against}' from its checkpoint (${checked} partition(s) with a checkpoint checked, `
            + `${verdicts.length - checked} without one would start fresh).`
          : [`${queryModule} cannot resume query '${opts.against}' from its checkpoint:`, ...[...new Set(problems)].map((p) => `  - ${p}`)].join('\n')));
        process.exitCode = compatible ? EXIT.ok : EXIT.unhealthy;
      } finally {
        c.close();
      }
    });
}
