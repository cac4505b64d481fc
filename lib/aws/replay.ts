/**
 * `sluice replay`: recompute a query from an earlier stream position in a shadow namespace, then
 * cut over to it (the pointer item and its fence: lib/aws/query-namespace.ts).
 *
 *   start     records the shadow: namespace `${query}@${runId}`, sink prefix beside the live one
 *             (S3) or a table of its own (DynamoDB, `sinkTable`), each shard read from `fromMs`
 *   status    per shard: the live and the shadow's committed positions, and how many records the
 *             shadow still has to read to reach the live one; ready when none anywhere
 *   cutover   refused until ready; one transaction moves the pointer on the condition that no live
 *             partition committed meanwhile; then the S3 reader pointer object is written
 *   abort     forgets the shadow, then deletes its checkpoint, state and sink objects
 */
import { ScanCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DEPLOYMENT_DEFAULTS, sinkPrefixFor, type DeploymentDescriptor, type RuntimeConfig } from '../runtime/runtime-config.js';
import type { QueryDefinition } from '../query/query-definition.js';
import type { AwsClients } from './clients.js';
import { DynamoDbCheckpoint } from './dynamodb-checkpoint.js';
import { batchWriteAll, type Item } from './dynamodb-cost.js';
import { KinesisShardReader, listStreamShards } from './kinesis-shard-reader.js';
import {
  cutoverShadow, dropShadow, readNamespacePointer, ReplayError, shadowNamespaceOf, shadowSinkPrefix, startShadow,
  type LiveCommitGuard, type NamespacePointer, type ShadowRun,
} from './query-namespace.js';
import { committedShardOffset } from '../query/shard-invocation.js';
import { CHECKPOINT_ITEMS, ensureTables, padId } from './tables.js';
import { deleteKeys, encodeKeySegment, getObjectText, listKeys, normalizePrefix, putObject } from './s3-util.js';
import { STATE_OBJECT_FOLDER } from './dynamodb-state-store.js';
import { readAfterPosition } from '../sources/repartition-shard-source.js';

/** The deployment's function configuration, with the defaults the construct deploys. */
export function runtimeConfigOf(deployment: DeploymentDescriptor): RuntimeConfig {
  return {
    sinkPrefix: '', deadLetterPrefix: DEPLOYMENT_DEFAULTS.deadLetterPrefix,
    idleShardTimeoutMs: DEPLOYMENT_DEFAULTS.idleShardTimeoutMs, snapshotEveryBatches: DEPLOYMENT_DEFAULTS.snapshotEveryBatches,
    ...deployment,
  };
}

/** The S3 sink's prefix before any replay (the deployment's, else the declared one, else `<query>/`). */
export function baseSinkPrefix(deployment: DeploymentDescriptor, definition?: QueryDefinition): string {
  const declared = definition && definition.sink.kind !== 'dynamodb' ? definition.sink.prefix : undefined;
  return sinkPrefixFor(deployment.sluiceQuery, declared, deployment.sinkPrefix);
}

/**
 * Where readers of an S3 sink find the live prefix after a cutover: an object in the base prefix
 * (`results/` → `results/_sluice_active.json`, hidden from lake readers by its `_`),
 * `{ prefix, namespace, cutoverAtMs }`. Absent: the base prefix is live.
 */
export const readerPointerKey = (basePrefix: string): string => `${basePrefix.replace(/\/+$/, '')}/_sluice_active.json`;

export interface ReaderPointer {
  readonly prefix: string;
  readonly namespace: string;
  readonly cutoverAtMs: number;
}

/** The S3 prefix a reader reads now. */
export async function liveSinkPrefix(clients: AwsClients, bucket: string, basePrefix: string): Promise<string> {
  const text = await getObjectText(clients.s3, bucket, readerPointerKey(basePrefix));
  return text ? (JSON.parse(text) as ReaderPointer).prefix : basePrefix;
}

export interface StartOptions {
  readonly fromMs: number;
  /** The fixed query, when it is not deployed yet: `sluice replay run` drives the shadow with it. */
  readonly definition?: QueryDefinition;
  /** DynamoDB sink: the table the shadow writes (created if missing); the live table is never written. */
  readonly sinkTable?: string;
  readonly nowMs?: number;
  readonly runId?: string;
}

