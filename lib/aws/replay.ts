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
 *   sweep     deletes again what a batch in flight during an abort wrote, once no such writer can run
 *   rollback  makes the namespace the last cutover retired the shadow again, to catch up and cut over to
 */
import { DescribeTableCommand, ResourceNotFoundException, ScanCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DescribeStreamSummaryCommand } from '@aws-sdk/client-kinesis';
import { DEPLOYMENT_DEFAULTS, sinkPrefixFor, type DeploymentDescriptor, type RuntimeConfig } from '../runtime/runtime-config.js';
import type { QueryDefinition } from '../query/query-definition.js';
import type { AwsClients } from './clients.js';
import { DynamoDbCheckpoint } from './dynamodb-checkpoint.js';
import { batchWriteAll, type Item } from './dynamodb-cost.js';
import { KinesisShardReader, listStreamShards } from './kinesis-shard-reader.js';
import {
  cutoverShadow, dropShadow, fenceUnfencedWriters, forgetAbortedRuns, readNamespacePointer, ReplayError, shadowNamespaceOf, shadowSinkPrefix, startShadow,
  type AbortedRun, type LiveCommitGuard, type NamespaceLocation, type NamespacePointer, type ShadowRun,
} from './query-namespace.js';
import { internalStreamNames } from '../query/compiled-query.js';
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

/**
 * Whether the query writes a DynamoDB sink: the given definition says, else the deployment. The
 * construct names a sink table only for a DynamoDB sink; one that spills large values
 * (`onUnwritableRow: 'spill'`) names a bucket too, so a bucket alone says nothing.
 */
export function writesDynamoDbSink(deployment: Pick<DeploymentDescriptor, 'sinkTable'>, definition: QueryDefinition | undefined): boolean {
  return definition ? definition.sink.kind === 'dynamodb' : !!deployment.sinkTable;
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
  const dynamoDbSink = writesDynamoDbSink(deployment, options.definition);
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
  // The first start: a writer that read no pointer would commit unfenced; its next commit is refused now.
  if (!pointer.exists) await fenceUnfencedWriters(clients.dynamodb, deployment.checkpointTable, pointer.active.namespace, await livePartitions(clients, deployment), runId);
  return run;
}

export interface RollbackOptions {
  /** The query the retired namespace ran (the one before the cutover), when it is not deployed: `sluice replay run` drives it. */
  readonly definition?: QueryDefinition;
  readonly nowMs?: number;
}

/**
 * Makes the namespace the last cutover retired the shadow again, so that it catches up from where
 * the cutover stopped it (its own checkpoint) and a cutover makes it live: moving the pointer back
 * at once would skip, in the retired namespace, every record the new one processed since. Refused
 * (REPLAY_NO_ROLLBACK) when there is nothing to roll back to, its checkpoint or sink is gone, or the
 * stream may no longer hold the records since the cutover.
 */
