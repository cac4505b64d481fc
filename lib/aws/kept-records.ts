/**
 * Kept copies of planned batches' records in the checkpoint table (lib/query/kept-records.ts says
 * when a batch keeps them). Two kinds of items:
 *
 *   - pages: pk `${query}#kept`, sk `page#<partition>#<first>#<batch>#<n>`, the records' JSON,
 *     gzipped, cut under DynamoDB's item size (as the re-drive ledger's pages);
 *   - the claim, on the item a loss of the same batch would be recorded on (SkippedBatchStore's
 *     `<partition>#<first>#expired-planned`): `keptBatch`, `keptLast`, `keptPages`. One item with
 *     conditional writes makes keeping and recording a loss exclusive: the claim requires no loss
 *     (`state` absent), the loss requires no claim.
 *
 * Pages are written before the claim, so a claim means the copy is whole. The copy is raw input
 * (personal data): removed after the batch commits, and both kinds carry a TTL (`expiresAt`, 14
 * days) for a removal that did not run. 14 days: Lambda retries a failed batch within minutes, so
 * a batch still pending then has had its function broken for two weeks (its copy then expires, and
 * the run that loses the records records the loss); and raw input never outlives its batch by more.
 */
import { gunzipSync, gzipSync } from 'node:zlib';
import { ConditionalCheckFailedException, DeleteItemCommand, GetItemCommand, PutItemCommand, UpdateItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { CostMeter } from '../core/cost-meter.js';
import type { KeptBatch, KeptRecords } from '../query/partition-backends.js';
import { PROGRESS_RECORDS } from '../runtime/runtime-config.js';
import type { ShardRecord } from '../sources/kinesis-shard-source.js';
import { batchWriteAll, itemSize, meterUnits, queryAll, readUnitsFor, writeUnitsFor, type Item } from './dynamodb-cost.js';
import { expiredPlannedKey } from './skipped-batches.js';

export const KEPT_RECORDS_SUFFIX = '#kept';
/** Gzipped bytes per page item (DynamoDB items hold 400 KB). */
const PAGE_BYTES = 300_000;
/** How long a copy the removal after the commit missed stays at most (see above). */
export const KEPT_RECORDS_TTL_SECONDS = 14 * 24 * 3600;

export interface DynamoDbKeptRecordsOptions {
  readonly client: DynamoDBClient;
  readonly checkpointTable: string;
  readonly queryName: string;
  /** The checkpoint partition of the stage (`<shard>`, or `state.<shard>` for stage 2). */
  readonly partitionId: string;
  readonly meter?: CostMeter;
}

export class DynamoDbKeptRecords implements KeptRecords {
  constructor(private readonly options: DynamoDbKeptRecordsOptions) {}

  private claimKey(batch: KeptBatch): Item {
    return expiredPlannedKey(this.options.queryName, this.options.partitionId, batch.firstSequenceNumber);
  }

  private pagePrefix(batch: KeptBatch): string {
    return `page#${this.options.partitionId}#${batch.firstSequenceNumber}#${batch.batchId}#`;
  }

  private async claim(batch: KeptBatch): Promise<Item | undefined> {
    const out = await this.options.client.send(new GetItemCommand({
      TableName: this.options.checkpointTable, Key: this.claimKey(batch), ConsistentRead: true, ReturnConsumedCapacity: 'TOTAL',
    }));
    meterUnits(this.options.meter, 'read', out.ConsumedCapacity, () => readUnitsFor(out.Item ? itemSize(out.Item) : 1));
    return out.Item;
  }

  /** One look for a claim; then the pages and the claim, refused when a loss is recorded meanwhile. */
  async keep(batch: KeptBatch, records: readonly ShardRecord[]): Promise<'kept' | 'refused'> {
    const found = await this.claim(batch);
    if (found?.state) return 'refused';
    if (found?.keptBatch) return this.mine(found, batch);
    const expiresAt = { N: String(Math.floor(Date.now() / 1000) + KEPT_RECORDS_TTL_SECONDS) };
    const bytes = gzipSync(JSON.stringify(records));
    const pages = Math.max(1, Math.ceil(bytes.length / PAGE_BYTES));
    for (let i = 0; i < pages; i++) {
      const item: Item = {
        pk: { S: `${this.options.queryName}${KEPT_RECORDS_SUFFIX}` }, sk: { S: `${this.pagePrefix(batch)}${String(i).padStart(4, '0')}` },
        data: { B: bytes.subarray(i * PAGE_BYTES, (i + 1) * PAGE_BYTES) }, [PROGRESS_RECORDS.ttlAttribute]: expiresAt,
      };
      const out = await this.options.client.send(new PutItemCommand({ TableName: this.options.checkpointTable, Item: item, ReturnConsumedCapacity: 'TOTAL' }));
      meterUnits(this.options.meter, 'write', out.ConsumedCapacity, () => writeUnitsFor(itemSize(item)));
    }
    try {
      const out = await this.options.client.send(new UpdateItemCommand({
        TableName: this.options.checkpointTable, Key: this.claimKey(batch), ReturnConsumedCapacity: 'TOTAL',
        UpdateExpression: 'SET keptBatch = :b, keptLast = :last, keptPages = :pages, keptAtMs = :now, #ttl = :ttl',
        ConditionExpression: 'attribute_not_exists(#state) AND (attribute_not_exists(keptBatch) OR (keptBatch = :b AND keptLast = :last))',
        ExpressionAttributeNames: { '#state': 'state', '#ttl': PROGRESS_RECORDS.ttlAttribute },
        ExpressionAttributeValues: {
          ':b': { N: String(batch.batchId) }, ':last': { S: batch.lastSequenceNumber }, ':pages': { N: String(pages) },
          ':now': { N: String(Date.now()) }, ':ttl': expiresAt,
        },
      }));
      meterUnits(this.options.meter, 'write', out.ConsumedCapacity, () => 1);
      return 'kept';
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
    const now = await this.claim(batch);
    if (now?.state) return 'refused';
    return this.mine(now ?? {}, batch);
  }

  private mine(claim: Item, batch: KeptBatch): 'kept' {
    if (claim.keptBatch?.N !== String(batch.batchId) || claim.keptLast?.S !== batch.lastSequenceNumber) {
      throw new Error(`batch ${batch.batchId} of ${this.options.partitionId}: the records kept from ${batch.firstSequenceNumber} are another plan's `
        + `(batch ${claim.keptBatch?.N ?? '?'} to ${claim.keptLast?.S ?? '?'})`);
    }
    return 'kept';
  }

  async read(batch: KeptBatch): Promise<ShardRecord[] | null> {
    const claim = await this.claim(batch);
    if (!claim?.keptBatch || claim.keptBatch.N !== String(batch.batchId) || claim.keptLast?.S !== batch.lastSequenceNumber) return null;
    const pages = await queryAll(this.options.client, {
      TableName: this.options.checkpointTable, KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)', ConsistentRead: true,
      ExpressionAttributeValues: { ':pk': { S: `${this.options.queryName}${KEPT_RECORDS_SUFFIX}` }, ':p': { S: this.pagePrefix(batch) } },
    }, this.options.meter);
    if (pages.length !== Number(claim.keptPages?.N ?? -1)) {
      throw new Error(`batch ${batch.batchId} of ${this.options.partitionId}: ${pages.length} of the ${claim.keptPages?.N} page(s) of its kept records are stored`);
    }
    return JSON.parse(gunzipSync(Buffer.concat(pages.map((p) => p.data!.B!))).toString('utf8')) as ShardRecord[];
  }

  async remove(batch: KeptBatch): Promise<void> {
    const keys = await queryAll(this.options.client, {
      TableName: this.options.checkpointTable, KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)', ProjectionExpression: 'pk, sk',
      ExpressionAttributeValues: { ':pk': { S: `${this.options.queryName}${KEPT_RECORDS_SUFFIX}` }, ':p': { S: this.pagePrefix(batch) } },
    }, this.options.meter);
    await batchWriteAll(this.options.client, this.options.checkpointTable, keys.map((k) => ({ DeleteRequest: { Key: { pk: k.pk!, sk: k.sk! } } })), this.options.meter);
    // The claim goes too (never a loss record: a claimed item has none).
    await this.options.client.send(new DeleteItemCommand({
      TableName: this.options.checkpointTable, Key: this.claimKey(batch),
      ConditionExpression: 'attribute_not_exists(#state) AND keptBatch = :b', ExpressionAttributeNames: { '#state': 'state' },
      ExpressionAttributeValues: { ':b': { N: String(batch.batchId) } },
    })).catch((error: unknown) => {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    });
  }
}
