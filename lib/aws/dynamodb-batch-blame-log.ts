/**
 * The BatchBlameLog in the checkpoint table: one item `blame#<12-digit batch id>` in the
 * partition's collection, written only while a batch's failing records are searched for (so
 * never in a batch without a data error). The entry is gzip'd JSON: its sequence numbers share
 * long prefixes and its reasons repeat, so thousands of withheld records fit in one item. A TTL
 * removes an entry whose batch committed without deleting it (the delete after the commit is
 * best effort); a stale entry is harmless, since it is read only for its own planned batch.
 */
import { GetItemCommand, PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { gunzipSync, gzipSync } from 'node:zlib';
import { BATCH_BLAME_FORMAT_VERSION, type BatchBlame, type BatchBlameLog } from '../checkpoint/batch-blame-log.js';
import type { CostMeter } from '../core/cost-meter.js';
import { CheckpointError } from '../errors/sluice-error.js';
import { PROGRESS_RECORDS } from '../runtime/runtime-config.js';
import { batchWriteAll, itemSize, meterUnits, readUnitsFor, writeUnitsFor, type Item } from './dynamodb-cost.js';
import { CHECKPOINT_ITEMS, padId } from './tables.js';

/** Below DynamoDB's 400 KB item limit, with room for the key and attributes. */
const MAX_ENTRY_BYTES = 380 * 1024;

export class DynamoDbBatchBlameLog implements BatchBlameLog {
  constructor(
    private readonly client: DynamoDBClient,
    private readonly table: string,
    private readonly pk: string,
    private readonly meter: CostMeter | undefined,
    private readonly nowMs: () => number = Date.now,
  ) {}

  private key(batchId: number): Item {
    return { pk: { S: this.pk }, sk: { S: `${CHECKPOINT_ITEMS.blamePrefix}${padId(batchId)}` } };
  }

  async get(batchId: number): Promise<BatchBlame | undefined> {
    const out = await this.client.send(new GetItemCommand({ TableName: this.table, Key: this.key(batchId), ConsistentRead: true, ReturnConsumedCapacity: 'TOTAL' }))
      .catch((e: unknown) => { throw ioError(e, `read the blame entry of batch ${batchId} of ${this.pk}`); });
    meterUnits(this.meter, 'read', out.ConsumedCapacity, () => readUnitsFor(out.Item ? itemSize(out.Item) : 0));
    const item = out.Item;
    if (!item) return undefined;
    const fmt = Number(item.fmt?.N ?? '0');
    // An entry of a newer format is ignored: the search then starts over, which is slower, never wrong.
    if (fmt !== BATCH_BLAME_FORMAT_VERSION || !item.entry?.B) return undefined;
    return JSON.parse(gunzipSync(item.entry.B).toString('utf8')) as BatchBlame;
  }

  /** Writes nothing when the entry would not fit in an item (the next run then searches further itself). */
  async put(blame: BatchBlame): Promise<void> {
    const entry = gzipSync(Buffer.from(JSON.stringify(blame)));
    if (entry.byteLength > MAX_ENTRY_BYTES) return;
    const item: Item = {
      ...this.key(blame.batchId),
      fmt: { N: String(BATCH_BLAME_FORMAT_VERSION) },
      batchId: { N: String(blame.batchId) },
      entry: { B: entry },
      [PROGRESS_RECORDS.ttlAttribute]: { N: String(Math.floor(this.nowMs() / 1000) + PROGRESS_RECORDS.ttlSeconds) },
    };
    const out = await this.client.send(new PutItemCommand({ TableName: this.table, Item: item, ReturnConsumedCapacity: 'TOTAL' }))
      .catch((e: unknown) => { throw ioError(e, `write the blame entry of batch ${blame.batchId} of ${this.pk}`); });
    meterUnits(this.meter, 'write', out.ConsumedCapacity, () => writeUnitsFor(itemSize(item)));
  }

  // BatchWriteItem, not DeleteItem: the functions' checkpoint grant has it already (the logs' purge).
  async remove(batchId: number): Promise<void> {
    await batchWriteAll(this.client, this.table, [{ DeleteRequest: { Key: this.key(batchId) } }], this.meter)
      .catch((e: unknown) => { throw ioError(e, `delete the blame entry of batch ${batchId} of ${this.pk}`); });
  }
}

function ioError(error: unknown, what: string): CheckpointError {
  return new CheckpointError(`DynamoDB checkpoint: could not ${what}: ${(error as Error).message ?? String(error)}`, {
    code: 'CHECKPOINT_IO', retryable: true, cause: error,
  });
}
