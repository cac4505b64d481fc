/**
 * Skipped batches: when a Kinesis event source mapping gives up on a batch (retries exhausted,
 * the maximum record age, a bisected half that keeps failing), Lambda moves the shard past it and
 * sends only its description (shard, first and last sequence number) to the on-failure
 * destination. The records were never committed. They are recorded here, in the checkpoint table,
 * so that
 *
 *   - the reshard guard treats them as done: a closed parent whose last uncommitted records were
 *     skipped is finished, and its children run (lib/aws/reshard-guard.ts);
 *   - `sluice status` lists the ranges still waiting, and `sluice redrive --skipped` re-reads them
 *     from the stream while it retains them (lib/aws/skipped-batch-redrive.ts).
 *
 * Items (checkpoint table): pk = `${queryName}#skipped`, sk = `<checkpoint partition>#<first
 * sequence number>`. Recording is idempotent: the on-failure queue delivers at least once, and a
 * message recorded twice finds its item and changes nothing.
 */
import { ConditionalCheckFailedException, GetItemCommand, UpdateItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SKIPPED_RANGES_SUFFIX } from '../runtime/runtime-config.js';
import { putItemOnce, queryAll, type Item } from './dynamodb-cost.js';
import type { ExpiredPlannedRecords } from '../query/partition-backends.js';
import type { ExpiredRecords } from '../sources/kinesis-shard-source.js';
import type { DynamoDbCommitSideWrite } from './dynamodb-checkpoint.js';
import type { LostSenderRecords } from './expired-internal-records.js';

/** Lambda's description of a batch it gave up on (`KinesisBatchInfo` of the on-failure record). */
export interface SkippedBatchInfo {
  readonly shardId: string;
  readonly streamArn: string;
  readonly startSequenceNumber: string;
  readonly endSequenceNumber: string;
  readonly batchSize: number;
  /** Why Lambda gave up: its `condition` (RetryAttemptsExhausted, RecordAgeExceeded...) and, when known, the error. */
  readonly reason: string;
  /** When Lambda gave up (the record's timestamp), ms. */
  readonly skippedAtMs: number;
  readonly approximateArrivalOfFirstRecordMs?: number;
}

export type SkippedRangeState = 'waiting' | 'redriven';

export interface SkippedRange {
  /** The item's sort key (default `<partition>#<first>`; a planned batch's expired records have their own). */
  readonly sortKey?: string;
  /** The checkpoint partition of the stage that skipped it (`<shard>`, or `state.<shard>` for stage 2). */
  readonly partitionId: string;
  readonly shardId: string;
  readonly streamName: string;
  readonly firstSequenceNumber: string;
  readonly lastSequenceNumber: string;
  readonly batchSize: number;
  readonly reason: string;
  readonly skippedAtMs: number;
  readonly recordedAtMs: number;
  readonly state: SkippedRangeState;
  /** What the re-drive did (when redriven). */
  readonly outcome?: SkippedRangeOutcome;
  /** An internal stream's expired planned records: the senders' batches (and records) whose rows they carried. */
  readonly lostSources?: readonly LostSenderRecords[];
  /** A person saw the range's loss to retention (`sluice redrive --acknowledge`): status lists it, healthy. */
  readonly acknowledgement?: LossAcknowledgement;
}

export interface LossAcknowledgement {
  readonly by: string;
  readonly atMs: number;
  readonly reason: string;
}

/** A range that lost records to retention before its re-drive read them. */
export const isLostRange = (r: SkippedRange): boolean => r.state === 'redriven' && (r.outcome?.expired ?? 0) > 0;

export interface SkippedRangeOutcome {
  readonly redriven: number;
  readonly deadLettered: number;
  /** Committed by a batch after all (e.g. a response lost on every retry of a committed batch). */
  readonly alreadyCommitted: number;
  /** No longer in the stream (retention): lost, and said so. */
  readonly expired: number;
  /**
   * With `expired`, the sequence numbers they had: retention trims a shard from its oldest record,
   * so the expired ones are the range's first, up to the first record still held (its number
   * less one) or to the range's last.
   */
  readonly expiredRange?: { readonly first: string; readonly last: string };
  /** Records that were themselves re-driven once and were skipped again: not re-driven in a loop. */
  readonly skippedAgain: number;
  readonly atMs: number;
}

/**
 * The on-failure record Lambda sends for a Kinesis batch (the SQS message body): its
 * `requestContext.condition`, `responseContext.functionError`, `timestamp` and `KinesisBatchInfo`.
 */
