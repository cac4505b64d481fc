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
 * The ledger (checkpoint table, pk `${query}#redrive`, the one `--into-stream` and `--skipped` use):
 *
 *   1. a run item (sk `run#<pseudo-shard>`, state `open`) lists the dead letters, in order;
 *   2. each is claimed with a conditional PutItem naming the run (refused: another run has it);
 *   3. the run's claimed records (synthetic sequence numbers 1..n, in that order) run to their
 *      commit; each claim then gets its new id (`<pseudo-shard>/<n>`) and the run is marked `done`.
 *
 * A run that stops before 3 ends is `open`: the next re-drive runs it again first with the same
 * records in the same order, and the pseudo-shard's checkpoint re-runs or skips its batch: nothing
 * twice. A record the query dead-letters again is written under its new id, which the ledger knows:
 * reported as failed again, never re-driven in a loop.
 *
 * A stateful source stage (a one-stage aggregation) keeps its state per source shard: rows of a
 * separate partition would start from empty state. There, each run is a re-drive batch on the real
 * shard's partition instead (lib/aws/redrive-batch.ts): the run item (mode `batch`) and the claims
 * as above, then the records in the ledger and one planned batch of the shard's own checkpoint,
 * which this process, or the live handler or scheduled function if it dies, runs exactly once; its
 * commit marks the run done. A run done by another writer is closed here (claims marked, records
 * removed from the ledger) by the next re-drive. Re-driven rows behind the shard's watermark are
 * late rows, dropped as Spark drops late input (counted in the report when it ran here).
 */
import { ConditionalCheckFailedException, PutItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { CostMeter } from '../core/cost-meter.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import { compileForDeployment, type CompiledQuery } from '../query/compiled-query.js';
import { isMultiSource, type QueryDefinition } from '../query/query-definition.js';
import { runShardInvocation } from '../query/shard-invocation.js';
import type { DeploymentDescriptor, RuntimeConfig } from '../runtime/runtime-config.js';
import type { DeadLetterRecord } from '../sources/dead-letter.js';
import type { ShardRecord } from '../sources/kinesis-shard-source.js';
import { isRedriveProgressKey, REDRIVE_KEY_MARK } from '../sources/repartition-records.js';
import { createAwsQueryBackends, type AwsQueryBackends } from './aws-backends.js';
import { deleteRedriveRecords, runRedriveBatch, RUN_PREFIX, type RedriveBatchRunner } from './redrive-batch.js';
import type { AwsClients } from './clients.js';
import { queryAll, type Item } from './dynamodb-cost.js';
import { listStreamShards } from './kinesis-shard-reader.js';
import { namespaceFence, readNamespacePointer } from './query-namespace.js';
import { readDeadLetters } from './s3-dead-letter-writer.js';
import { encodeKeySegment, normalizePrefix } from './s3-util.js';

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
}

export interface ReprocessReport {
  readonly runs: ReprocessRun[];
  readonly reprocessed: number;
  readonly alreadyRedriven: number;
  readonly failedAgain: { shardId: string; sequenceNumber: string; reason: string }[];
  /** Dead letters not of a source shard (a later stage's): a source-stage run cannot take them. */
  readonly notFromSource: number;
  /**
   * Dead letters of a closed (resharded) shard of a one-stage stateful query, left dead-lettered: its
   * children were seeded from its final state, so a batch on its partition would reach none of them.
   */
  readonly ofClosedShard: number;
  readonly wouldRedrive: number;
  /** Rows of this re-drive's batches dropped as late (behind the watermark), where known. */
  readonly lateRows: number;
}

const idOf = (shardId: string, sequenceNumber: string): string => `${shardId}/${sequenceNumber}`;