export async function rollbackReplay(clients: AwsClients, deployment: DeploymentDescriptor, options: RollbackOptions = {}): Promise<ShadowRun> {
  const query = deployment.sluiceQuery;
  const nowMs = options.nowMs ?? Date.now();
  const pointer = await readNamespacePointer(clients.dynamodb, deployment.checkpointTable, query);
  if (pointer.shadow) {
    throw new ReplayError(`A replay of '${query}' is already running (run ${pointer.shadow.runId}): roll back after it is cut over or aborted.`, {
      code: 'REPLAY_ALREADY_RUNNING', hint: `\`sluice replay cutover ${query}\` or \`sluice replay abort ${query}\` first.`,
    });
  }
  const previous = pointer.retired[0];
  const refuse = (why: string): never => {
    throw new ReplayError(`Cannot roll '${query}' back${previous ? ` to ${previous.namespace}` : ''}: ${why}.`, {
      code: 'REPLAY_NO_ROLLBACK', hint: 'run a new replay of the query you want live instead (`sluice replay start --from ...`).',
    });
  };
  if (!previous) return refuse('it was never cut over (no retired namespace)');
  const sourceShards = await listStreamShards(clients.kinesis, deployment.streamName);
  const commits = await Promise.all(sourceShards.map((s) => checkpointIn(clients, deployment, previous.namespace, s.ShardId!).commitLog.getLatest()));
  if (commits.every((c) => c === undefined || c === null)) return refuse('its checkpoint is gone (no committed batch on any shard)');
  await checkRetention(clients, deployment, previous, nowMs, refuse);
  await checkSinkIntact(clients, deployment, pointer, previous, options.definition, refuse);
  const run: ShadowRun = {
    runId: `rb${nowMs.toString(36)}`, namespace: previous.namespace, fromMs: 0, startedAtMs: nowMs,
    drivenBy: options.definition ? 'cli' : 'scheduled-function', rollback: true,
    ...(previous.sinkPrefix ? { sinkPrefix: previous.sinkPrefix } : {}), ...(previous.sinkTable ? { sinkTable: previous.sinkTable } : {}),
  };
  await startShadow(clients.dynamodb, deployment.checkpointTable, query, run, pointer.active);
  return run;
}

/** The records since the cutover must still be in the stream, or the retired namespace would skip them. */
async function checkRetention(
  clients: AwsClients, deployment: DeploymentDescriptor, previous: NamespaceLocation, nowMs: number, refuse: (why: string) => never,
): Promise<void> {
  if (previous.retiredAtMs === undefined) return; // retired before the time was recorded
  const summary = await clients.kinesis.send(new DescribeStreamSummaryCommand({ StreamName: deployment.streamName }));
  const retentionMs = (summary.StreamDescriptionSummary?.RetentionPeriodHours ?? 24) * 3_600_000;
  if (nowMs - previous.retiredAtMs >= retentionMs) {
    refuse(`it was retired ${new Date(previous.retiredAtMs).toISOString()}, longer ago than the stream keeps records (${retentionMs / 3_600_000} h), so the records since are gone`);
  }
}

/** Its sink must still hold its answer: the table exists, or the prefix has objects of its own. */
async function checkSinkIntact(
  clients: AwsClients, deployment: DeploymentDescriptor, pointer: NamespacePointer, previous: NamespaceLocation, definition: QueryDefinition | undefined,
  refuse: (why: string) => never,
): Promise<void> {
  const dynamoDbSink = previous.sinkTable !== undefined || (previous.sinkPrefix === undefined
    && (pointer.active.sinkTable !== undefined || writesDynamoDbSink(deployment, definition)));
  if (dynamoDbSink) {
    const table = previous.sinkTable ?? deployment.sinkTable;
    if (!table) return refuse('the deployment names no sink table');
    try {
      await clients.dynamodb.send(new DescribeTableCommand({ TableName: table }));
    } catch (error) {
      if (error instanceof ResourceNotFoundException) return refuse(`its sink table ${table} no longer exists`);
      throw error;
    }
    return;
  }
  if (!deployment.sinkBucket) return refuse('the deployment names no sink bucket');
  const base = baseSinkPrefix(deployment, definition);
  const prefix = previous.sinkPrefix ?? base;
  // The base prefix also holds the replays' folders and the reader pointer, which are not its answer.
  const own = (await listKeys(clients.s3, deployment.sinkBucket, prefix))
    .filter((k) => !k.startsWith(`${base.replace(/\/+$/, '')}/_replay/`) && k !== readerPointerKey(base));
  if (own.length === 0) refuse(`its sink prefix s3://${deployment.sinkBucket}/${prefix} is empty`);
}