export async function startReplay(clients: AwsClients, deployment: DeploymentDescriptor, options: StartOptions): Promise<ShadowRun> {
  const query = deployment.sluiceQuery;
  const nowMs = options.nowMs ?? Date.now();
  if (options.fromMs > nowMs) {
    throw new ReplayError(`--from ${new Date(options.fromMs).toISOString()} is in the future.`, { code: 'REPLAY_BAD_START' });
  }
  if (deployment.repartitionStreamName || (deployment.repartitionStreamNames?.length ?? 0) > 0) {
    throw new ReplayError(`'${query}' has a repartition stage: a replay would write into the internal streams its live run reads.`, {
      code: 'REPLAY_UNSUPPORTED', hint: 'not supported yet; deploy the fixed query as a new query (a new name) instead.',
    });
  }
  const dynamoDbSink = options.definition ? options.definition.sink.kind === 'dynamodb' : !deployment.sinkBucket && !!deployment.sinkTable;
  if (dynamoDbSink && !options.sinkTable) {
    throw new ReplayError(`'${query}' writes a DynamoDB table: a replay needs a table of its own, or it would change the live answer.`, {
      code: 'REPLAY_NEEDS_SINK_TABLE', hint: 'pass --sink-table <name> (created with the sink\'s key schema if it does not exist).',
    });
  }
  if (options.sinkTable && options.sinkTable === deployment.sinkTable) {
    throw new ReplayError(`--sink-table ${options.sinkTable} is the live sink table.`, { code: 'REPLAY_NEEDS_SINK_TABLE' });
  }
  const runId = options.runId ?? `r${nowMs.toString(36)}`;
  const pointer = await readNamespacePointer(clients.dynamodb, deployment.checkpointTable, query);
  if (pointer.shadow) {
    throw new ReplayError(`A replay of '${query}' is already running (run ${pointer.shadow.runId}, from ${new Date(pointer.shadow.fromMs).toISOString()}).`, {
      code: 'REPLAY_ALREADY_RUNNING', hint: `finish it (\`sluice replay cutover ${query}\`) or remove it (\`sluice replay abort ${query}\`) first.`,
    });
  }
  if (options.sinkTable) await ensureTables(clients.dynamodb, { checkpointTable: deployment.checkpointTable, stateTable: deployment.stateTable, sinkTable: options.sinkTable });
  const run: ShadowRun = {
    runId, namespace: shadowNamespaceOf(query, runId), fromMs: options.fromMs, startedAtMs: nowMs,
    drivenBy: options.definition ? 'cli' : 'scheduled-function',
    ...(deployment.sinkBucket && !dynamoDbSink ? { sinkPrefix: shadowSinkPrefix(baseSinkPrefix(deployment, options.definition), runId) } : {}),
    ...(options.sinkTable ? { sinkTable: options.sinkTable } : {}),
  };
  // Conditional: of two starts at once, one wins and the other is refused.
  await startShadow(clients.dynamodb, deployment.checkpointTable, query, run, pointer.active);
  return run;
}

export interface ShardReplayStatus {
  readonly shardId: string;
  /** The live namespace's committed position (sequence number; null before its first commit). */
  readonly live: string | null;
  readonly liveBatch: number | null;
  readonly shadow: string | null;
  readonly shadowBatch: number | null;
  /** Records the shadow has still to read to reach the live position (capped). */
  readonly behind: number;
  readonly capped: boolean;
}

export interface ReplayStatus {
  readonly query: string;
  readonly active: string;
  readonly shadow: ShadowRun | null;
  readonly shards: readonly ShardReplayStatus[];
  /** Every shard of the shadow is at or past the live position. */
  readonly ready: boolean;
  readonly retired: readonly string[];
}

function checkpointIn(clients: AwsClients, deployment: DeploymentDescriptor, namespace: string, partitionId: string): DynamoDbCheckpoint {
  return new DynamoDbCheckpoint({
    client: clients.dynamodb, checkpointTable: deployment.checkpointTable, stateTable: deployment.stateTable,
    queryName: namespace, partitionId, stateCache: null,
  });
}