export function parseOnFailureRecord(body: string): SkippedBatchInfo {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new Error(`not an on-failure record (not JSON): ${body.slice(0, 80)}`);
  }
  const record = parsed as {
    requestContext?: { condition?: string; approximateInvokeCount?: number };
    responseContext?: { functionError?: string; statusCode?: number };
    timestamp?: string;
    errorMessage?: string;
    KinesisBatchInfo?: {
      shardId?: string; streamArn?: string; startSequenceNumber?: string; endSequenceNumber?: string;
      batchSize?: number; approximateArrivalOfFirstRecord?: string;
    };
  };
  const info = record.KinesisBatchInfo;
  const seq = /^\d+$/;
  if (!info?.shardId || !info.streamArn || !seq.test(info.startSequenceNumber ?? '') || !seq.test(info.endSequenceNumber ?? '')) {
    throw new Error(`not a Kinesis on-failure record (no KinesisBatchInfo with shard, stream and sequence range): ${body.slice(0, 120)}`);
  }
  const condition = record.requestContext?.condition ?? 'unknown condition';
  const functionError = record.responseContext?.functionError;
  const skippedAtMs = record.timestamp ? Date.parse(record.timestamp) : Number.NaN;
  const firstArrival = info.approximateArrivalOfFirstRecord ? Date.parse(info.approximateArrivalOfFirstRecord) : Number.NaN;
  return {
    shardId: info.shardId,
    streamArn: info.streamArn,
    startSequenceNumber: info.startSequenceNumber!,
    endSequenceNumber: info.endSequenceNumber!,
    batchSize: info.batchSize ?? 0,
    reason: [condition, functionError ? `function error ${functionError}` : null, record.errorMessage ?? null].filter(Boolean).join(': '),
    skippedAtMs: Number.isNaN(skippedAtMs) ? Date.now() : skippedAtMs,
    ...(Number.isNaN(firstArrival) ? {} : { approximateArrivalOfFirstRecordMs: firstArrival }),
  };
}

export interface SkippedBatchStoreOptions {
  readonly client: DynamoDBClient;
  readonly checkpointTable: string;
  readonly queryName: string;
}

export class SkippedBatchStore {
  constructor(private readonly options: SkippedBatchStoreOptions) {}

  private get pk(): string {
    return `${this.options.queryName}${SKIPPED_RANGES_SUFFIX}`;
  }

  /** Records a skipped range once; false when it was recorded before (a redelivered message). */
  async record(partitionId: string, streamName: string, info: SkippedBatchInfo, nowMs = Date.now()): Promise<boolean> {
    const item: Item = {
      pk: { S: this.pk },
      sk: { S: `${partitionId}#${info.startSequenceNumber}` },
      partitionId: { S: partitionId },
      shardId: { S: info.shardId },
      streamName: { S: streamName },
      first: { S: info.startSequenceNumber },
      last: { S: info.endSequenceNumber },
      batchSize: { N: String(info.batchSize) },
      reason: { S: info.reason },
      skippedAtMs: { N: String(info.skippedAtMs) },
      recordedAtMs: { N: String(nowMs) },
      state: { S: 'waiting' },
    };
    return this.putOnce(item);
  }