export async function reprocessDeadLetters(clients: AwsClients, deployment: DeploymentDescriptor, options: ReprocessOptions): Promise<ReprocessReport> {
  const query = deployment.sluiceQuery;
  const { definition, config } = options;
  if (isMultiSource(definition)) {
    throw new IllegalArgumentError(`Query '${query}' reads several streams, and its dead letters do not say which stream a shard id is of.`, {
      code: 'REDRIVE_UNSUPPORTED', hint: 'not supported yet for several source streams.',
    });
  }
  const compiled = compileForDeployment(definition, config);
  const stage = compiled.sourceStage;
  // State per source shard: the runs are re-drive batches of the shards' own partitions.
  const onShardPartition = stage.isStateful;
  const pk = `${query}#redrive`;
  const ledger = await queryAll(clients.dynamodb, {
    TableName: deployment.checkpointTable, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: pk } }, ConsistentRead: true,
  }, undefined);
  const claims = ledger.filter((i) => !i.sk!.S!.startsWith(RUN_PREFIX));
  const runItems = ledger.filter((i) => i.sk!.S!.startsWith(RUN_PREFIX));
  const claimed = new Map(claims.map((i) => [i.sk!.S!, i]));
  const newIds = new Set(claims.flatMap((i) => (i.newShardId?.S && i.newSequenceNumber?.S ? [idOf(i.newShardId.S, i.newSequenceNumber.S)] : [])));
  const letters = await readDeadLetters(clients.s3, deployment.deadLetterBucket,
    `${normalizePrefix(deployment.deadLetterPrefix ?? 'dead-letter/')}${encodeKeySegment(query)}/`);
  const letterById = new Map(letters.map((l) => [idOf(l.shardId, l.sequenceNumber), l]));
  const shards = await listStreamShards(clients.kinesis, deployment.streamName);
  const sourceShards = new Set(shards.map((s) => s.ShardId!));
  const closedShards = new Set(shards.filter((s) => s.SequenceNumberRange?.EndingSequenceNumber !== undefined).map((s) => s.ShardId!));

  // Open runs, and re-drive batches another writer committed (done) whose claims this process has not marked yet.
  const openRuns = new Set(runItems.filter((i) => i.state?.S === 'open' || (i.mode?.S === 'batch' && i.finalized?.BOOL !== true))
    .map((i) => i.sk!.S!.slice(RUN_PREFIX.length)));
  const report = {
    runs: [] as ReprocessRun[], reprocessed: 0, alreadyRedriven: 0, failedAgain: [] as ReprocessReport['failedAgain'], notFromSource: 0, ofClosedShard: 0, wouldRedrive: 0, lateRows: 0,
  };
  const due = new Map<string, DeadLetterRecord[]>();
  for (const letter of letters) {
    if (options.shardId && letter.shardId !== options.shardId && !letter.shardId.startsWith(`${options.shardId}${REDRIVE_KEY_MARK}`)) continue;
    if (options.sinceMs !== undefined && letter.approximateArrivalTimestampMs < options.sinceMs) continue;
    const id = idOf(letter.shardId, letter.sequenceNumber);
    if (newIds.has(id) || isRedriveProgressKey(letter.shardId)) report.failedAgain.push({ shardId: letter.shardId, sequenceNumber: letter.sequenceNumber, reason: letter.reason });
    // Claimed by a run left open: that run is finished below (and reported there).
    else if (claimed.has(id)) { if (!openRuns.has(claimed.get(id)!.run?.S ?? '')) report.alreadyRedriven++; }
    else if (!sourceShards.has(letter.shardId)) report.notFromSource++;
    else if (onShardPartition && closedShards.has(letter.shardId)) report.ofClosedShard++;
    else due.set(letter.shardId, [...(due.get(letter.shardId) ?? []), letter]);
  }
  report.wouldRedrive = [...due.values()].reduce((n, l) => n + l.length, 0);
  if (options.dryRun) return report;

  const pointer = await readNamespacePointer(clients.dynamodb, deployment.checkpointTable, query);
  const backends = createAwsQueryBackends(compiled, config, clients, new CostMeter(), undefined, {
    location: pointer.active, ...(pointer.exists ? { fence: namespaceFence(deployment.checkpointTable, query, pointer.active.namespace) } : {}),
  });
  // Each claim gets the record's new id (`<run>/<n>`): a dead letter under it failed again.
  const markClaims = async (records: readonly DeadLetterRecord[], partitionId: string): Promise<void> => {
    for (const [i, letter] of records.entries()) {
      await clients.dynamodb.send(new UpdateItemCommand({
        TableName: deployment.checkpointTable, Key: { pk: { S: pk }, sk: { S: idOf(letter.shardId, letter.sequenceNumber) } },
        UpdateExpression: 'SET newShardId = :s, newSequenceNumber = :q, redrivenAtMs = :t',
        ExpressionAttributeValues: { ':s': { S: partitionId }, ':q': { S: String(i + 1) }, ':t': { N: String(Date.now()) } },
      }));
    }
  };
  const markDone = async (partitionId: string): Promise<void> => {
    await clients.dynamodb.send(new UpdateItemCommand({
      TableName: deployment.checkpointTable, Key: { pk: { S: pk }, sk: { S: `${RUN_PREFIX}${partitionId}` } },
      UpdateExpression: 'SET #state = :done, doneAtMs = if_not_exists(doneAtMs, :t), finalized = :f', ExpressionAttributeNames: { '#state': 'state' },
      ExpressionAttributeValues: { ':done': { S: 'done' }, ':t': { N: String(Date.now()) }, ':f': { BOOL: true } },
    }));
  };
  const batchRunner = redriveBatchRunnerOf(clients, deployment, compiled, backends, options.maxInvocations);
  const run = async (partitionId: string, records: readonly DeadLetterRecord[], resumed: boolean): Promise<void> => {
    const shardRecords: ShardRecord[] = records.map((l, i) => ({
      sequenceNumber: String(i + 1), partitionKey: l.partitionKey, dataBase64: l.dataBase64, approximateArrivalTimestampMs: l.approximateArrivalTimestampMs,
    }));
    if (onShardPartition) {
      const shardId = partitionId.slice(0, partitionId.indexOf(REDRIVE_KEY_MARK));
      const outcome = shardRecords.length > 0 ? await runRedriveBatch(batchRunner, shardId, partitionId, shardRecords) : null;
      await markClaims(records, partitionId);
      await markDone(partitionId);
      await deleteRedriveRecords(clients.dynamodb, deployment.checkpointTable, query, partitionId);
      report.runs.push({
        partitionId, records: records.length, resumed, batches: outcome?.batches ?? 0,
        ...(outcome ? { batchId: outcome.batchId, committedElsewhere: !outcome.committedHere, lateRows: outcome.lateRows } : {}),
      });
      report.reprocessed += records.length;
      report.lateRows += outcome?.lateRows ?? 0;
      return;
    }
    let batches = 0;
    for (let invocation = 0; shardRecords.length > 0; invocation++) {
      if (invocation >= (options.maxInvocations ?? 20)) throw new Error(`re-drive ${partitionId}: not committed after ${invocation} invocations`);
      const result = await runShardInvocation(compiled, { shardId: partitionId, records: shardRecords, stage }, backends.forPartition(partitionId, stage));
      batches += result.progress.length;
      if (result.error) throw new Error(`re-drive ${partitionId} failed (run again to resume it): ${result.error.message}`, { cause: result.error });
      if (result.firstUncommittedSequenceNumber === null) break;
    }
    await markClaims(records, partitionId);
    await markDone(partitionId);
    report.runs.push({ partitionId, records: records.length, resumed, batches });
    report.reprocessed += records.length;
  };

  // Runs an earlier re-drive left open: their records, as they were claimed, first.
  for (const item of runItems) {
    const partitionId = item.sk!.S!.slice(RUN_PREFIX.length);
    if (!openRuns.has(partitionId)) continue;
    const ids = (item.ids?.L ?? []).map((v) => v.S!).filter((id) => claimed.get(id)?.run?.S === partitionId);
    const records = ids.map((id) => letterById.get(id)).filter((l): l is DeadLetterRecord => l !== undefined);
    if (records.length !== ids.length) throw new Error(`re-drive ${partitionId}: ${ids.length - records.length} of its dead letters are no longer in S3`);
    // A re-drive batch whose records are stored runs with exactly those (the batch may be planned with them).
    if (onShardPartition && item.count?.N !== undefined && Number(item.count.N) !== records.length) {
      throw new Error(`re-drive ${partitionId}: the ledger holds ${item.count.N} record(s) for it, its claims ${records.length}`);
    }
    await run(partitionId, records, true);
  }

  const runId = options.runId ?? `${Date.now().toString(36)}${Math.floor(Math.random() * 36 ** 4).toString(36)}`;
  for (const [shardId, shardLetters] of due) {
    const partitionId = `${shardId}${REDRIVE_KEY_MARK}${runId}`;
    const ids = shardLetters.map((l) => idOf(l.shardId, l.sequenceNumber));
    await clients.dynamodb.send(new PutItemCommand({
      TableName: deployment.checkpointTable, ConditionExpression: 'attribute_not_exists(pk)',
      Item: {
        pk: { S: pk }, sk: { S: `${RUN_PREFIX}${partitionId}` }, state: { S: 'open' }, ids: { L: ids.map((id) => ({ S: id })) }, openedAtMs: { N: String(Date.now()) },
        ...(onShardPartition ? { mode: { S: 'batch' } } : {}),
      },
    }));
    const mine: DeadLetterRecord[] = [];
    for (const letter of shardLetters) {
      if (await claim(clients, deployment.checkpointTable, { pk: { S: pk }, sk: { S: idOf(letter.shardId, letter.sequenceNumber) }, run: { S: partitionId } })) mine.push(letter);
      else report.alreadyRedriven++;
    }
    await run(partitionId, mine, false);
  }
  return report;
}

