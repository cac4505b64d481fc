/**
 * Read-only views of a deployed query for the `sluice` CLI: per state partition (a shard of a
 * stage) its last commit, watermark row, recent progress (the ring the commit writes), lag behind
 * its stream; the dead letters in S3; the batches the event source mappings gave up (SQS); and the
 * operator state at the committed version. Nothing here writes.
 *
 * Partitions are found from the watermark rows (every partition that committed a batch) and the
 * streams' shards (those that have not yet): stage 1 reads the source stream, stage 2 (a
 * repartition stage's `state.<shard>` partitions) the internal stream.
 */
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { OffsetSeq, QueryMetadata } from '../checkpoint/checkpoint.js';
import type { DeploymentDescriptor } from '../runtime/runtime-config.js';
import type { StreamingQueryProgress } from '../runtime/progress.js';
import type { StateStoreId } from '../state/state-store.js';
import { asKinesisOffset } from '../sources/kinesis-shard-source.js';
import { readAfterPosition } from '../sources/repartition-shard-source.js';
import { decodeKey as decodeStateKey } from '../state/state-routing.js';
import type { AwsClients } from './clients.js';
import { DynamoDbCheckpoint } from './dynamodb-checkpoint.js';
import { DynamoDbWatermarkCoordinator, type PartitionWatermarkRow } from './dynamodb-watermarks.js';
import { KinesisShardReader, listStreamShards } from './kinesis-shard-reader.js';
import { encodeKeySegment, listKeys, normalizePrefix } from './s3-util.js';
import { EXPIRED_PLANNED_CAVEAT, isExpiredPlanned, isLostRange, SkippedBatchStore, type SkippedRange } from './skipped-batches.js';
import { describeLostSenderRecords } from './expired-internal-records.js';
import { RefusedShardStore, type RefusedShard } from './refused-shards.js';

/** Stage-2 partitions of a repartition stage are named `state.<internal shard id>`. */
const STAGE2_PREFIX = 'state.';

export interface PartitionStatus {
  readonly partitionId: string;
  /** 1: a source stream's shard; 2, 3…: the stage reading internal stream 1, 2… */
  readonly stage: number;
  /** With several source streams, the source whose stream this shard is of. */
  readonly source?: string;
  readonly shardId: string;
  readonly lastCommittedBatch: number | null;
  /** A batch planned and not committed (running now, or failed and to be retried). */
  readonly pendingBatch: number | null;
  readonly watermarkMs: number | null;
  readonly idle: boolean;
  readonly closed: boolean;
  /** Records after the committed position (up to the cap) and how old the oldest of them is. */
  readonly lag: { readonly records: number; readonly capped: boolean; readonly ms: number } | null;
  readonly lastProgress: StreamingQueryProgress | null;
  readonly deadLetters: number;
}

export interface QueryStatus {
  readonly query: string;
  readonly partitions: readonly PartitionStatus[];
  readonly deadLetters: number;
  /** Messages in the on-failure queue, given up and not yet recorded by the on-failure function (null: no queue known). */
  readonly skippedBatches: number | null;
  /** Skipped ranges recorded in the checkpoint table and not re-driven yet (`sluice redrive --skipped`). */
  readonly skippedRanges: readonly SkippedRange[];
  /**
   * Skipped ranges whose records expired from the stream before the re-drive read them: lost to
   * retention, which Sluice cannot undo, and reported (unhealthy) so that the loss is never silent,
   * until a person acknowledges it (`sluice redrive --acknowledge`): then it is listed here with its
   * `acknowledgement` (who, when, why) and no longer a problem.
   */
  readonly lostRanges: readonly SkippedRange[];
  /**
   * Shards the reshard guard refuses (RESHARD_WITH_STATE, RESHARD_STAGE_CHANGED): nothing of them
   * runs, and the event source mapping retries them until `maxRecordAge`. Each is a problem.
   */
  readonly refusedShards: readonly RefusedShard[];
  readonly healthy: boolean;
  readonly problems: readonly string[];
}

export interface InspectOptions {
  readonly sqs?: SQSClient;
  /** A partition further behind than this is unhealthy (default 10 minutes, the iterator-age alarm's). */
  readonly maxLagMs?: number;
  /** Records counted behind the committed position at most (default 10,000). */
  readonly lagCap?: number;
  readonly nowMs?: number;
}