  /**
   * Records the planned records a batch lost to retention before it committed (the engine ran it
   * over the rest): a lost range from the start, unhealthy in `sluice status` until acknowledged.
   * Its own item (a skipped range of the same records may exist), one per (partition, the batch's
   * first record). The record only grows: a conditional update widens it when this attempt lost
   * more (the trim advanced), and is refused once the batch committed (`expiredCommitWrite`). Returns
   * what is recorded: an attempt that lost fewer than recorded leaves out as many.
   */
  async recordExpiredPlanned(partitionId: string, streamName: string, loss: ExpiredPlannedRecords, nowMs = Date.now()): Promise<ExpiredRecords> {
    const outcome: SkippedRangeOutcome = {
      redriven: 0, deadLettered: 0, alreadyCommitted: 0, expired: loss.count, skippedAgain: 0,
      expiredRange: { first: loss.firstSequenceNumber, last: loss.lastSequenceNumber }, atMs: nowMs,
    };
    const key = this.expiredPlannedKey(partitionId, loss.firstSequenceNumber);
    try {
      await this.options.client.send(new UpdateItemCommand({
        TableName: this.options.checkpointTable,
        Key: key,
        UpdateExpression: 'SET partitionId = :partition, shardId = :shard, streamName = :stream, #first = :first, #last = :last, batchSize = :count, '
          + 'reason = :reason, skippedAtMs = if_not_exists(skippedAtMs, :now), recordedAtMs = :now, #state = :redriven, outcome = :outcome '
          + (loss.lostSources ? ', lostSources = :lost ' : '')
          // A wider loss needs a new look: an acknowledgement of the narrower one does not cover it.
          + 'REMOVE acknowledgement',
        // Never while the batch's records are kept (lib/aws/kept-records.ts): a run reads them instead.
        ConditionExpression: 'attribute_not_exists(keptBatch) AND (attribute_not_exists(pk) OR (batchSize < :count AND attribute_not_exists(committedBatch)))',
        ExpressionAttributeNames: { '#first': 'first', '#last': 'last', '#state': 'state' },
        ExpressionAttributeValues: {
          ':partition': { S: partitionId }, ':shard': { S: loss.shardId }, ':stream': { S: streamName },
          ':first': { S: loss.firstSequenceNumber }, ':last': { S: loss.lastSequenceNumber }, ':count': { N: String(loss.count) },
          ':reason': { S: `${EXPIRED_PLANNED_REASON} (batch ${loss.batchId}): it ran over its ${loss.count === 0 ? 'records' : 'remaining records'}; ${EXPIRED_PLANNED_CAVEAT}` },
          ':now': { N: String(nowMs) }, ':redriven': { S: 'redriven' }, ':outcome': { S: JSON.stringify(outcome) },
          ...(loss.lostSources ? { ':lost': { S: JSON.stringify(loss.lostSources) } } : {}),
        },
      }));
      return { firstSequenceNumber: loss.firstSequenceNumber, lastSequenceNumber: loss.lastSequenceNumber, count: loss.count };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
    const found = (await this.options.client.send(new GetItemCommand({ TableName: this.options.checkpointTable, Key: key, ConsistentRead: true }))).Item;
    if (found?.keptBatch && !found.state) {
      throw new Error(`batch ${loss.batchId} of ${partitionId}: its planned records are kept (since this run looked), so no loss is recorded; its retry runs from the kept copy`);
    }
    const recorded = found ? { firstSequenceNumber: found.first!.S!, lastSequenceNumber: found.last!.S!, count: Number(found.batchSize!.N!) } : null;
    if (!recorded || recorded.count < loss.count) {
      throw new Error(`batch ${loss.batchId} of ${partitionId} lost ${loss.count} planned record(s) to retention, and its loss record `
        + `(${recorded?.count ?? 'none'}) can no longer grow: the batch was committed by another attempt`);
    }
    return recorded;
  }

  /**
   * The commit write of a batch that ran without `loss`: it holds only while the recorded loss is
   * exactly that one, and marks it committed, so no later attempt can widen it.
   */
  expiredCommitWrite(partitionId: string, loss: ExpiredPlannedRecords): DynamoDbCommitSideWrite {
    return {
      description: `the loss record of batch ${loss.batchId}'s ${loss.count} expired record(s)`, optional: false,
      item: {
        Update: {
          TableName: this.options.checkpointTable, Key: this.expiredPlannedKey(partitionId, loss.firstSequenceNumber),
          UpdateExpression: 'SET committedBatch = :b',
          ConditionExpression: 'batchSize = :count AND #last = :last AND (attribute_not_exists(committedBatch) OR committedBatch = :b)',
          ExpressionAttributeNames: { '#last': 'last' },
          ExpressionAttributeValues: { ':b': { N: String(loss.batchId) }, ':count': { N: String(loss.count) }, ':last': { S: loss.lastSequenceNumber } },
        },
      },
    };
  }

  private expiredPlannedKey(partitionId: string, firstSequenceNumber: string): Item {
    return expiredPlannedKey(this.options.queryName, partitionId, firstSequenceNumber);
  }

  /** Puts an item that must not exist yet: false when it does (recorded before). */
  private putOnce(item: Item): Promise<boolean> {
    return putItemOnce(this.options.client, this.options.checkpointTable, item);
  }

  /** Every recorded range of the query, or of one partition; in sequence order per partition. */
  async list(partitionId?: string): Promise<SkippedRange[]> {
    const items = await queryAll(this.options.client, {
      TableName: this.options.checkpointTable,
      ConsistentRead: true,
      ...(partitionId === undefined
        ? { KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: this.pk } } }
        : { KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)', ExpressionAttributeValues: { ':pk': { S: this.pk }, ':p': { S: `${partitionId}#` } } }),
    }, undefined);
    // An item that only claims a batch's kept records (lib/aws/kept-records.ts) is no range.
    return items.filter((i) => i.state !== undefined).map(rangeOf).sort((a, b) => a.partitionId.localeCompare(b.partitionId) || compareSequence(a.firstSequenceNumber, b.firstSequenceNumber));
  }