export interface ShardReplayStatus {
  readonly shardId: string;
  /** The checkpoint partition (a source shard's id; `state.<shard>` for stage 2 on an internal stream). */
  readonly partition: string;
  /** How reports name it: the shard, or `stage 2 <shard>`. */
  readonly label: string;
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

/**
 * The stream position a partition committed: its planned offsets' shard position (a stage on an
 * internal stream has one offset per hop input, all at the same position).
 */
async function committedPosition(checkpoint: DynamoDbCheckpoint): Promise<string | null> {
  const commit = await checkpoint.commitLog.getLatest();
  if (!commit) return null;
  const planned = await checkpoint.offsetLog.get(commit[0]);
  let position: string | null = null;
  for (const offset of Object.values(planned?.offsets ?? {})) {
    const seq = readAfterPosition((offset as { sequenceNumber?: string } | null)?.sequenceNumber);
    if (seq !== null && (position === null || BigInt(seq) > BigInt(position))) position = seq;
  }
  return position;
}

/**
 * The streams whose shards a replay must bring level with the live run: the source stream, then
 * each internal stream of a repartitioned query (hop k is read by stage k + 1, whose partitions are
 * `state.<shard>` for stage 2 and `stage<n>.<shard>` after: lib/query/query-stage.ts).
 */
function replayedStreams(deployment: DeploymentDescriptor): { stream: string; partitionOf: (shardId: string) => string; labelOf: (shardId: string) => string }[] {
  return [
    { stream: deployment.streamName, partitionOf: (id: string) => id, labelOf: (id: string) => id },
    ...internalStreamNames(deployment).map((stream, hop) => ({
      stream,
      partitionOf: (id: string) => (hop === 0 ? `state.${id}` : `stage${hop + 2}.${id}`),
      labelOf: (id: string) => `stage ${hop + 2} ${id}`,
    })),
  ];
}

/** Every checkpoint partition of the source stream's and the internal streams' shards. */
async function livePartitions(clients: AwsClients, deployment: DeploymentDescriptor): Promise<string[]> {
  const partitions: string[] = [];
  for (const { stream, partitionOf } of replayedStreams(deployment)) {
    for (const shard of await listStreamShards(clients.kinesis, stream)) partitions.push(partitionOf(shard.ShardId!));
  }
  return partitions;
}

/**
 * Per shard (closed parents included), of the source stream and of every internal stream: the
 * live and shadow positions, and the records between. On an internal stream the shadow reads the
 * live run's records too (and skips them): its position passing the live one's is what makes the
 * cutover gap-free there as well.
 */
export async function replayStatus(clients: AwsClients, deployment: DeploymentDescriptor, options: { cap?: number } = {}): Promise<ReplayStatus & { pointer: NamespacePointer }> {
  const query = deployment.sluiceQuery;
  const pointer = await readNamespacePointer(clients.dynamodb, deployment.checkpointTable, query);
  const base = { query, active: pointer.active.namespace, shadow: pointer.shadow, retired: pointer.retired.map((r) => r.namespace), pointer };
  if (!pointer.shadow) return { ...base, shards: [], ready: false };
  const shadow = pointer.shadow;
  const cap = options.cap ?? 10_000;
  const shards: ShardReplayStatus[] = [];
  for (const { stream, partitionOf, labelOf } of replayedStreams(deployment)) {
    const reader = new KinesisShardReader(clients.kinesis, stream);
    shards.push(...await Promise.all((await listStreamShards(clients.kinesis, stream)).map(async (s): Promise<ShardReplayStatus> => {
      const shardId = s.ShardId!;
      const partition = partitionOf(shardId);
      const liveCheckpoint = checkpointIn(clients, deployment, pointer.active.namespace, partition);
      const shadowCheckpoint = checkpointIn(clients, deployment, shadow.namespace, partition);
      const [liveSeq, liveCommit, shadowSeq, shadowCommit] = await Promise.all([
        committedPosition(liveCheckpoint), liveCheckpoint.commitLog.getLatest(), committedPosition(shadowCheckpoint), shadowCheckpoint.commitLog.getLatest(),
      ]);
      let behind = 0;
      let capped = false;
      if (liveSeq !== null && (shadowSeq === null || BigInt(shadowSeq) < BigInt(liveSeq))) {
        // What the shadow reads next, up to the live position: from its commit, or from --from.
        const position = await reader.readAfter(shardId, shadowSeq, cap, shadowSeq === null ? shadow.fromMs : undefined);
        const pending = position.records.filter((r) => BigInt(r.sequenceNumber) <= BigInt(liveSeq));
        behind = pending.length;
        capped = position.records.length >= cap && pending.length === position.records.length;
      }
      return {
        shardId, partition, label: labelOf(shardId), live: liveSeq, liveBatch: liveCommit?.[0] ?? null, shadow: shadowSeq,
        shadowBatch: shadowCommit?.[0] ?? null, behind, capped,
      };
    })));
  }
  shards.sort((a, b) => (a.partition < b.partition ? -1 : 1));
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
        .map((s) => `${s.label} ${s.behind}${s.capped ? '+' : ''} record(s) behind`).join(', ')}.`, {
        code: 'REPLAY_NOT_CAUGHT_UP', hint: `run it further (\`sluice replay run ${query} --query-module ...\`, or the scheduled function) and check \`sluice replay status ${query}\`.`,
      });
    }
    const guards: LiveCommitGuard[] = status.shards.map((s) => ({
      pk: `${pointer.active.namespace}#${s.partition}`, nextCommitSk: `${CHECKPOINT_ITEMS.commitPrefix}${padId(s.liveBatch === null ? 0 : s.liveBatch + 1)}`,
    }));
    if (await cutoverShadow(clients.dynamodb, deployment.checkpointTable, query, pointer, pointer.shadow.runId, guards, now())) {
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
  const plain = { namespace: location.namespace, ...(location.sinkTable ? { sinkTable: location.sinkTable } : {}) };
  if (location.sinkTable || !deployment.sinkBucket) return plain;
  const base = baseSinkPrefix(deployment, definition);
  const key = readerPointerKey(base);
  // Back to the base prefix (a rollback): readers that follow the pointer object must come back too.
  if (!location.sinkPrefix && (await getObjectText(clients.s3, deployment.sinkBucket, key)) === undefined) return plain;
  const prefix = location.sinkPrefix ?? base;
  const pointer: ReaderPointer = { prefix, namespace: location.namespace, cutoverAtMs: nowMs };
  await putObject(clients.s3, deployment.sinkBucket, key, JSON.stringify(pointer), 'application/json');
  return { namespace: location.namespace, readerPointer: { key, prefix } };
}