export function checkpointOf(clients: AwsClients, deployment: DeploymentDescriptor, partitionId: string): DynamoDbCheckpoint {
  return new DynamoDbCheckpoint({
    client: clients.dynamodb, checkpointTable: deployment.checkpointTable, stateTable: deployment.stateTable,
    queryName: deployment.activeNamespace ?? deployment.sluiceQuery, partitionId, stateCache: null,
    // State payloads kept as objects, under the deployment's sink prefix (lib/aws/aws-backends.ts).
    ...(deployment.sinkBucket ? { stateObjects: { client: clients.s3, bucket: deployment.sinkBucket, prefix: deployment.sinkPrefix ?? '' } } : {}),
  });
}

/** Every partition of the query: committed ones (watermark rows) and the streams' shards. */
export async function listPartitions(clients: AwsClients, deployment: DeploymentDescriptor): Promise<{ rows: PartitionWatermarkRow[]; ids: string[] }> {
  const rows = await new DynamoDbWatermarkCoordinator({
    client: clients.dynamodb, checkpointTable: deployment.checkpointTable, queryName: deployment.activeNamespace ?? deployment.sluiceQuery, idleTimeoutMs: 0,
  }).list();
  const ids = new Set(rows.map((r) => r.partitionId));
  // Each stream's shards under the partition ids their stage runs them as.
  const sources = deployment.sourceStreams ? Object.entries(deployment.sourceStreams).map(([name, stream]) => [`${name}.`, stream] as const) : [['', deployment.streamName] as const];
  const internal = internalStreamsOf(deployment).map((stream, k) => [k === 0 ? STAGE2_PREFIX : `stage${k + 2}.`, stream] as const);
  for (const [prefix, stream] of [...sources, ...internal]) {
    for (const shard of await listStreamShards(clients.kinesis, stream)) ids.add(`${prefix}${shard.ShardId!}`);
  }
  return { rows, ids: [...ids].sort() };
}

function internalStreamsOf(deployment: DeploymentDescriptor): readonly string[] {
  return deployment.repartitionStreamNames ?? (deployment.repartitionStreamName ? [deployment.repartitionStreamName] : []);
}

/**
 * Which stage and stream a checkpoint partition belongs to: `<shard>` (the one source stream),
 * `<source>.<shard>` (one of several), `state.<shard>` (stage 2), `stage<N>.<shard>` (stage N).
 */
export function partitionStreamOf(deployment: DeploymentDescriptor, partitionId: string): { stage: number; shardId: string; streamName?: string; source?: string } {
  const internal = internalStreamsOf(deployment);
  if (partitionId.startsWith(STAGE2_PREFIX)) return { stage: 2, shardId: partitionId.slice(STAGE2_PREFIX.length), ...(internal[0] ? { streamName: internal[0] } : {}) };
  const later = /^stage(\d+)\.(.+)$/.exec(partitionId);
  if (later) {
    const stage = Number(later[1]);
    return { stage, shardId: later[2]!, ...(internal[stage - 2] ? { streamName: internal[stage - 2] } : {}) };
  }
  for (const [source, streamName] of Object.entries(deployment.sourceStreams ?? {})) {
    if (partitionId.startsWith(`${source}.`)) return { stage: 1, shardId: partitionId.slice(source.length + 1), streamName, source };
  }
  return { stage: 1, shardId: partitionId, streamName: deployment.streamName };
}