/**
 * What runs a list of records (any origin) as a re-drive batch of a source shard's own partition
 * (`runRedriveBatch`), in this process, for a deployed query as `definition` defines it: its live
 * namespace's checkpoint, state and sink, with the namespace fence.
 */
export async function createRedriveBatchRunner(
  clients: AwsClients, deployment: DeploymentDescriptor, definition: QueryDefinition, config: RuntimeConfig, maxInvocations?: number,
): Promise<RedriveBatchRunner> {
  const query = deployment.sluiceQuery;
  const compiled = compileForDeployment(definition, config);
  const pointer = await readNamespacePointer(clients.dynamodb, deployment.checkpointTable, query);
  const backends = createAwsQueryBackends(compiled, config, clients, new CostMeter(), undefined, {
    location: pointer.active, ...(pointer.exists ? { fence: namespaceFence(deployment.checkpointTable, query, pointer.active.namespace) } : {}),
  });
  return redriveBatchRunnerOf(clients, deployment, compiled, backends, maxInvocations);
}

function redriveBatchRunnerOf(
  clients: AwsClients, deployment: DeploymentDescriptor, compiled: CompiledQuery, backends: AwsQueryBackends, maxInvocations: number | undefined,
): RedriveBatchRunner {
  const stage = compiled.sourceStage;
  return {
    client: clients.dynamodb, table: deployment.checkpointTable, compiled, stage, forPartition: (shardId) => backends.forPartition(shardId, stage),
    ...(maxInvocations !== undefined ? { maxInvocations } : {}),
  };
}

async function claim(clients: AwsClients, table: string, item: Item): Promise<boolean> {
  try {
    await clients.dynamodb.send(new PutItemCommand({ TableName: table, Item: { ...item, claimedAtMs: { N: String(Date.now()) } }, ConditionExpression: 'attribute_not_exists(pk)' }));
    return true;
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException) return false;
    throw error;
  }
}