export interface AbortResult {
  readonly runId: string;
  readonly checkpointItems: number;
  readonly stateItems: number;
  readonly sinkObjects: number;
}

/**
 * Forgets the shadow first (its writers are fenced off at once), then deletes what it wrote. A
 * batch in flight may still write sink objects and state after this (its commit is refused): the
 * run is kept in the pointer's aborted list for `sweepAbortedReplays`.
 */
export async function abortReplay(clients: AwsClients, deployment: DeploymentDescriptor, options: { nowMs?: number } = {}): Promise<AbortResult> {
  const query = deployment.sluiceQuery;
  let pointer = await readNamespacePointer(clients.dynamodb, deployment.checkpointTable, query);
  const shadow = pointer.shadow;
  if (!shadow) throw new ReplayError(`No replay of '${query}' to abort.`, { code: 'REPLAY_NOT_FOUND' });
  const aborted: AbortedRun = {
    runId: shadow.runId, namespace: shadow.namespace, abortedAtMs: options.nowMs ?? Date.now(),
    ...(shadow.sinkPrefix ? { sinkPrefix: shadow.sinkPrefix } : {}), ...(shadow.sinkTable ? { sinkTable: shadow.sinkTable } : {}),
  };
  for (let attempt = 0; ; attempt++) {
    try {
      await dropShadow(clients.dynamodb, deployment.checkpointTable, query, shadow.runId, shadow.namespace, shadow.rollback ? undefined : { pointer, run: aborted });
      break;
    } catch (error) {
      // Refused: the shadow is gone, or a sweep changed the aborted list meanwhile (then again).
      const again = await readNamespacePointer(clients.dynamodb, deployment.checkpointTable, query);
      if (attempt >= 4 || again.shadow?.runId !== shadow.runId) throw error;
      pointer = again;
    }
  }
  // A rollback's shadow is a retired namespace, kept as the cutover left it: forgotten, not deleted.
  if (shadow.rollback) return { runId: shadow.runId, checkpointItems: 0, stateItems: 0, sinkObjects: 0 };
  return { runId: shadow.runId, ...(await deleteNamespace(clients, deployment, aborted)) };
}