/** Per shard (closed parents included): the live and shadow positions, and the records between. */
export async function replayStatus(clients: AwsClients, deployment: DeploymentDescriptor, options: { cap?: number } = {}): Promise<ReplayStatus & { pointer: NamespacePointer }> {
  const query = deployment.sluiceQuery;
  const pointer = await readNamespacePointer(clients.dynamodb, deployment.checkpointTable, query);
  const base = { query, active: pointer.active.namespace, shadow: pointer.shadow, retired: pointer.retired.map((r) => r.namespace), pointer };
  if (!pointer.shadow) return { ...base, shards: [], ready: false };
  const shadow = pointer.shadow;
  const reader = new KinesisShardReader(clients.kinesis, deployment.streamName);
  const cap = options.cap ?? 10_000;
  const shards = await Promise.all((await listStreamShards(clients.kinesis, deployment.streamName)).map(async (s): Promise<ShardReplayStatus> => {
    const shardId = s.ShardId!;
    const liveCheckpoint = checkpointIn(clients, deployment, pointer.active.namespace, shardId);
    const shadowCheckpoint = checkpointIn(clients, deployment, shadow.namespace, shardId);
    const [live, liveCommit, shadowAt, shadowCommit] = await Promise.all([
      committedShardOffset(liveCheckpoint), liveCheckpoint.commitLog.getLatest(), committedShardOffset(shadowCheckpoint), shadowCheckpoint.commitLog.getLatest(),
    ]);
    let behind = 0;
    let capped = false;
    const liveSeq = live?.sequenceNumber ?? null;
    const shadowSeq = readAfterPosition(shadowAt?.sequenceNumber);
    if (liveSeq !== null && (shadowSeq === null || BigInt(shadowSeq) < BigInt(liveSeq))) {
      // What the shadow reads next, up to the live position: from its commit, or from --from.
      const position = await reader.readAfter(shardId, shadowSeq, cap, shadowSeq === null ? shadow.fromMs : undefined);
      const pending = position.records.filter((r) => BigInt(r.sequenceNumber) <= BigInt(liveSeq));
      behind = pending.length;
      capped = position.records.length >= cap && pending.length === position.records.length;
    }
    return {
      shardId, live: liveSeq, liveBatch: liveCommit?.[0] ?? null, shadow: shadowSeq, shadowBatch: shadowCommit?.[0] ?? null, behind, capped,
    };
  }));
  shards.sort((a, b) => (a.shardId < b.shardId ? -1 : 1));
  return { ...base, shards, ready: shards.every((s) => s.behind === 0) };
}

export interface CutoverResult {
  readonly namespace: string;
  readonly retired: string;
  /** S3 sinks: the reader pointer object written, and the prefix it names. */
  readonly readerPointer?: { readonly key: string; readonly prefix: string };
  readonly sinkTable?: string;
  /** Already cut over before (the reader pointer was written again). */
  readonly already?: boolean;
}

/** Makes the caught-up shadow live; refused (REPLAY_NOT_CAUGHT_UP) while it is behind anywhere. */
export async function cutoverReplay(
  clients: AwsClients, deployment: DeploymentDescriptor, options: { definition?: QueryDefinition; nowMs?: () => number } = {},
): Promise<CutoverResult> {
  const query = deployment.sluiceQuery;
  const now = options.nowMs ?? Date.now;
  for (let attempt = 0; attempt < 5; attempt++) {
    const status = await replayStatus(clients, deployment);
    const { pointer } = status;
    if (!pointer.shadow) {
      if (pointer.active.namespace === query) throw new ReplayError(`No replay of '${query}' to cut over to.`, { code: 'REPLAY_NOT_FOUND' });
      // Cut over before: write the reader pointer again (a crash may have come between the two writes).
      return { ...(await publishReaderPointer(clients, deployment, pointer.active, now(), options.definition)), retired: pointer.retired[0]?.namespace ?? query, already: true };
    }
    if (!status.ready) {
      const behind = status.shards.filter((s) => s.behind > 0);
      throw new ReplayError(`The replay ${pointer.shadow.runId} of '${query}' has not caught up with the live run: ${behind
        .map((s) => `${s.shardId} ${s.behind}${s.capped ? '+' : ''} record(s) behind`).join(', ')}.`, {
        code: 'REPLAY_NOT_CAUGHT_UP', hint: `run it further (\`sluice replay run ${query} --query-module ...\`, or the scheduled function) and check \`sluice replay status ${query}\`.`,
      });
    }
    const guards: LiveCommitGuard[] = status.shards.map((s) => ({
      pk: `${pointer.active.namespace}#${s.shardId}`, nextCommitSk: `${CHECKPOINT_ITEMS.commitPrefix}${padId(s.liveBatch === null ? 0 : s.liveBatch + 1)}`,
    }));
    if (await cutoverShadow(clients.dynamodb, deployment.checkpointTable, query, pointer, pointer.shadow.runId, guards)) {
      const published = await publishReaderPointer(clients, deployment, pointer.shadow, now(), options.definition);
      return { ...published, retired: pointer.active.namespace };
    }
    // A live batch committed in between: look again.
  }
  throw new ReplayError(`The live run of '${query}' kept committing past the replay during the cutover.`, {
    code: 'REPLAY_NOT_CAUGHT_UP', retryable: true, hint: 'run the replay further and cut over again.',
  });
}

