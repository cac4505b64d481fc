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
 * - publishWithCommit is publish as an Update in the batch's commit transaction (same table). There
 *   it also records the commit (`commitPk`, `committedBatchId`): written only together with commit
 *   N, the row says commit N exists, so the next commit's Update can check `committedBatchId = N`
 *   instead of a ConditionCheck of its own on commit N (2 write units less per batch; `chain`).
 */
import {
  ConditionalCheckFailedException,
  UpdateItemCommand,
  type DynamoDBClient,
  type TransactWriteItem,
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
  /** The latest commit written in the same transaction as this row (checkpoint pk and batch id). */
  readonly commit?: { readonly pk: string; readonly batchId: number };
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
        ...(i.commitPk?.S !== undefined && i.committedBatchId?.N !== undefined ? { commit: { pk: i.commitPk.S, batchId: Number(i.committedBatchId.N) } } : {}),
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
    const asItem = (input: UpdateItemCommandInput) => ({
      Update: { TableName: input.TableName!, Key: input.Key!, UpdateExpression: input.UpdateExpression!, ConditionExpression: input.ConditionExpression, ExpressionAttributeValues: input.ExpressionAttributeValues },
    });
    let recorded: { pk: string; batchId: number } | undefined;
    return {
      description: `the watermark row of ${partitionId}`,
      item: asItem(this.publication(partitionId, localWatermarkMs, batchId, hadData)),
      // A refused publish (the row is at a later batch) changes nothing, as publish's own would.
      optional: true,
      chain: async (commitPk, committing) => {
        recorded = { pk: commitPk, batchId: committing };
        const record = { pk: commitPk, batchId: committing };
        const rows = this.prefetched?.partitionId === partitionId ? await this.prefetched.rows.catch(() => []) : [];
        const known = rows.find((r) => r.partitionId === partitionId)?.commit;
        const provable = committing > 0 && known?.pk === commitPk && known.batchId === committing - 1;
        return {
          record: asItem(this.publication(partitionId, localWatermarkMs, batchId, hadData, { record })),
          ...(provable ? { proveAndRecord: asItem(this.publication(partitionId, localWatermarkMs, batchId, hadData, { record, prove: true })) } : {}),
        };
      },
      onWritten: (chained) => this.published(partitionId, localWatermarkMs, batchId, hadData, chained ? recorded : undefined),
    };
  }

  /**
   * The UpdateItem that publishes a partition's watermark after `batchId`; never moves it back.
   * `commit.record`: it is written with that commit (recorded on the row); `commit.prove`: only if
   * the row holds the commit before it.
   */
  private publication(
    partitionId: string, localWatermarkMs: number, batchId: number, hadData: boolean,
    commit?: { record: { pk: string; batchId: number }; prove?: boolean },
  ): UpdateItemCommandInput {
    const now = this.now();
    const values: Record<string, { N: string } | { BOOL: boolean } | { S: string }> = {
      ':w': { N: String(localWatermarkMs) }, ':b': { N: String(batchId) }, ':now': { N: String(now) }, ':false': { BOOL: false },
    };
    const recording = commit ? ', commitPk = :cpk, committedBatchId = :cb' : '';
    if (commit) Object.assign(values, { ':cpk': { S: commit.record.pk }, ':cb': { N: String(commit.record.batchId) } });
    const update = hadData
      ? `SET watermarkMs = :w, batchId = :b, lastDataAtMs = :now, idle = :false${recording} REMOVE caughtUpAtMs`
      // No data: the partition keeps its idle state; a first publish starts the idle clock now.
      : `SET watermarkMs = :w, batchId = :b, lastDataAtMs = if_not_exists(lastDataAtMs, :now), idle = if_not_exists(idle, :false)${recording}`;
    let condition = 'attribute_not_exists(batchId) OR batchId <= :b';
    if (commit?.prove) {
      values[':prev'] = { N: String(commit.record.batchId - 1) };
      condition = `commitPk = :cpk AND committedBatchId = :prev AND (${condition})`;
    }
    return {
      TableName: this.options.checkpointTable,
      Key: this.key(partitionId),
      UpdateExpression: update,
      ConditionExpression: condition,
      ExpressionAttributeValues: values,
    };
  }

  /** Applies a publication to the prefetched rows, so the invocation's next combine (and commit) sees it. */
  private published(partitionId: string, watermarkMs: number, batchId: number, hadData: boolean, commit?: { pk: string; batchId: number }): void {
    const prefetched = this.prefetched;
    if (!prefetched) return;
    const now = this.now();
    const rows = prefetched.rows.then((list) => {
      const own = list.find((r) => r.partitionId === partitionId);
      const row: PartitionWatermarkRow = own
        ? { ...own, watermarkMs, batchId, ...(hadData ? { idle: own.closed, lastDataAtMs: now } : {}), ...(commit ? { commit } : {}) }
        : { partitionId, watermarkMs, batchId, lastDataAtMs: now, idle: false, closed: false, ...(commit ? { commit } : {}) };
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

  /**
   * A ConditionCheck that the partition is not marked closed: the fence a re-drive batch's plan
   * carries (lib/aws/redrive-batch.ts), so that no batch lands on a shard whose children were
   * seeded from its final state. A partition without a row is not closed.
   */
  notClosedCheck(partitionId: string): TransactWriteItem {
    return {
      ConditionCheck: {
        TableName: this.options.checkpointTable, Key: this.key(partitionId),
        ConditionExpression: 'attribute_not_exists(closed) OR closed = :false', ExpressionAttributeValues: { ':false': { BOOL: false } },
      },
    };
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