async function deleteNamespace(
  clients: AwsClients, deployment: DeploymentDescriptor, location: NamespaceLocation,
): Promise<{ checkpointItems: number; stateItems: number; sinkObjects: number }> {
  const prefix = `${location.namespace}#`;
  const checkpointItems = await deleteByPkPrefix(clients.dynamodb, deployment.checkpointTable, prefix);
  const stateItems = deployment.stateTable === deployment.checkpointTable ? 0 : await deleteByPkPrefix(clients.dynamodb, deployment.stateTable, prefix);
  let sinkObjects = 0;
  if (location.sinkPrefix && deployment.sinkBucket) {
    const keys = await listKeys(clients.s3, deployment.sinkBucket, location.sinkPrefix);
    await deleteKeys(clients.s3, deployment.sinkBucket, keys);
    sinkObjects = keys.length;
  }
  if (deployment.sinkBucket && deployment.sinkPrefix !== undefined) {
    // Its state payloads kept as objects, under the deployment's prefix (lib/aws/dynamodb-state-store.ts).
    const stateKeys = await listKeys(clients.s3, deployment.sinkBucket, `${normalizePrefix(deployment.sinkPrefix)}${STATE_OBJECT_FOLDER}${encodeKeySegment(prefix)}`);
    await deleteKeys(clients.s3, deployment.sinkBucket, stateKeys);
    sinkObjects += stateKeys.length;
  }
  return { checkpointItems, stateItems, sinkObjects };
}

/** The longest a writer that began before an abort can still write: Lambda's maximum timeout. */
export const DEFAULT_SWEEP_AFTER_MS = 15 * 60_000;

export interface SweepResult {
  readonly swept: readonly (AbortResult & { readonly abortedAtMs: number })[];
  /** Aborted too recently: a batch in flight may still write (swept once `olderThanMs` has passed). */
  readonly pending: readonly { readonly runId: string; readonly abortedAtMs: number }[];
}

/**
 * Deletes again what aborted runs wrote (checkpoint and state items, sink objects), once no writer
 * that began before the abort can still be running, then forgets them.
 */
export async function sweepAbortedReplays(
  clients: AwsClients, deployment: DeploymentDescriptor, options: { olderThanMs?: number; nowMs?: number } = {},
): Promise<SweepResult> {
  const query = deployment.sluiceQuery;
  const olderThanMs = options.olderThanMs ?? DEFAULT_SWEEP_AFTER_MS;
  for (let attempt = 0; ; attempt++) {
    const pointer = await readNamespacePointer(clients.dynamodb, deployment.checkpointTable, query);
    const now = options.nowMs ?? Date.now();
    const due = pointer.aborted.filter((r) => now - r.abortedAtMs >= olderThanMs);
    const pending = pointer.aborted.filter((r) => !due.includes(r)).map((r) => ({ runId: r.runId, abortedAtMs: r.abortedAtMs }));
    const swept: SweepResult['swept'][number][] = [];
    for (const run of due) swept.push({ runId: run.runId, abortedAtMs: run.abortedAtMs, ...(await deleteNamespace(clients, deployment, run)) });
    if (due.length === 0 || await forgetAbortedRuns(clients.dynamodb, deployment.checkpointTable, query, pointer, due.map((r) => r.runId))) return { swept, pending };
    if (attempt >= 4) throw new ReplayError(`The aborted runs of '${query}' kept changing during the sweep.`, { code: 'REPLAY_SWEEP_RACE', retryable: true });
  }
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
