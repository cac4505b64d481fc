/**
 * Re-drive of dead letters through the query itself (`sluice redrive <query> --query-module m`):
 * the records never go back into the source stream, so no other consumer of that stream sees them
 * twice. Each run takes the due dead letters of one source shard as the records of a pseudo-shard
 * `<shard>@redrive:<run>` and runs them through the query's source stage as an ordinary partition:
 * its own checkpoint (offsets → sink → commit, exactly once, the stale-writer conditions), its own
 * watermark row that no minimum counts (dynamodb-watermarks.ts), and, with a repartition stage,
 * stage 1's routing: stage 2 applies the rows under the pseudo-shard's own progress entry, which its
 * watermark leaves out (repartition-records.ts), so re-driven rows are late rows there as in Spark.
 *
 * The ledger and the runner are shared with the re-drive of skipped source ranges
 * (through-query-redrive.ts): a run item lists the dead letters in order, each is claimed naming
 * the run, the run's records run to their commit, then the claims get their new ids and the run is
 * `done`. An open run is finished by the next re-drive with the same records in the same order, so
 * nothing runs twice. A record the query dead-letters again is written under its new id, which the
 * ledger knows: reported as failed again, never re-driven in a loop.
 *
 * A stateful source stage (a one-stage aggregation) keeps its state per source shard: rows of a
 * separate partition would start from empty state. There, each run is a re-drive batch on the real
 * shard's partition instead (lib/aws/redrive-batch.ts), which this process, or the live handler or
 * scheduled function if it dies, runs exactly once; its commit marks the run done. Re-driven rows
 * behind the shard's watermark are late rows, dropped as Spark drops late input (counted in the
 * report when it ran here). Dead letters of a closed (resharded) shard run on its open descendant
 * whose hash-key range holds their partition key (seeded with the state of those keys), grouped
 * into one run per shard they run on; those no shard can take (a split of a state that cannot be
 * divided by key) stay dead-lettered and are reported, as are those whose shard waits for its parents.
 */
import type { DeploymentDescriptor, RuntimeConfig } from '../runtime/runtime-config.js';
import { isResultRowLetter, type DeadLetterRecord } from '../sources/dead-letter.js';
import type { QueryDefinition } from '../query/query-definition.js';
import { isRedriveProgressKey, REDRIVE_KEY_MARK } from '../sources/repartition-records.js';
import { isInternalStreamLetter } from '../sources/held-out-rows.js';
import { isHeldOutRowLetter, redriveHeldOutRows, type HeldOutRowReport } from './held-out-row-redrive.js';
import type { AwsClients } from './clients.js';
import { listStreamShards } from './kinesis-shard-reader.js';
import { readDeadLetters } from './s3-dead-letter-writer.js';
import { encodeKeySegment, normalizePrefix } from './s3-util.js';
import {
  compileForRedrive, createThroughQueryRunner, newRunId, openRunOf, pseudoShardOf, readRedriveLedger, redriveIdOf,
} from './through-query-redrive.js';

export interface ReprocessOptions {
  readonly definition: QueryDefinition;
  readonly config: RuntimeConfig;
  readonly sinceMs?: number;
  readonly shardId?: string;
  readonly dryRun?: boolean;
  /** The run's id (tests); default from the clock. */
  readonly runId?: string;
  /** Invocations per run at most (each runs up to 8 batches). */
  readonly maxInvocations?: number;
}

export interface ReprocessRun {
  readonly partitionId: string;
  readonly records: number;
  /** Left open by an earlier re-drive that stopped, and finished by this one. */
  readonly resumed: boolean;
  readonly batches: number;
  /** A re-drive batch on the shard's own partition (a stateful source stage): its batch id there. */
  readonly batchId?: number;
  /** That batch was committed by another writer (the live handler, the scheduled function). */
  readonly committedElsewhere?: boolean;
  /** Re-driven rows behind the watermark, dropped as late (unknown when committed elsewhere). */
  readonly lateRows?: number | null;
  /** Its shard was closed by a reshard before its batch was planned: the runs on the open descendants its records went to. */
  readonly reroutedTo?: string[];
}

export interface ReprocessReport {
  readonly runs: ReprocessRun[];
  readonly reprocessed: number;
  readonly alreadyRedriven: number;
  readonly failedAgain: { shardId: string; sequenceNumber: string; reason: string }[];
  /** Dead letters not of a source shard (any letter of a stage reading an internal stream, `<shard>@internal`): a source-stage run cannot take them. */
  readonly notFromSource: number;
  /** Letters of result rows (`result-batch-…`: refused by the sink, or raising above state): output rows, never run through stage 1, left. */
  readonly resultRows: number;
  /** Rows stage 2 held out (a data error applying them), put back on the internal stream for the deployed stage 2 (held-out-row-redrive.ts). */
  readonly heldOutRows: HeldOutRowReport;
  /**
   * Dead letters of a closed (resharded) shard of a one-stage stateful query that no open shard can
   * take (its split divided a state that cannot be divided by key): left dead-lettered, with why.
   */
  readonly ofClosedShard: number;
  readonly closedShardReasons: string[];
  /** Dead letters of a closed shard re-driven on the open descendant holding their key. */
  readonly onDescendant: number;
  /** Left for now: the shard they run on waits for its parents' last records (run again later). */
  readonly waiting: number;
  readonly wouldRedrive: number;
  /** Rows of this re-drive's batches dropped as late (behind the watermark), where known. */
  readonly lateRows: number;
}

