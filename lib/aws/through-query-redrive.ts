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
 * the next re-drive. A record of a closed (resharded) shard runs on the open descendant whose
 * hash-key range holds its partition key (redrive-routing.ts): that child was seeded with the
 * state of its keys. `route` groups records by the shard they run on, and says which cannot be
 * placed (a split of a state that cannot be divided by key) or must wait (the child's parents
 * are not finished yet, so it has no state to add them to).
 */
import { GetItemCommand, PutItemCommand, TransactionCanceledException, TransactWriteItemsCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { CostMeter } from '../core/cost-meter.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import { compileForDeployment, type CompiledQuery } from '../query/compiled-query.js';
import { isMultiSource, type QueryDefinition } from '../query/query-definition.js';
import { runShardInvocation } from '../query/shard-invocation.js';
import type { DeploymentDescriptor, RuntimeConfig } from '../runtime/runtime-config.js';
import type { ShardRecord } from '../sources/kinesis-shard-source.js';
import { REDRIVE_KEY_MARK } from '../sources/repartition-records.js';
import { createAwsQueryBackends } from './aws-backends.js';
import { deleteRedriveRecords, isPartitionFinished, readRunItem, runRedriveBatch, type RedriveBatchRunner } from './redrive-batch.js';
import { indivisibleState, redriveTargetOf } from './redrive-routing.js';
import { ReshardGuard, stateRoutingOf } from './reshard-guard.js';
import { RefusedShardStore } from './refused-shards.js';
import { skippedRangesOf } from './skipped-batches.js';
import { listStreamShards } from './kinesis-shard-reader.js';
import type { AwsClients } from './clients.js';
import { putItemOnce, queryAll, type Item } from './dynamodb-cost.js';
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

/** The query compiled for a re-drive through it; refused before any AWS call when it cannot be. */
export function compileForRedrive(definition: QueryDefinition, config: RuntimeConfig, query: string): CompiledQuery {
  if (isMultiSource(definition)) {
    throw new IllegalArgumentError(`Query '${query}' reads several streams, and its dead letters do not say which stream a shard id is of.`, {
      code: 'REDRIVE_UNSUPPORTED', hint: 'not supported yet for several source streams.',
    });
  }
  return compileForDeployment(definition, config);
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
export function openRunOf(item: Item, claims: ReadonlyMap<string, Item>): { partitionId: string; ids: string[]; storedCount?: number; claimedBy: string } | null {
  const committedElsewhere = item.mode?.S === 'batch' && item.finalized?.BOOL !== true;
  if (item.state?.S !== 'open' && !committedElsewhere) return null;
  const partitionId = item.sk!.S!.slice(RUN_PREFIX.length);
  // A run rerouted from a shard closed before its batch was planned keeps that run's claims (`claimRun`).
  const claimedBy = item.claimRun?.S ?? partitionId;
  const ids = (item.ids?.L ?? []).map((v) => v.S!).filter((id) => claims.get(id)?.run?.S === claimedBy);
  return { partitionId, ids, claimedBy, ...(item.count?.N !== undefined ? { storedCount: Number(item.count.N) } : {}) };
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
  /** Its shard was closed before its batch was planned: the runs its records went to, on the open descendants. */
  readonly reroutedTo?: string[];
}

/** Records grouped by the shard whose partition they run on (a pseudo-shard's origin for a stateless source stage). */
export interface RoutedRecords<R extends RedriveRecord> {
  readonly byShard: Map<string, R[]>;
  /** Records no open shard can take (a split of a state that cannot be divided by key), with why. */
  readonly refused: { readonly record: R; readonly reason: string }[];
  /** Records whose shard waits for its parents' last records (run again later). */
  readonly waiting: { readonly shardId: string; readonly reason: string; readonly records: R[] }[];
  /** Records of a closed shard placed on a descendant. */
  readonly fromClosedShard: number;
}

export interface ThroughQueryRunner {
  /**
   * Where each record runs. With `prepare` (not in a dry run), a descendant that has not run yet
   * is seeded from its parents first (lib/aws/reshard-guard.ts).
   */
  route<R extends RedriveRecord>(records: readonly R[], prepare: boolean): Promise<RoutedRecords<R>>;
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
  const guard = new ReshardGuard({
    kinesis: clients.kinesis, streamName: backends.streamOf(stage), query: compiled, stage,
    checkpointOf: (shardId) => backends.forPartition(shardId, stage).checkpoint, reader: backends.readerOf(stage),
    skippedRanges: skippedRangesOf(clients.dynamodb, table, query, stage),
    markClosed: (shardId) => backends.watermarks.markClosed(stage.partitionId(shardId)),
    refusals: new RefusedShardStore({ client: clients.dynamodb, checkpointTable: table, namespace: pointer.active.namespace }),
  });
  const indivisible = onShardPartition ? indivisibleState(stateRoutingOf(compiled, stage)) : null;
  /**
   * A re-drive batch's shard must be seeded and not finished, unless its batch was planned there
   * before (then it finishes there): 'closed' when the shard was closed and fully committed before
   * the run's batch was planned on it (its keys belong to its descendants now).
   */
  const checkShardFor = async (shardId: string, run: string): Promise<'run' | 'closed'> => {
    const readiness = await guard.prepare(shardId, { detectFinished: true });
    if (readiness.state === 'ready') return 'run';
    if ((await readRunItem(clients.dynamodb, table, query, run))?.state === 'done') return 'run';
    if (readiness.state === 'waiting') throw new Error(`re-drive run ${run}: shard ${shardId} waits for its parents (${readiness.reason}); run the re-drive again later`);
    return 'closed';
  };
  /**
   * An open run whose shard finished before its batch was planned: its records go to the open
   * descendants holding their keys (redrive-routing.ts), one run each (`<child>@redrive:<same id>`),
   * opened in one transaction with the run's close, on the condition that it is still open. Its
   * batch can no longer be planned (the plan requires the run open), and the new runs keep its claims
   * (`claimRun`), so a re-drive that stops after the transaction resumes them, each record once.
   */
  const reroute = async (shardId: string, partitionId: string, records: readonly RedriveRecord[]): Promise<Map<string, RedriveRecord[]>> => {
    const key = { pk: { S: pk }, sk: { S: `${RUN_PREFIX}${partitionId}` } };
    const read = async () => (await clients.dynamodb.send(new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true }))).Item;
    const item = await read();
    const runId = partitionId.slice(partitionId.indexOf(REDRIVE_KEY_MARK) + REDRIVE_KEY_MARK.length);
    const shards = await listStreamShards(clients.kinesis, deployment.streamName);
    const groups = new Map<string, RedriveRecord[]>();
    for (const record of records) {
      const target = redriveTargetOf(shards, shardId, record.partitionKey, indivisible);
      if ('refused' in target) {
        throw new Error(`re-drive run ${partitionId}: shard ${shardId} was resharded before the run's batch was planned on it, and its records `
          + `cannot follow their keys (${target.refused}); they stay claimed by the run`);
      }
      const sub = pseudoShardOf(target.shardId, runId);
      groups.set(sub, [...(groups.get(sub) ?? []), record]);
    }
    if (item?.state?.S !== 'open') {
      if (item?.reroutedTo) return groups;
      throw new Error(`re-drive run ${partitionId}: not open, and not rerouted (${item?.state?.S ?? 'no run item'})`);
    }
    const now = { N: String(Date.now()) };
    try {
      await clients.dynamodb.send(new TransactWriteItemsCommand({
        TransactItems: [
          {
            Update: {
              TableName: table, Key: key, ConditionExpression: '#state = :open',
              UpdateExpression: 'SET #state = :done, doneAtMs = :t, finalized = :f, reroutedTo = :to', ExpressionAttributeNames: { '#state': 'state' },
              ExpressionAttributeValues: { ':open': { S: 'open' }, ':done': { S: 'done' }, ':t': now, ':f': { BOOL: true }, ':to': { L: [...groups.keys()].map((g) => ({ S: g })) } },
            },
          },
          ...[...groups].map(([sub, list]) => ({
            Put: {
              TableName: table, ConditionExpression: 'attribute_not_exists(pk)',
              Item: {
                pk: { S: pk }, sk: { S: `${RUN_PREFIX}${sub}` }, state: { S: 'open' }, mode: { S: 'batch' }, openedAtMs: now,
                ids: { L: list.map((r) => ({ S: redriveIdOf(r.shardId, r.sequenceNumber) })) },
                claimRun: { S: item.claimRun?.S ?? partitionId }, reroutedFrom: { S: partitionId }, ...(item.range ? { range: item.range } : {}),
              },
            },
          })),
        ],
      }));
    } catch (error) {
      // Another re-drive rerouted it first: the runs it opened are these (same keys), finished below too (idempotent).
      if (!(error instanceof TransactionCanceledException) || !(await read())?.reroutedTo) throw error;
    }
    // Its records, if stored, can no longer be planned: raw input kept no longer than needed.
    await deleteRedriveRecords(clients.dynamodb, table, query, partitionId);
    return groups;
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
    async route(records, prepare) {
      const byShard = new Map<string, (typeof records)[number][]>();
      const refused: RoutedRecords<(typeof records)[number]>['refused'] = [];
      let fromClosedShard = 0;
      const shards = onShardPartition ? await listStreamShards(clients.kinesis, deployment.streamName) : [];
      for (const record of records) {
        const target = onShardPartition ? redriveTargetOf(shards, record.shardId, record.partitionKey, indivisible) : { shardId: record.shardId };
        if ('refused' in target) { refused.push({ record, reason: target.refused }); continue; }
        if (target.shardId !== record.shardId) fromClosedShard++;
        const list = byShard.get(target.shardId);
        if (list) list.push(record);
        else byShard.set(target.shardId, [record]);
      }
      const waiting: RoutedRecords<(typeof records)[number]>['waiting'] = [];
      if (onShardPartition && prepare) {
        for (const [shardId, list] of byShard) {
          const readiness = await guard.prepare(shardId, { shards });
          if (readiness.state !== 'waiting') continue;
          waiting.push({ shardId, reason: readiness.reason, records: list });
          byShard.delete(shardId);
        }
      }
      return { byShard, refused, waiting, fromClosedShard };
    },
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
        const claim = { pk: { S: pk }, sk: { S: redriveIdOf(record.shardId, record.sequenceNumber) }, run: { S: partitionId }, claimedAtMs: { N: String(Date.now()) } };
        if (await putItemOnce(clients.dynamodb, table, claim)) mine.push(record);
      }
      return mine;
    },
    finish,
  };
  async function finish(partitionId: string, records: readonly RedriveRecord[]): Promise<RunOutcome> {
    const shardRecords: ShardRecord[] = records.map((r, i) => ({
      sequenceNumber: String(i + 1), partitionKey: r.partitionKey, dataBase64: r.dataBase64, approximateArrivalTimestampMs: r.approximateArrivalTimestampMs,
    }));
    if (onShardPartition) {
      const shardId = partitionId.slice(0, partitionId.indexOf(REDRIVE_KEY_MARK));
      const rerouted = async (): Promise<RunOutcome> => {
        const outcomes: RunOutcome[] = [];
        const groups = await reroute(shardId, partitionId, records);
        for (const [sub, list] of groups) outcomes.push(await finish(sub, list));
        return {
          batches: outcomes.reduce((n, o) => n + o.batches, 0), reroutedTo: [...groups.keys()],
          committedElsewhere: outcomes.some((o) => o.committedElsewhere === true),
          lateRows: outcomes.some((o) => o.lateRows === null) ? null : outcomes.reduce((n, o) => n + (o.lateRows ?? 0), 0),
        };
      };
      if (shardRecords.length > 0 && await checkShardFor(shardId, partitionId) === 'closed') return rerouted();
      let outcome: Awaited<ReturnType<typeof runRedriveBatch>> | null = null;
      try {
        outcome = shardRecords.length > 0 ? await runRedriveBatch(batchRunner, shardId, partitionId, shardRecords) : null;
      } catch (error) {
        // Another process found the shard finished between the check above and the plan (the plan's
        // fence refused it): its keys are the descendants' now, as when the check sees it.
        if (!isPartitionFinished(error)) throw error;
        return rerouted();
      }
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
  }
}

