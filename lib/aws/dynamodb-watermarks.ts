/**
 * DynamoDbWatermarkCoordinator: every state partition's own watermark as a row of the checkpoint
 * table, so a batch can run with the minimum over the live partitions (combineWatermarks).
 *
 *   pk = `${queryName}#watermarks`, sk = partitionId
 *   { watermarkMs, batchId, lastDataAtMs, caughtUpAtMs?, idle, closed? }
 *
 * - publish (after a partition committed a batch) is an UpdateItem conditioned on the row's
 *   batchId not being greater than the one published: a stale or reordered publish never moves a
 *   partition back. A batch with data makes the partition live (idle = false) and stamps
 *   lastDataAtMs; a batch without data leaves both as they are.
 * - confirmCaughtUp (the scheduled handler, after GetRecords showed the shard has nothing more)
 *   makes the partition idle only if it has had no data for idleTimeoutMs; the condition is
 *   evaluated by DynamoDB against the row itself, so a publish with data racing it wins.
 * - markClosed (a reshard closed the shard) takes the partition out of the minimum for good.
 * - combine is one strongly consistent Query over the rows and the shared min rule; `prefetch`
 *   starts that Query beside the checkpoint's recovery reads, and the invocation's later combines
 *   reuse its rows (with this partition's own publications applied).
 * - publishWithCommit is publish as an Update in the batch's commit transaction (same table).
 */