async function publishReaderPointer(
  clients: AwsClients, deployment: DeploymentDescriptor, location: { namespace: string; sinkPrefix?: string; sinkTable?: string }, nowMs: number,
  definition?: QueryDefinition,
): Promise<Omit<CutoverResult, 'retired'>> {
  if (!location.sinkPrefix || !deployment.sinkBucket) return { namespace: location.namespace, ...(location.sinkTable ? { sinkTable: location.sinkTable } : {}) };
  const key = readerPointerKey(baseSinkPrefix(deployment, definition));
  const pointer: ReaderPointer = { prefix: location.sinkPrefix, namespace: location.namespace, cutoverAtMs: nowMs };
  await putObject(clients.s3, deployment.sinkBucket, key, JSON.stringify(pointer), 'application/json');
  return { namespace: location.namespace, readerPointer: { key, prefix: location.sinkPrefix } };
}

export interface AbortResult {
  readonly runId: string;
  readonly checkpointItems: number;
  readonly stateItems: number;
  readonly sinkObjects: number;
}

/** Forgets the shadow first (its writers are fenced off at once), then deletes what it wrote. */
export async function abortReplay(clients: AwsClients, deployment: DeploymentDescriptor): Promise<AbortResult> {
  const query = deployment.sluiceQuery;
  const pointer = await readNamespacePointer(clients.dynamodb, deployment.checkpointTable, query);
  const shadow = pointer.shadow;
  if (!shadow) throw new ReplayError(`No replay of '${query}' to abort.`, { code: 'REPLAY_NOT_FOUND' });
  await dropShadow(clients.dynamodb, deployment.checkpointTable, query, shadow.runId, shadow.namespace);
  const prefix = `${shadow.namespace}#`;
  const checkpointItems = await deleteByPkPrefix(clients.dynamodb, deployment.checkpointTable, prefix);
  const stateItems = deployment.stateTable === deployment.checkpointTable ? 0 : await deleteByPkPrefix(clients.dynamodb, deployment.stateTable, prefix);
  let sinkObjects = 0;
  if (shadow.sinkPrefix && deployment.sinkBucket) {
    const keys = await listKeys(clients.s3, deployment.sinkBucket, shadow.sinkPrefix);
    await deleteKeys(clients.s3, deployment.sinkBucket, keys);
    sinkObjects = keys.length;
  }
  if (deployment.sinkBucket && deployment.sinkPrefix !== undefined) {
    // Its state payloads kept as objects, under the deployment's prefix (lib/aws/dynamodb-state-store.ts).
    const stateKeys = await listKeys(clients.s3, deployment.sinkBucket, `${normalizePrefix(deployment.sinkPrefix)}${STATE_OBJECT_FOLDER}${encodeKeySegment(prefix)}`);
    await deleteKeys(clients.s3, deployment.sinkBucket, stateKeys);
    sinkObjects += stateKeys.length;
  }
  return { runId: shadow.runId, checkpointItems, stateItems, sinkObjects };
}

/** A Scan of the whole table (keys only): an abort is rare, and the shadow's partitions are not all known. */
async function deleteByPkPrefix(client: DynamoDBClient, table: string, prefix: string): Promise<number> {
  const keys: Item[] = [];
  let start: Item | undefined;
  do {
    const page = await client.send(new ScanCommand({
      TableName: table, ProjectionExpression: 'pk, sk', FilterExpression: 'begins_with(pk, :p)',
      ExpressionAttributeValues: { ':p': { S: prefix } }, ConsistentRead: true, ...(start ? { ExclusiveStartKey: start } : {}),
    }));
    keys.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  await batchWriteAll(client, table, keys.map((k) => ({ DeleteRequest: { Key: { pk: k.pk!, sk: k.sk! } } })), undefined);
  return keys.length;
}