export async function reprocessDeadLetters(clients: AwsClients, deployment: DeploymentDescriptor, options: ReprocessOptions): Promise<ReprocessReport> {
  const query = deployment.sluiceQuery;
  const { definition, config } = options;
  // Refused before any AWS call.
  compileForRedrive(definition, config, query);
  const { claims, runs, newIds } = await readRedriveLedger(clients, deployment);
  // Runs of skipped ranges (they carry `range`) are resumed by `--skipped`, from the stream.
  const openRuns = runs.filter((i) => i.range === undefined).map((i) => openRunOf(i, claims)).filter((r) => r !== null);
  // A run rerouted to a closed shard's descendants keeps that run's claims.
  const openIds = new Set(openRuns.flatMap((r) => [r.partitionId, r.claimedBy]));
  const letters = await readDeadLetters(clients.s3, deployment.deadLetterBucket,
    `${normalizePrefix(deployment.deadLetterPrefix ?? 'dead-letter/')}${encodeKeySegment(query)}/`);
  const letterById = new Map(letters.map((l) => [redriveIdOf(l.shardId, l.sequenceNumber), l]));
  const shards = await listStreamShards(clients.kinesis, deployment.streamName);
  const sourceShards = new Set(shards.map((s) => s.ShardId!));

  const report = {
    runs: [] as ReprocessRun[], reprocessed: 0, alreadyRedriven: 0, failedAgain: [] as ReprocessReport['failedAgain'], notFromSource: 0, resultRows: 0, ofClosedShard: 0,
    closedShardReasons: [] as string[], onDescendant: 0, waiting: 0, wouldRedrive: 0, lateRows: 0,
    heldOutRows: { redriven: [], alreadyRedriven: 0, failedAgain: [], refused: [], wouldRedrive: 0 } as HeldOutRowReport,
  };
  const candidates: DeadLetterRecord[] = [];
  const heldOut: DeadLetterRecord[] = [];
  for (const letter of letters) {
    if (options.shardId && letter.shardId !== options.shardId && !letter.shardId.startsWith(`${options.shardId}${REDRIVE_KEY_MARK}`)) continue;
    if (options.sinceMs !== undefined && letter.approximateArrivalTimestampMs < options.sinceMs) continue;
    // A result row's letter (filed under the source shard in a one-stage query): its data is an output row, not a record.
    if (isResultRowLetter(letter)) { report.resultRows++; continue; }
    // A row stage 2 held out: its letter holds the row itself, re-applied to stage 2's state.
    if (isHeldOutRowLetter(letter)) { heldOut.push(letter); continue; }
    // Any other letter of a stage reading an internal stream (its shard id repeats a source shard's): never a source record.
    if (isInternalStreamLetter(letter)) { report.notFromSource++; continue; }
    const id = redriveIdOf(letter.shardId, letter.sequenceNumber);
    if (newIds.has(id) || isRedriveProgressKey(letter.shardId)) report.failedAgain.push({ shardId: letter.shardId, sequenceNumber: letter.sequenceNumber, reason: letter.reason });
    // Claimed by a run left open: that run is finished below (and reported there).
    else if (claims.has(id)) { if (!openIds.has(claims.get(id)!.run?.S ?? '')) report.alreadyRedriven++; }
    else if (!sourceShards.has(letter.shardId)) report.notFromSource++;
    else candidates.push(letter);
  }
  const runner = await createThroughQueryRunner(clients, deployment, options);
  // Per shard the records run on: their own, or (a closed shard of a stateful stage) the descendant holding their key.
  const routed = await runner.route(candidates, !options.dryRun);
  const due = routed.byShard;
  report.ofClosedShard = routed.refused.length;
  report.closedShardReasons = [...new Set(routed.refused.map((r) => r.reason))];
  report.onDescendant = routed.fromClosedShard;
  report.waiting = routed.waiting.reduce((n, w) => n + w.records.length, 0);
  report.wouldRedrive = [...due.values()].reduce((n, l) => n + l.length, 0);
  if (heldOut.length > 0) report.heldOutRows = await redriveHeldOutRows(clients, deployment, heldOut, claims, options);
  if (options.dryRun) return report;

  const run = async (partitionId: string, records: readonly DeadLetterRecord[], resumed: boolean): Promise<void> => {
    const outcome = await runner.finish(partitionId, records);
    report.runs.push({ partitionId, records: records.length, resumed, ...outcome });
    report.reprocessed += records.length;
    report.lateRows += outcome.lateRows ?? 0;
  };

  // Runs an earlier re-drive left open: their records, as they were claimed, first.
  for (const { partitionId, ids, storedCount } of openRuns) {
    const records = ids.map((id) => letterById.get(id)).filter((l): l is DeadLetterRecord => l !== undefined);
    if (records.length !== ids.length) throw new Error(`re-drive ${partitionId}: ${ids.length - records.length} of its dead letters are no longer in S3`);
    // A re-drive batch whose records are stored runs with exactly those (the batch may be planned with them).
    if (storedCount !== undefined && storedCount !== records.length) {
      throw new Error(`re-drive ${partitionId}: the ledger holds ${storedCount} record(s) for it, its claims ${records.length}`);
    }
    await run(partitionId, records, true);
  }

  const runId = options.runId ?? newRunId();
  for (const [shardId, shardLetters] of due) {
    const partitionId = pseudoShardOf(shardId, runId);
    const mine = await runner.open(partitionId, shardLetters);
    report.alreadyRedriven += shardLetters.length - mine.length;
    await run(partitionId, mine, false);
  }
  return report;
}