export async function inspectQuery(clients: AwsClients, deployment: DeploymentDescriptor, options: InspectOptions = {}): Promise<QueryStatus> {
  const nowMs = options.nowMs ?? Date.now();
  const maxLagMs = options.maxLagMs ?? 600_000;
  const { rows, ids } = await listPartitions(clients, deployment);
  const deadLetterKeys = await listKeys(clients.s3, deployment.deadLetterBucket,
    `${normalizePrefix(deployment.deadLetterPrefix ?? 'dead-letter/')}${encodeKeySegment(deployment.sluiceQuery)}/`);
  const deadLettersByShard = new Map<string, number>();
  for (const key of deadLetterKeys) {
    const shard = decodeURIComponent(key.split('/').at(-2) ?? '');
    deadLettersByShard.set(shard, (deadLettersByShard.get(shard) ?? 0) + 1);
  }
  const partitions = await Promise.all(ids.map(async (partitionId): Promise<PartitionStatus> => {
    const { stage, shardId, streamName, source } = partitionStreamOf(deployment, partitionId);
    const checkpoint = checkpointOf(clients, deployment, partitionId);
    const [commit, planned, progress] = await Promise.all([
      checkpoint.commitLog.getLatest(), checkpoint.offsetLog.getLatest(), checkpoint.readRecentProgress<StreamingQueryProgress>(),
    ]);
    const committedOffsets = commit ? (await checkpoint.offsetLog.get(commit[0])) : undefined;
    const row = rows.find((r) => r.partitionId === partitionId);
    const lag = streamName && !row?.closed
      ? await lagOf(new KinesisShardReader(clients.kinesis, streamName), shardId, committedSequenceNumber(committedOffsets), options.lagCap ?? 10_000, nowMs)
      : null;
    return {
      partitionId, stage, shardId, ...(source ? { source } : {}),
      lastCommittedBatch: commit ? commit[0] : null,
      pendingBatch: planned && (!commit || planned[0] > commit[0]) ? planned[0] : null,
      watermarkMs: commit ? commit[1].nextBatchWatermarkMs : null,
      idle: row?.idle ?? false,
      closed: row?.closed ?? false,
      lag,
      lastProgress: progress.at(-1) ?? null,
      deadLetters: stage === 1 ? deadLettersByShard.get(shardId) ?? 0 : 0,
    };
  }));
  const skippedBatches = deployment.onFailureQueueUrl && options.sqs ? await queueDepth(options.sqs, deployment.onFailureQueueUrl) : null;
  const ranges = await new SkippedBatchStore({
    client: clients.dynamodb, checkpointTable: deployment.checkpointTable, queryName: deployment.sluiceQuery,
  }).list();
  const skippedRanges = ranges.filter((r) => r.state === 'waiting');
  const lostRanges = ranges.filter(isLostRange);
  const problems: string[] = [];
  if (skippedBatches) problems.push(`${skippedBatches} skipped batch(es) wait in the on-failure queue: their records were not processed`);
  if (skippedRanges.length > 0) {
    const records = skippedRanges.reduce((n, r) => n + r.batchSize, 0);
    problems.push(`${skippedRanges.length} skipped range(s) (${records} record(s)) were given up by the event source mapping and wait for \`sluice redrive --skipped\` `
      + 'while the stream retains them');
  }
  for (const r of lostRanges.filter((l) => !l.acknowledgement)) {
    const lost = r.outcome!.expiredRange;
    const what = isExpiredPlanned(r) ? 'planned batch records' : 'the skipped range';
    const before = isExpiredPlanned(r) ? `their batch committed (it ran over the rest; ${EXPIRED_PLANNED_CAVEAT})` : 'the re-drive read them';
    problems.push(`${r.outcome!.expired} record(s) of ${what} ${r.partitionId} ${r.firstSequenceNumber}..${r.lastSequenceNumber} expired from `
      + `${r.streamName} before ${before}: lost${lost ? ` (sequence numbers ${lost.first}..${lost.last})` : ''}; `
      + (r.lostSources?.length ? `the rows they carried: ${r.lostSources.map(describeLostSenderRecords).join('; ')}; ` : '')
      + `once seen: \`sluice redrive ${deployment.sluiceQuery} --acknowledge ${r.partitionId}#${r.firstSequenceNumber} --reason "..."\``);
  }
  const refusedShards = await new RefusedShardStore({
    client: clients.dynamodb, checkpointTable: deployment.checkpointTable, namespace: deployment.activeNamespace ?? deployment.sluiceQuery,
  }).list();
  for (const r of refusedShards) problems.push(describeRefusal(r, deployment.sluiceQuery));
  for (const p of partitions) {
    if (p.lag && p.lag.ms > maxLagMs) problems.push(`${label(p)} is ${Math.round(p.lag.ms / 1000)} s behind its stream (over ${Math.round(maxLagMs / 1000)} s)`);
  }
  return { query: deployment.sluiceQuery, partitions, deadLetters: deadLetterKeys.length, skippedBatches, skippedRanges, lostRanges, refusedShards, healthy: problems.length === 0, problems };
}

/**
 * A refused shard's problem line: which, why, since when, the fix, and what becomes of its
 * records. They are not committed, so they stay in the stream until its retention ends (the
 * mapping gives up on them at `maxRecordAge` and records them as skipped ranges); a query deployed
 * under a new name starts at the trim horizon (the construct's default `startingPosition`), so it
 * reads them while they are retained.
 */
