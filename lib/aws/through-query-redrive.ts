/**
 * Running re-driven records through the query itself, in the CLI's process, each exactly once: the
 * part that dead letters (dead-letter-reprocess.ts) and skipped source ranges
 * (skipped-batch-redrive.ts) share. Both hand the runner a plain list of records in order
 * (`RedriveRecord`: where each came from, and its bytes); the runner never writes the source
 * stream, so no other consumer of it sees the records twice.
 *
 * The ledger (checkpoint table, pk `${query}#redrive`):
 *
 *   1. a run item (sk `run#<pseudo-shard>`, state `open`) lists the records' ids, in order;
 *   2. each record is claimed with a conditional PutItem naming the run (refused: another run has it);
 *   3. the run's claimed records (synthetic sequence numbers 1..n, in that order) run to their
 *      commit as the pseudo-shard `<shard>@redrive:<run>`; each claim then gets its new id
 *      (`<pseudo-shard>/<n>`) and the run is marked `done`.
 *
 * A run that stops before 3 ends stays `open`: the next re-drive runs it again first with the same
 * records in the same order, and the pseudo-shard's checkpoint re-runs or skips its batch: nothing
 * twice. A run item of a skipped range carries `range` (`<partition>#<first>`), so each re-drive
 * resumes only its own kind of run.
 *
 * A stateful source stage (a one-stage aggregation) keeps its state per source shard: a pseudo-shard
 * would start from empty state. There the run (mode `batch`) is a re-drive batch on the real shard's
 * own partition instead (redrive-batch.ts): its records stored in the ledger, one planned batch of
 * the shard's checkpoint that this process, or the live handler or scheduled function if it dies,
 * runs exactly once. A run such a writer committed is closed (claims marked, records removed) by
 * the next re-drive. Callers that cannot place a run on the real shard (a skipped range of a closed
 * shard, whose children were seeded from its final state) refuse with `statefulRefusal`.
 */