import {
  ConditionalCheckFailedException,
  UpdateItemCommand,
  type DynamoDBClient,
  type UpdateItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { CheckpointError } from '../errors/sluice-error.js';
import type { DynamoDbCommitSideWrite } from './dynamodb-checkpoint.js';
import type { CostMeter } from '../core/cost-meter.js';
import { combineWatermarks, type PartitionWatermark, type WatermarkCoordinator } from '../runtime/watermark-coordinator.js';
import { meterUnits, queryAll, writeUnitsFor } from './dynamodb-cost.js';
import { CHECKPOINT_ITEMS } from './tables.js';
import { isRedriveProgressKey } from '../sources/repartition-records.js';

export interface DynamoDbWatermarkCoordinatorOptions {
  readonly client: DynamoDBClient;
  readonly checkpointTable: string;
  readonly queryName: string;
  /** How long a partition must have had no data before confirmCaughtUp makes it idle. */
  readonly idleTimeoutMs: number;
  readonly meter?: CostMeter;
  readonly now?: () => number;
}

export interface PartitionWatermarkRow extends PartitionWatermark {
  readonly batchId: number;
  readonly lastDataAtMs: number;
  readonly caughtUpAtMs?: number;
  readonly closed: boolean;
}

export class DynamoDbWatermarkCoordinator implements WatermarkCoordinator {
  readonly pk: string;
  private readonly now: () => number;
  /** The rows `prefetch` read for the current invocation, with this container's publications applied. */
  private prefetched: { partitionId: string; rows: Promise<PartitionWatermarkRow[]> } | null = null;

  constructor(private readonly options: DynamoDbWatermarkCoordinatorOptions) {
    this.pk = `${options.queryName}${CHECKPOINT_ITEMS.watermarksSuffix}`;
    this.now = options.now ?? Date.now;
  }

  /** Every partition's row, strongly consistent. */
  async list(): Promise<PartitionWatermarkRow[]> {
    const items = await queryAll(this.options.client, {
      TableName: this.options.checkpointTable,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': { S: this.pk } },
      ConsistentRead: true,
    }, this.options.meter).catch((e: unknown) => { throw wrap(e, 'read the partition watermarks'); });
    // A re-drive's own partition (`<shard>@redrive:<run>`) runs once on old records: never part of the minimum.
    return items.filter((i) => !isRedriveProgressKey(i.sk!.S!)).map((i) => {
      const closed = i.closed?.BOOL === true;
      return {
        partitionId: i.sk!.S!,
        watermarkMs: Number(i.watermarkMs?.N ?? '0'),
        batchId: Number(i.batchId?.N ?? '-1'),
        lastDataAtMs: Number(i.lastDataAtMs?.N ?? '0'),
        ...(i.caughtUpAtMs?.N !== undefined ? { caughtUpAtMs: Number(i.caughtUpAtMs.N) } : {}),
        // A closed shard will never add rows: it no longer holds the others back.
        idle: i.idle?.BOOL === true || closed,
        closed,
      };
    });
  }

  prefetch(partitionId: string): void {
    const rows = this.list();
    rows.catch(() => {}); // surfaces in combine, which awaits it
    this.prefetched = { partitionId, rows };
  }

  async combine(partitionId: string, localWatermarkMs: number, hasNewData = true): Promise<number> {
    const rows = this.prefetched?.partitionId === partitionId ? await this.prefetched.rows : await this.list();
    // Planning a batch with rows makes this partition live; a no-data batch keeps its stored state.
    const selfIdle = !hasNewData && (rows.find((r) => r.partitionId === partitionId)?.idle ?? false);
    return combineWatermarks(rows, { partitionId, watermarkMs: localWatermarkMs, idle: selfIdle });
  }

  async publish(partitionId: string, localWatermarkMs: number, batchId: number, hadData: boolean): Promise<void> {
    const input = this.publication(partitionId, localWatermarkMs, batchId, hadData);
    if (await this.update(input, `publish the watermark of ${partitionId}`)) this.published(partitionId, localWatermarkMs, batchId, hadData);
  }

  publishWithCommit(partitionId: string, localWatermarkMs: number, batchId: number, hadData: boolean): DynamoDbCommitSideWrite {
    const { TableName, Key, UpdateExpression, ConditionExpression, ExpressionAttributeValues } = this.publication(partitionId, localWatermarkMs, batchId, hadData);
    return {
      description: `the watermark row of ${partitionId}`,
      item: { Update: { TableName: TableName!, Key: Key!, UpdateExpression: UpdateExpression!, ConditionExpression, ExpressionAttributeValues } },
      // A refused publish (the row is at a later batch) changes nothing, as publish's own would.
      optional: true,
      onWritten: () => this.published(partitionId, localWatermarkMs, batchId, hadData),
    };
  }

  /** The UpdateItem that publishes a partition's watermark after `batchId`; never moves it back. */
  private publication(partitionId: string, localWatermarkMs: number, batchId: number, hadData: boolean): UpdateItemCommandInput {
    const now = this.now();
    const values: Record<string, { N: string } | { BOOL: boolean }> = {
      ':w': { N: String(localWatermarkMs) }, ':b': { N: String(batchId) }, ':now': { N: String(now) }, ':false': { BOOL: false },
    };
    const update = hadData
      ? 'SET watermarkMs = :w, batchId = :b, lastDataAtMs = :now, idle = :false REMOVE caughtUpAtMs'
      // No data: the partition keeps its idle state; a first publish starts the idle clock now.
      : 'SET watermarkMs = :w, batchId = :b, lastDataAtMs = if_not_exists(lastDataAtMs, :now), idle = if_not_exists(idle, :false)';
    return {
      TableName: this.options.checkpointTable,
      Key: this.key(partitionId),
      UpdateExpression: update,
      ConditionExpression: 'attribute_not_exists(batchId) OR batchId <= :b',
      ExpressionAttributeValues: values,
    };
  }

  /** Applies a publication to the prefetched rows, so the invocation's next combine sees it. */
  private published(partitionId: string, watermarkMs: number, batchId: number, hadData: boolean): void {
    const prefetched = this.prefetched;
    if (!prefetched) return;
    const now = this.now();
    const rows = prefetched.rows.then((list) => {
      const own = list.find((r) => r.partitionId === partitionId);
      const row: PartitionWatermarkRow = own
        ? { ...own, watermarkMs, batchId, ...(hadData ? { idle: own.closed, lastDataAtMs: now } : {}) }
        : { partitionId, watermarkMs, batchId, lastDataAtMs: now, idle: false, closed: false };
      return [...list.filter((r) => r.partitionId !== partitionId), row];
    });
    rows.catch(() => {});
    this.prefetched = { partitionId: prefetched.partitionId, rows };
  }

  /**
   * The partition's shard is caught up at `nowMs`: it becomes idle when it has had no data for
   * idleTimeoutMs. Returns whether it is idle now. A partition that never published is left out.
   */
  async confirmCaughtUp(partitionId: string, nowMs: number = this.now()): Promise<boolean> {
    this.prefetched = null;
    const base = { TableName: this.options.checkpointTable, Key: this.key(partitionId) };
    const idle = await this.update({
      ...base,
      UpdateExpression: 'SET caughtUpAtMs = :now, idle = :true',
      ConditionExpression: 'attribute_exists(batchId) AND lastDataAtMs <= :cutoff',
      ExpressionAttributeValues: { ':now': { N: String(nowMs) }, ':true': { BOOL: true }, ':cutoff': { N: String(nowMs - this.options.idleTimeoutMs) } },
    }, `mark ${partitionId} idle`);
    if (idle) return true;
    await this.update({
      ...base,
      UpdateExpression: 'SET caughtUpAtMs = :now',
      ConditionExpression: 'attribute_exists(batchId)',
      ExpressionAttributeValues: { ':now': { N: String(nowMs) } },
    }, `mark ${partitionId} caught up`);
    return false;
  }

  /** The partition's shard was closed by a reshard: it no longer counts in the minimum. */
  async markClosed(partitionId: string): Promise<void> {
    this.prefetched = null;
    await this.update({
      TableName: this.options.checkpointTable,
      Key: this.key(partitionId),
      UpdateExpression: 'SET closed = :true',
      ExpressionAttributeValues: { ':true': { BOOL: true } },
    }, `mark ${partitionId} closed`);
  }

  private key(partitionId: string): Record<string, { S: string }> {
    return { pk: { S: this.pk }, sk: { S: partitionId } };
  }

  /** An UpdateItem, metered: false when its condition failed. */
  private async update(input: UpdateItemCommandInput, what: string): Promise<boolean> {
    try {
      const out = await this.options.client.send(new UpdateItemCommand({ ...input, ReturnConsumedCapacity: 'TOTAL' }));
      meterUnits(this.options.meter, 'write', out.ConsumedCapacity, () => writeUnitsFor(0));
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) {
        meterUnits(this.options.meter, 'write', undefined, () => writeUnitsFor(0));
        return false;
      }
      throw wrap(error, what);
    }
  }
}

function wrap(error: unknown, what: string): unknown {
  if (error instanceof CheckpointError) return error;
  return new CheckpointError(`DynamoDB watermarks: could not ${what}: ${(error as Error).message}`, {
    code: 'WATERMARK_IO', retryable: true, cause: error,
  });
}