export function describeRefusal(r: RefusedShard, queryName: string): string {
  return `shard ${r.partitionId} is refused (${r.code}) since ${new Date(r.firstSeenMs).toISOString()} `
    + `(last seen ${new Date(r.lastSeenMs).toISOString()}): nothing of it runs. ${r.message} `
    + `Fix: ${r.hint || 'see the message'} Its records are not lost yet: they stay in the stream until its retention ends `
    + `(the event source mapping retries them until maxRecordAge, then records them as skipped ranges of ${queryName}); `
    + 'a query deployed under a new name with the default startingPosition (TRIM_HORIZON) reads them, with every other record still retained.';
}

export const label = (p: Pick<PartitionStatus, 'stage' | 'shardId' | 'source'>): string =>
  (p.stage > 1 ? `stage ${p.stage} ${p.shardId}` : p.source ? `${p.source} ${p.shardId}` : p.shardId);

function committedSequenceNumber(offsets: OffsetSeq | undefined): string | null {
  if (!offsets) return null;
  const first = Object.values(offsets.offsets).find((o) => o !== null) ?? null;
  // A seeded child's position before its first record reads from the start.
  return readAfterPosition(asKinesisOffset(first)?.sequenceNumber);
}

async function lagOf(reader: KinesisShardReader, shardId: string, after: string | null, cap: number, nowMs: number): Promise<PartitionStatus['lag']> {
  const position = await reader.readAfter(shardId, after, cap);
  const oldest = position.records[0];
  return {
    records: position.records.length,
    capped: position.records.length >= cap,
    // The oldest unprocessed record's age; caught up means 0.
    ms: oldest ? Math.max(0, nowMs - oldest.approximateArrivalTimestampMs) : 0,
  };
}

async function queueDepth(sqs: SQSClient, queueUrl: string): Promise<number> {
  const out = await sqs.send(new GetQueueAttributesCommand({
    QueueUrl: queueUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
  }));
  return Number(out.Attributes?.ApproximateNumberOfMessages ?? 0) + Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0);
}

/** The state stores of a stateful operator, by its kind (as the fingerprint names it). */
export function stateStoresOf(operatorId: number, kind: string): StateStoreId[] {
  if (/join/i.test(kind)) {
    return ['left', 'right'].flatMap((side) => [
      { operatorId, storeName: `${side}-keyToNumValues` }, { operatorId, storeName: `${side}-keyWithIndexToValue` },
    ]);
  }
  return [{ operatorId, storeName: 'default' }];
}

export interface StateRow {
  readonly partitionId: string;
  readonly operatorId: number;
  readonly storeName: string;
  readonly key: unknown;
  readonly value: unknown;
}

/**
 * The operator state of every partition at its committed version (batch N's commit means state
 * version N+1), read with the state store's own loader (snapshot plus deltas), never written.
 */
export async function* readCommittedState(
  clients: AwsClients, deployment: DeploymentDescriptor, filter: { operatorId?: number } = {},
): AsyncGenerator<StateRow> {
  const { ids } = await listPartitions(clients, deployment);
  for (const partitionId of ids) {
    const checkpoint = checkpointOf(clients, deployment, partitionId);
    const [metadata, commit] = await Promise.all([checkpoint.readQueryMetadata(), checkpoint.commitLog.getLatest()]);
    if (!metadata || !commit) continue;
    for (const op of (metadata as QueryMetadata).fingerprint.statefulOperators) {
      if (filter.operatorId !== undefined && op.operatorId !== filter.operatorId) continue;
      for (const id of stateStoresOf(op.operatorId, op.kind)) {
        const store = await checkpoint.stateStore.open(id, commit[0] + 1);
        for (const [key, value] of store.entries()) {
          yield { partitionId, operatorId: id.operatorId, storeName: id.storeName, ...asRow(key, value) };
        }
        store.abort();
      }
    }
  }
}

/**
 * An entry as a row: aggregations and session windows keep `[keyValues, ...buffers]` as the value
 * (the key values come from there, a window as `{ start, end }` in microseconds); other stores
 * are read back from their encoded key (execution/values.ts encodeKey), else kept as stored.
 */
function asRow(key: string, value: unknown): { key: unknown; value: unknown } {
  if (Array.isArray(value) && Array.isArray(value[0])) return { key: value[0], value: value.slice(1) };
  return { key: decodeStateKey(key) ?? key, value };
}