import { ConditionalCheckFailedException, PutItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { CostMeter } from '../core/cost-meter.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import { compileForDeployment, type CompiledQuery } from '../query/compiled-query.js';
import { isMultiSource, type QueryDefinition } from '../query/query-definition.js';
import { runShardInvocation } from '../query/shard-invocation.js';
import type { DeploymentDescriptor, RuntimeConfig } from '../runtime/runtime-config.js';
import type { ShardRecord } from '../sources/kinesis-shard-source.js';
import { REDRIVE_KEY_MARK } from '../sources/repartition-records.js';
import { createAwsQueryBackends } from './aws-backends.js';
import { deleteRedriveRecords, runRedriveBatch, type RedriveBatchRunner } from './redrive-batch.js';
import type { AwsClients } from './clients.js';
import { queryAll, type Item } from './dynamodb-cost.js';
import { namespaceFence, readNamespacePointer } from './query-namespace.js';

/** A record to re-drive: its origin (shard, sequence number) and what Kinesis delivered. A dead letter is one. */
export interface RedriveRecord {
  readonly shardId: string;
  readonly sequenceNumber: string;
  readonly partitionKey: string;
  readonly approximateArrivalTimestampMs: number;
  readonly dataBase64: string;
}

export { RUN_PREFIX } from './redrive-batch.js';
import { RUN_PREFIX } from './redrive-batch.js';
const PAGE_PREFIX = 'page#';
export const ledgerPkOf = (query: string): string => `${query}#redrive`;
export const redriveIdOf = (shardId: string, sequenceNumber: string): string => `${shardId}/${sequenceNumber}`;
export const pseudoShardOf = (shardId: string, runId: string): string => `${shardId}${REDRIVE_KEY_MARK}${runId}`;
export const newRunId = (): string => `${Date.now().toString(36)}${Math.floor(Math.random() * 36 ** 4).toString(36)}`;

/**
 * The query compiled for a re-drive through it; refused before any AWS call when it cannot be.
 * `refuseStateful`: a stateful source stage is refused too (the caller has no run it can
 * place on the real shard's partition).
 */
export function compileForRedrive(definition: QueryDefinition, config: RuntimeConfig, query: string, refuseStateful = false): CompiledQuery {
  if (isMultiSource(definition)) {
    throw new IllegalArgumentError(`Query '${query}' reads several streams, and its dead letters do not say which stream a shard id is of.`, {
      code: 'REDRIVE_UNSUPPORTED', hint: 'not supported yet for several source streams.',
    });
  }
  const compiled = compileForDeployment(definition, config);
  if (refuseStateful && compiled.sourceStage.isStateful) throw statefulRefusal(query);
  return compiled;
}

export function statefulRefusal(query: string): IllegalArgumentError {
  return new IllegalArgumentError(`Query '${query}' keeps its state per source shard in one stage: a re-drive's own partition would start `
    + 'from empty state and overwrite the results.', {
    code: 'REDRIVE_STATEFUL_SOURCE_STAGE',
    hint: 'the records stay where they are. Queries with a repartition stage and stateless queries are re-driven through the query; '
      + '`--into-stream` puts the records back into the source stream, where every consumer of that stream reads them again.',
  });
}

/** The ledger as it stands: claims by id, run items, and the ids re-driven records got (a record failing under one failed again). */
export async function readRedriveLedger(clients: AwsClients, deployment: DeploymentDescriptor): Promise<{
  claims: Map<string, Item>; runs: Item[]; newIds: Set<string>;
}> {
  const items = await queryAll(clients.dynamodb, {
    TableName: deployment.checkpointTable, KeyConditionExpression: 'pk = :pk',
    ExpressionAttributeValues: { ':pk': { S: ledgerPkOf(deployment.sluiceQuery) } }, ConsistentRead: true,
  }, undefined);
  const claims = new Map(items.filter((i) => !i.sk!.S!.startsWith(RUN_PREFIX) && !i.sk!.S!.startsWith(PAGE_PREFIX)).map((i) => [i.sk!.S!, i]));
  const newIds = new Set([...claims.values()].flatMap((i) => (i.newShardId?.S && i.newSequenceNumber?.S ? [redriveIdOf(i.newShardId.S, i.newSequenceNumber.S)] : [])));
  return { claims, runs: items.filter((i) => i.sk!.S!.startsWith(RUN_PREFIX)), newIds };
}

/**
 * A run to finish: open, or a re-drive batch another writer committed (done) whose claims no
 * re-drive has marked yet. Its pseudo-shard, the ids it claimed in order, and (a re-drive batch)
 * how many records the ledger stores for it.
 */
export function openRunOf(item: Item, claims: ReadonlyMap<string, Item>): { partitionId: string; ids: string[]; storedCount?: number } | null {
  const committedElsewhere = item.mode?.S === 'batch' && item.finalized?.BOOL !== true;
  if (item.state?.S !== 'open' && !committedElsewhere) return null;
  const partitionId = item.sk!.S!.slice(RUN_PREFIX.length);
  const ids = (item.ids?.L ?? []).map((v) => v.S!).filter((id) => claims.get(id)?.run?.S === partitionId);
  return { partitionId, ids, ...(item.count?.N !== undefined ? { storedCount: Number(item.count.N) } : {}) };
}

/** How a run's records were applied. */
export interface RunOutcome {
  readonly batches: number;
  /** A re-drive batch on the shard's own partition (a stateful source stage): its batch id there. */
  readonly batchId?: number;
  /** That batch was committed by another writer (the live handler, the scheduled function). */
  readonly committedElsewhere?: boolean;
  /** Re-driven rows behind the watermark, dropped as late (null: unknown, committed elsewhere). */
  readonly lateRows?: number | null;
}

export interface ThroughQueryRunner {
  /** Opens run `partitionId` for `records` (the run item, then a claim each): the records this run claimed, in order. */
  open<R extends RedriveRecord>(partitionId: string, records: readonly R[], extra?: Item): Promise<R[]>;
  /** Runs an open run's claimed records to their commit and closes the run. */
  finish(partitionId: string, records: readonly RedriveRecord[]): Promise<RunOutcome>;
  /** The runs are re-drive batches of the real shards' partitions (a stateful source stage). */
  readonly onShardPartition: boolean;
}

export interface RunnerOptions {
  readonly definition: QueryDefinition;
  readonly config: RuntimeConfig;
  /** Invocations per run at most (each runs up to 8 batches). */
  readonly maxInvocations?: number;
}

export async function createThroughQueryRunner(clients: AwsClients, deployment: DeploymentDescriptor, options: RunnerOptions): Promise<ThroughQueryRunner> {
  const query = deployment.sluiceQuery;
  const table = deployment.checkpointTable;
  const pk = ledgerPkOf(query);
  const compiled = compileForRedrive(options.definition, options.config, query);
  const stage = compiled.sourceStage;
  const onShardPartition = stage.isStateful;
  const pointer = await readNamespacePointer(clients.dynamodb, table, query);
  const backends = createAwsQueryBackends(compiled, options.config, clients, new CostMeter(), undefined, {
    location: pointer.active, ...(pointer.exists ? { fence: namespaceFence(table, query, pointer.active.namespace) } : {}),
  });
  const batchRunner: RedriveBatchRunner = {
    client: clients.dynamodb, table, compiled, stage, forPartition: (shardId) => backends.forPartition(shardId, stage),
    ...(options.maxInvocations !== undefined ? { maxInvocations: options.maxInvocations } : {}),
  };
  const markClaimsAndDone = async (partitionId: string, records: readonly RedriveRecord[]): Promise<void> => {
    for (const [i, record] of records.entries()) {
      await clients.dynamodb.send(new UpdateItemCommand({
        TableName: table, Key: { pk: { S: pk }, sk: { S: redriveIdOf(record.shardId, record.sequenceNumber) } },
        UpdateExpression: 'SET newShardId = :s, newSequenceNumber = :q, redrivenAtMs = :t',
        ExpressionAttributeValues: { ':s': { S: partitionId }, ':q': { S: String(i + 1) }, ':t': { N: String(Date.now()) } },
      }));
    }
    // `finalized`: the claims are marked (a re-drive batch's commit marks the run done before that).
    await clients.dynamodb.send(new UpdateItemCommand({
      TableName: table, Key: { pk: { S: pk }, sk: { S: `${RUN_PREFIX}${partitionId}` } },
      UpdateExpression: 'SET #state = :done, doneAtMs = if_not_exists(doneAtMs, :t), finalized = :f', ExpressionAttributeNames: { '#state': 'state' },
      ExpressionAttributeValues: { ':done': { S: 'done' }, ':t': { N: String(Date.now()) }, ':f': { BOOL: true } },
    }));
  };
  return {
    onShardPartition,
    async open(partitionId, records, extra = {}) {
      await clients.dynamodb.send(new PutItemCommand({
        TableName: table, ConditionExpression: 'attribute_not_exists(pk)',
        Item: {
          pk: { S: pk }, sk: { S: `${RUN_PREFIX}${partitionId}` }, state: { S: 'open' },
          ids: { L: records.map((r) => ({ S: redriveIdOf(r.shardId, r.sequenceNumber) })) }, openedAtMs: { N: String(Date.now()) },
          ...(onShardPartition ? { mode: { S: 'batch' } } : {}), ...extra,
        },
      }));
      const mine: typeof records[number][] = [];
      for (const record of records) {
        if (await claim(clients, table, { pk: { S: pk }, sk: { S: redriveIdOf(record.shardId, record.sequenceNumber) }, run: { S: partitionId } })) mine.push(record);
      }
      return mine;
    },
    async finish(partitionId, records) {
      const shardRecords: ShardRecord[] = records.map((r, i) => ({
        sequenceNumber: String(i + 1), partitionKey: r.partitionKey, dataBase64: r.dataBase64, approximateArrivalTimestampMs: r.approximateArrivalTimestampMs,
      }));
      if (onShardPartition) {
        const shardId = partitionId.slice(0, partitionId.indexOf(REDRIVE_KEY_MARK));
        const outcome = shardRecords.length > 0 ? await runRedriveBatch(batchRunner, shardId, partitionId, shardRecords) : null;
        await markClaimsAndDone(partitionId, records);
        await deleteRedriveRecords(clients.dynamodb, table, query, partitionId);
        return {
          batches: outcome?.batches ?? 0,
          ...(outcome ? { batchId: outcome.batchId, committedElsewhere: !outcome.committedHere, lateRows: outcome.lateRows } : {}),
        };
      }
      let batches = 0;
      for (let invocation = 0; shardRecords.length > 0; invocation++) {
        if (invocation >= (options.maxInvocations ?? 20)) throw new Error(`re-drive ${partitionId}: not committed after ${invocation} invocations`);
        const result = await runShardInvocation(compiled, { shardId: partitionId, records: shardRecords, stage }, backends.forPartition(partitionId, stage));
        batches += result.progress.length;
        if (result.error) throw new Error(`re-drive ${partitionId} failed (run again to resume it): ${result.error.message}`, { cause: result.error });
        if (result.firstUncommittedSequenceNumber === null) break;
      }
      await markClaimsAndDone(partitionId, records);
      return { batches };
    },
  };
}

/** A conditional PutItem of a ledger item: false when someone has it already. */
export async function claim(clients: AwsClients, table: string, item: Item): Promise<boolean> {
  try {
    await clients.dynamodb.send(new PutItemCommand({ TableName: table, Item: { ...item, claimedAtMs: { N: String(Date.now()) } }, ConditionExpression: 'attribute_not_exists(pk)' }));
    return true;
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException) return false;
    throw error;
  }
}