  /** Marks a waiting range redriven with what happened; false when another run did it first. */
  async markRedriven(range: SkippedRange, outcome: Omit<SkippedRangeOutcome, 'atMs'>, nowMs = Date.now()): Promise<boolean> {
    try {
      await this.options.client.send(new UpdateItemCommand({
        TableName: this.options.checkpointTable,
        Key: { pk: { S: this.pk }, sk: { S: sortKeyOf(range) } },
        UpdateExpression: 'SET #state = :redriven, outcome = :outcome',
        ConditionExpression: '#state = :waiting',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: { ':redriven': { S: 'redriven' }, ':waiting': { S: 'waiting' }, ':outcome': { S: JSON.stringify({ ...outcome, atMs: nowMs }) } },
      }));
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  /** Records who acknowledged a lost range, when and why; false when it was acknowledged before. */
  async acknowledge(range: SkippedRange, acknowledgement: LossAcknowledgement): Promise<boolean> {
    try {
      await this.options.client.send(new UpdateItemCommand({
        TableName: this.options.checkpointTable,
        Key: { pk: { S: this.pk }, sk: { S: sortKeyOf(range) } },
        UpdateExpression: 'SET acknowledgement = :ack',
        ConditionExpression: '#state = :redriven AND attribute_not_exists(acknowledgement)',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: { ':redriven': { S: 'redriven' }, ':ack': { S: JSON.stringify(acknowledgement) } },
      }));
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }
}

const EXPIRED_PLANNED_SUFFIX = '#expired-planned';
/**
 * The loss record's reason. A batch at risk keeps its records before any sink write
 * (lib/query/kept-records.ts), so a loss means no attempt kept them: the hole that leaves is an
 * earlier attempt not at risk that wrote sink rows and was killed, with no retry before the
 * records expired; those rows (of records this run lacked) may stay in the sink.
 */
export const EXPIRED_PLANNED_REASON = 'planned records expired from the stream before their batch committed';
export const EXPIRED_PLANNED_CAVEAT = 'no attempt kept them; rows an earlier attempt wrote from them before it was killed may remain in the sink';

/** The item of a planned batch's loss to retention, or of the claim on its kept records: one item, so the two exclude each other. */
export function expiredPlannedKey(queryName: string, partitionId: string, firstSequenceNumber: string): Item {
  return { pk: { S: `${queryName}${SKIPPED_RANGES_SUFFIX}` }, sk: { S: `${partitionId}#${firstSequenceNumber}${EXPIRED_PLANNED_SUFFIX}` } };
}

/** A lost range the engine recorded for a planned batch (not one the event source mapping skipped). */
export const isExpiredPlanned = (r: Pick<SkippedRange, 'sortKey'>): boolean => r.sortKey?.endsWith(EXPIRED_PLANNED_SUFFIX) ?? false;

const sortKeyOf = (range: SkippedRange): string => range.sortKey ?? `${range.partitionId}#${range.firstSequenceNumber}`;

function rangeOf(item: Item): SkippedRange {
  return {
    sortKey: item.sk!.S!,
    partitionId: item.partitionId!.S!,
    shardId: item.shardId!.S!,
    streamName: item.streamName!.S!,
    firstSequenceNumber: item.first!.S!,
    lastSequenceNumber: item.last!.S!,
    batchSize: Number(item.batchSize?.N ?? 0),
    reason: item.reason?.S ?? '',
    skippedAtMs: Number(item.skippedAtMs?.N ?? 0),
    recordedAtMs: Number(item.recordedAtMs?.N ?? 0),
    state: (item.state?.S ?? 'waiting') as SkippedRangeState,
    ...(item.outcome?.S ? { outcome: JSON.parse(item.outcome.S) as SkippedRangeOutcome } : {}),
    ...(item.lostSources?.S ? { lostSources: JSON.parse(item.lostSources.S) as LostSenderRecords[] } : {}),
    ...(item.acknowledgement?.S ? { acknowledgement: JSON.parse(item.acknowledgement.S) as LossAcknowledgement } : {}),
  };
}

export function compareSequence(a: string, b: string): number {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The recorded range holding `sequenceNumber`, if any. */
export function skippedRangeHolding(ranges: readonly Pick<SkippedRange, 'firstSequenceNumber' | 'lastSequenceNumber'>[], sequenceNumber: string)
  : Pick<SkippedRange, 'firstSequenceNumber' | 'lastSequenceNumber'> | undefined {
  const seq = BigInt(sequenceNumber);
  return ranges.find((r) => BigInt(r.firstSequenceNumber) <= seq && seq <= BigInt(r.lastSequenceNumber));
}

/** The reshard guard's view of a stage's skipped ranges: per shard, from the checkpoint table. */
export function skippedRangesOf(client: DynamoDBClient, checkpointTable: string, queryName: string, stage: { checkpointPartition(shardId: string): string })
  : (shardId: string) => Promise<SkippedRange[]> {
  const store = new SkippedBatchStore({ client, checkpointTable, queryName });
  return (shardId) => store.list(stage.checkpointPartition(shardId));
}
