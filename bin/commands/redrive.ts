/**
 * `sluice redrive <query> --query-module m`: dead-lettered records run through the query itself, in
 * this process, each at most once (lib/aws/dead-letter-reprocess.ts; a one-stage stateful query as a
 * re-drive batch of the shard's own partition, lib/aws/redrive-batch.ts); a query over several
 * streams is refused as a usage error (exit 2) before any AWS call; `--into-stream` puts them
 * back into the source stream instead (every consumer of the stream reads them again). With
 * `--skipped`, the batches the event source mappings gave up (recorded skipped ranges) are re-read
 * from the stream and run through the query the same way, once (lib/aws/skipped-batch-redrive.ts);
 * `--skipped --into-stream` puts them back instead. A one-stage stateful query's records of a closed
 * (resharded) shard run on its open descendant holding their key's state; those no shard can take
 * (a split of a state not divisible by key) stay where they are, reported (exit 1).
 * `--acknowledge <range>` / `--all-lost` record that a person has seen a loss to retention:
 * `sluice status` still lists it, and is healthy again. */
import { type Command, InvalidArgumentError } from 'commander';
import { userInfo } from 'node:os';
import { redriveDeadLetters } from '../../lib/aws/dead-letter-redrive.js';
import { reprocessDeadLetters } from '../../lib/aws/dead-letter-reprocess.js';
import type { HeldOutRowReport } from '../../lib/aws/held-out-row-redrive.js';
import { runtimeConfigOf } from '../../lib/aws/replay.js';
import { acknowledgeLostRanges } from '../../lib/aws/lost-range-acknowledgement.js';
import { redriveSkippedBatches, sourceCheckOf, type SkippedRedriveReport } from '../../lib/aws/skipped-batch-redrive.js';
import { IllegalArgumentError } from '../../lib/errors/sluice-error.js';
import { importQueryModule } from '../../lib/query/query-module.js';
import { isMultiSource, type QueryDefinition } from '../../lib/query/query-definition.js';
import { addAwsOptions, connect, EXIT, print, type AwsOptions, type Connected } from './common.js';
import type { DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';
import { encodeKeySegment, normalizePrefix } from '../../lib/aws/s3-util.js';

function parseTime(value: string): number {
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new InvalidArgumentError('--since must be a time, e.g. 2026-12-04T10:00:00Z.');
  return ms;
}

type RedriveOptions = AwsOptions & {
  since?: number; shard?: string; dryRun?: boolean; skipped?: boolean; queryModule?: string; range?: string; intoStream?: boolean;
  acknowledge?: string; allLost?: boolean; reason?: string; by?: string;
};

function defaultActor(): string {
  try {
    return process.env.SLUICE_ACTOR ?? userInfo().username;
  } catch {
    return process.env.USER ?? 'unknown';
  }
}

export function registerRedriveCommand(program: Command): void {
  addAwsOptions(program
    .command('redrive')
    .description('run dead-lettered records through the query again after a fix (--query-module: the fixed query, in this process), each at most '
      + 'once (a ledger in the checkpoint table marks them); the source stream is not written, so no other consumer of it sees them. A re-driven '
      + 'record that fails again is reported, not re-driven. With --skipped: the batches the event source mapping gave up instead, re-read from '
      + 'the stream while it retains them and run through the query the same way. With --acknowledge/--all-lost: record that a loss to retention '
      + 'was seen (status is healthy again)')
    .argument('<query>', 'the query\'s name')
    .option('--since <time>', 'only records that arrived at or after this time', parseTime)
    .option('--shard <id>', 'only this shard\'s dead letters (or skipped ranges)')
    .option('--query-module <file>', 'the query (as fixed): the records run through it in this process; with --skipped, records its source '
      + 'cannot decode are dead-lettered')
    .option('--into-stream', 'WARNING: put the dead letters (with --skipped: the skipped records) back into the source stream instead: every query '
      + 'and consumer reading that stream reads them again (duplicates there); only for a stream this query alone reads')
    .option('--skipped', 're-drive the recorded skipped ranges (`sluice status` lists them) instead of the dead letters')
    .option('--range <sequence number>', 'with --skipped: only the skipped range starting at this sequence number')
    .option('--acknowledge <range>', 'acknowledge the loss of a lost skipped range (its first sequence number, or <partition>#<first>, as status lists it)')
    .option('--all-lost', 'acknowledge every lost skipped range not acknowledged yet')
    .option('--reason <text>', 'with --acknowledge/--all-lost: why the loss is accepted (required; stored with who and when)')
    .option('--by <name>', 'with --acknowledge/--all-lost: who acknowledges (default: $SLUICE_ACTOR, else the OS user)')
    .option('--dry-run', 'list what would be re-driven'))
    .action(async (query: string, opts: RedriveOptions) => {
      const acknowledging = opts.acknowledge !== undefined || opts.allLost === true;
      if (acknowledging) {
        if (opts.acknowledge !== undefined && opts.allLost) throw new InvalidArgumentError('--acknowledge <range> or --all-lost, not both.');
        if (!opts.reason?.trim()) throw new InvalidArgumentError('--reason "..." is required to acknowledge a loss (it is stored with who and when).');
        if (opts.skipped || opts.intoStream || opts.queryModule || opts.since !== undefined || opts.range) {
          throw new InvalidArgumentError('--acknowledge/--all-lost goes alone (with --shard, --reason, --by, --dry-run).');
        }
      } else if (opts.reason !== undefined || opts.by !== undefined) {
        throw new InvalidArgumentError('--reason and --by go with --acknowledge or --all-lost.');
      }
      if (opts.range && !opts.skipped) throw new InvalidArgumentError('--range goes with --skipped.');
      if (opts.skipped && opts.since !== undefined) throw new InvalidArgumentError('--since filters dead letters; skipped ranges are re-driven whole.');
      if (opts.intoStream && opts.queryModule && !opts.skipped) throw new InvalidArgumentError('--into-stream re-drives dead letters without a query module.');
      if (!acknowledging && !opts.skipped && !opts.intoStream && !opts.queryModule) {
        throw new InvalidArgumentError('Dead letters are re-driven through the query: give --query-module <file> (the query as fixed). '
          + '--into-stream puts them back into the source stream instead, where every consumer of the stream reads them again.');
      }
      const definition = opts.queryModule ? await importQueryModule(opts.queryModule) : undefined;
      if (definition && definition.name !== query) throw new InvalidArgumentError(`--query-module ${opts.queryModule} defines query '${definition.name}', not '${query}'.`);
      if (definition && !opts.skipped && isMultiSource(definition)) {
        // Refused before any AWS call: nothing changes, the records stay dead-lettered.
        throw new InvalidArgumentError(`Query '${query}' reads several streams, and a dead letter names only its shard, not its stream: it cannot be `
          + 're-driven through the query yet. Nothing was changed; the records stay dead-lettered (`sluice status` says where; each object '
          + 'holds the record, its partition key and the reason). Deploy the fixed query, then send those records again from their producer '
          + 'to the stream they belong to (--into-stream cannot tell the streams apart either).');
      }
      const c = await connect(query, opts);
      try {
        if (acknowledging) await acknowledge(c, opts);
        else if (opts.skipped) await skipped(c, opts, definition);
        else if (definition) await throughQuery(c, opts, definition);
        else await deadLetters(c, opts);
      } catch (error) {
        // A query the re-drive cannot run through (one-stage stateful, several streams): a usage error, before anything is written.
        if (error instanceof IllegalArgumentError && error.code.startsWith('REDRIVE_')) throw new InvalidArgumentError(error.message);
        throw error;
      } finally {
        c.close();
      }
    });
}

async function throughQuery(c: Connected, opts: RedriveOptions, definition: QueryDefinition): Promise<void> {
  const report = await reprocessDeadLetters(c.clients, c.deployment, {
    definition, config: runtimeConfigOf(c.deployment), sinceMs: opts.since, shardId: opts.shard, dryRun: opts.dryRun,
  });
  print(opts, report, () => [
    opts.dryRun ? `would re-drive ${report.wouldRedrive} record(s) through ${c.deployment.sluiceQuery}`
      : `re-drove ${report.reprocessed} record(s) through ${c.deployment.sluiceQuery} (the source stream is not written)`,
    ...report.runs.map((r) => `  ${r.partitionId}: ${r.records} record(s), ${r.reroutedTo
      ? `its shard was closed by a reshard before the batch was planned: run on ${r.reroutedTo.join(', ')}`
      : r.batchId !== undefined
      ? `batch ${r.batchId} of the shard's own partition${r.committedElsewhere ? ' (committed by another writer: the live handler, the scheduled function or an earlier re-drive)' : ''}`
      : `${r.batches} batch(es)`}${r.resumed ? ' (resumed: an earlier re-drive stopped)' : ''}`),
    ...(report.runs.some((r) => r.batchId !== undefined)
      ? [`late rows (behind the watermark, dropped as Spark drops late input): ${report.runs.some((r) => r.lateRows === null)
        ? `${report.lateRows} counted here; a batch committed elsewhere is counted in its progress (sluice progress)` : report.lateRows}`]
      : []),
    `already re-driven before: ${report.alreadyRedriven}`,
    ...(report.notFromSource > 0 ? [`not of a source shard (left): ${report.notFromSource}`] : []),
    ...resultRowLines(report.resultRows, c.deployment),
    ...(report.onDescendant > 0 ? [`of a closed (resharded) shard, run on the open shard holding their key's state: ${report.onDescendant}`] : []),
    ...(report.ofClosedShard > 0 ? [`of a closed (resharded) shard, left dead-lettered: ${report.ofClosedShard} (${report.closedShardReasons.join('; ')})`] : []),
    ...(report.waiting > 0 ? [`left for now, their shard waits for its parents' last records (run the re-drive again later): ${report.waiting}`] : []),
    ...(report.failedAgain.length > 0 ? [`failed again after a re-drive (not re-driven again): ${report.failedAgain.length}`,
      ...report.failedAgain.map((f) => `  ${f.shardId}/${f.sequenceNumber}: ${f.reason}`)] : []),
    ...heldOutRowLines(report.heldOutRows, opts.dryRun === true),
  ].join('\n'));
  const held = report.heldOutRows;
  process.exitCode = report.failedAgain.length > 0 || report.ofClosedShard > 0 || report.waiting > 0 || held.failedAgain.length > 0 || held.refused.length > 0
    ? EXIT.unhealthy : EXIT.ok;
}

/** Rows stage 2 held out: put back on the internal stream, for the deployed stage 2 to apply once. */
function heldOutRowLines(held: HeldOutRowReport, dryRun: boolean): string[] {
  const total = held.redriven.length + held.alreadyRedriven + held.failedAgain.length + held.refused.length + (dryRun ? held.wouldRedrive : 0);
  if (total === 0) return [];
  return [
    dryRun ? `rows stage 2 held out, would put back on the internal stream: ${held.wouldRedrive}`
      : `rows stage 2 held out, put back on the internal stream (the deployed stage 2 applies each once; deploy the fixed query first): ${held.redriven.length}`,
    ...(held.alreadyRedriven > 0 ? [`  put back before: ${held.alreadyRedriven}`] : []),
    ...(held.failedAgain.length > 0 ? [`  held out again after a re-drive (not put back again): ${held.failedAgain.length}`,
      ...held.failedAgain.map((f) => `    ${f.id}: ${f.reason}`)] : []),
    ...(held.refused.length > 0 ? [`  left dead-lettered: ${held.refused.length}`, ...held.refused.map((r) => `    ${r.id}: ${r.reason}`)] : []),
  ];
}

async function acknowledge(c: Connected, opts: RedriveOptions): Promise<void> {
  const report = await acknowledgeLostRanges(c.clients, c.deployment, {
    ...(opts.acknowledge !== undefined ? { range: opts.acknowledge } : {}), ...(opts.shard ? { shardId: opts.shard } : {}),
    reason: opts.reason!.trim(), by: opts.by ?? defaultActor(), dryRun: opts.dryRun,
  });
  if (opts.acknowledge !== undefined && report.acknowledged.length === 0 && report.alreadyAcknowledged.length === 0) {
    throw new InvalidArgumentError(`No lost skipped range of '${c.deployment.sluiceQuery}' starts at ${opts.acknowledge} `
      + `(lost ranges: ${report.unmatched.map((r) => `${r.partitionId}#${r.firstSequenceNumber}`).join(', ') || 'none'}).`);
  }
  print(opts, report, () => [
    `${opts.dryRun ? 'would acknowledge' : 'acknowledged'} ${report.acknowledged.length} lost range(s)`,
    ...report.acknowledged.map((r) => `  ${r.partitionId} ${r.firstSequenceNumber}..${r.lastSequenceNumber}: ${r.outcome?.expired ?? 0} record(s) lost`),
    ...(report.alreadyAcknowledged.length > 0 ? [`acknowledged before: ${report.alreadyAcknowledged.length}`] : []),
  ].join('\n'));
  process.exitCode = EXIT.ok;
}

async function deadLetters(c: Connected, opts: RedriveOptions): Promise<void> {
  const report = await redriveDeadLetters(c.clients, c.deployment, { sinceMs: opts.since, shardId: opts.shard, dryRun: opts.dryRun });
  print(opts, report, () => [
    opts.dryRun ? `would re-drive ${report.wouldRedrive} record(s)` : `re-drove ${report.redriven.length} record(s) into ${c.deployment.streamName} (every consumer of the stream reads them again)`,
    `already re-driven before: ${report.alreadyRedriven}`,
    ...(report.notFromSource > 0 ? [`dead letters of a stage reading an internal stream (left, not source records): ${report.notFromSource}`] : []),
    ...resultRowLines(report.resultRows, c.deployment),
    ...(report.failedAgain.length > 0 ? [`failed again after a re-drive (not re-driven again): ${report.failedAgain.length}`,
      ...report.failedAgain.map((f) => `  ${f.shardId}/${f.sequenceNumber}: ${f.reason}`)] : []),
    ...(report.unconfirmed.length > 0 ? [`claimed by a run that stopped before confirming (check the stream; not sent again): ${report.unconfirmed.join(', ')}`] : []),
  ].join('\n'));
  process.exitCode = report.failedAgain.length > 0 || report.unconfirmed.length > 0 ? EXIT.unhealthy : EXIT.ok;
}

async function skipped(c: Connected, opts: RedriveOptions, definition: QueryDefinition | undefined): Promise<void> {
  const config = runtimeConfigOf(c.deployment);
  const report: SkippedRedriveReport = await redriveSkippedBatches(c.clients, c.deployment, {
    shardId: opts.shard, dryRun: opts.dryRun, ...(opts.range ? { firstSequenceNumber: opts.range } : {}),
    ...(definition ? { check: sourceCheckOf(definition, c.deployment) } : {}),
    ...(opts.intoStream ? { intoStream: true } : definition ? { throughQuery: { definition, config } } : {}),
  });
  const where = report.into === 'query' ? ` through ${c.deployment.sluiceQuery} (the source stream is not written)`
    : report.into === 'stream' ? ` into the source stream (every consumer of the stream reads them again)` : '';
  print(opts, report, () => [
    `${opts.dryRun ? 'would re-drive' : 're-drove'} ${report.redriven} record(s) of ${report.ranges.filter((r) => r.outcome).length} skipped range(s)${where}`,
    `dead-lettered: ${report.deadLettered} refused by the source, ${report.skippedAgain} skipped again after a re-drive`,
    `committed after all (left alone): ${report.alreadyCommitted}`,
    `expired from the stream (lost): ${report.expired}`,
    `ranges re-driven before: ${report.alreadyRedriven}`,
    ...report.ranges.map((r) => `  ${r.partitionId} ${r.first}..${r.last}: ${r.outcome
      ? `${r.outcome.redriven} re-driven, ${r.outcome.deadLettered + r.outcome.skippedAgain} dead-lettered, ${r.outcome.alreadyCommitted} committed, ${r.outcome.expired} expired${
        r.outcome.expiredRange ? ` (lost: ${r.outcome.expiredRange.first}..${r.outcome.expiredRange.last})` : ''}`
      : ''}${r.note ? ` (${r.note})` : ''}${(r.runs ?? []).map((run) => `\n    ${run.partitionId}: ${run.records} record(s), ${run.batches} batch(es)${
        run.resumed ? ' (resumed: an earlier re-drive stopped)' : ''}`).join('')}`),
  ].join('\n'));
  // Records lost to retention, or a range that cannot be re-driven, need a person.
  process.exitCode = report.expired > 0 || report.ranges.some((r) => !r.outcome) ? EXIT.unhealthy : EXIT.ok;
}

/** Result rows are output, not input: say what they are and what to do, since no re-drive takes them. */
function resultRowLines(count: number, deployment: DeploymentDescriptor): string[] {
  const where = `s3://${deployment.deadLetterBucket}/${normalizePrefix(deployment.deadLetterPrefix ?? 'dead-letter/')}${encodeKeySegment(deployment.sluiceQuery)}/`;
  return count > 0
    ? [`result rows (left, not source records): ${count}`,
      `  each is an output row of the query that the sink refused or whose expression raised over state; its batch was committed without it. `
      + `Inspect it under ${where} (sequence number result-batch-<batch>-…; the reason says why), then fix the query or the sink; `
      + 'a re-drive never sends it, it is not a record of the stream']
    : [];
}
