/**
 * Shards the reshard guard refuses (RESHARD_WITH_STATE, RESHARD_STAGE_CHANGED: not retryable,
 * lib/aws/reshard-guard.ts). The event source mapping retries such a child's records until
 * `maxRecordAge` (hours), and the scheduled function refuses it at every tick; logs and a metric
 * say so, but nothing in `sluice status` did. Each refusal is recorded here, one item per
 * partition, so that `sluice status` names the shard, the code, since when and the fix; the item
 * is removed when the shard later passes the guard.
 *
 * Items (checkpoint table): pk = `${namespace}${REFUSED_SHARDS_SUFFIX}`, sk = `<checkpoint partition>`.
 * Cheap on a retry loop: a container writes a partition's refusal again only when its code
 * changed or `REFRESH_MS` passed (then `lastSeenMs` moves), and the write is conditional on the
 * same, so other containers retrying the same shard do not rewrite it either.
 */
import { ConditionalCheckFailedException, DeleteItemCommand, UpdateItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SluiceError } from '../errors/sluice-error.js';
import { queryAll, type Item } from './dynamodb-cost.js';

export const REFUSED_SHARDS_SUFFIX = '#refused';
/** How often a still-refused shard's `lastSeenMs` moves at most. */
export const REFUSAL_REFRESH_MS = 15 * 60_000;

export interface RefusedShard {
  /** The checkpoint partition (`<shard>`, `state.<shard>` for stage 2...). */
  readonly partitionId: string;
  readonly shardId: string;
  readonly code: string;
  readonly message: string;
  readonly hint: string;
  readonly firstSeenMs: number;
  readonly lastSeenMs: number;
}

/** What the reshard guard tells about the shards it refuses and lets run (lib/aws/reshard-guard.ts). */
export interface RefusalLog {
  refused(partitionId: string, shardId: string, error: SluiceError): Promise<void>;
  /** The partition passed the guard: a refusal recorded before is over. */
  passed(partitionId: string): Promise<void>;
}

export interface RefusedShardStoreOptions {
  readonly client: DynamoDBClient;
  readonly checkpointTable: string;
  /** The namespace the guard runs in (the query's name, or a replay's after a cutover). */
  readonly namespace: string;
  readonly now?: () => number;
}

export class RefusedShardStore implements RefusalLog {
  /** What this container wrote last per partition: a retry of the same refusal writes nothing. */
  private readonly written = new Map<string, { code: string; atMs: number }>();

  constructor(private readonly options: RefusedShardStoreOptions) {}

  private get pk(): string {
    return `${this.options.namespace}${REFUSED_SHARDS_SUFFIX}`;
  }

  async refused(partitionId: string, shardId: string, error: SluiceError): Promise<void> {
    const nowMs = (this.options.now ?? Date.now)();
    const last = this.written.get(partitionId);
    if (last && last.code === error.code && nowMs - last.atMs < REFUSAL_REFRESH_MS) return;
    try {
      await this.options.client.send(new UpdateItemCommand({
        TableName: this.options.checkpointTable,
        Key: { pk: { S: this.pk }, sk: { S: partitionId } },
        UpdateExpression: 'SET partitionId = :p, shardId = :s, code = :code, message = :m, hint = :h, '
          + 'firstSeenMs = if_not_exists(firstSeenMs, :now), lastSeenMs = :now',
        ConditionExpression: 'attribute_not_exists(pk) OR code <> :code OR lastSeenMs < :refreshBefore',
        ExpressionAttributeValues: {
          ':p': { S: partitionId }, ':s': { S: shardId }, ':code': { S: error.code }, ':m': { S: error.message },
          ':h': { S: error.hint ?? '' }, ':now': { N: String(nowMs) }, ':refreshBefore': { N: String(nowMs - REFUSAL_REFRESH_MS) },
        },
      }));
    } catch (e) {
      // Another container recorded the same refusal recently.
      if (!(e instanceof ConditionalCheckFailedException)) throw e;
    }
    this.written.set(partitionId, { code: error.code, atMs: nowMs });
  }

  async passed(partitionId: string): Promise<void> {
    this.written.delete(partitionId);
    await this.options.client.send(new DeleteItemCommand({ TableName: this.options.checkpointTable, Key: { pk: { S: this.pk }, sk: { S: partitionId } } }));
  }

  async list(): Promise<RefusedShard[]> {
    const items = await queryAll(this.options.client, {
      TableName: this.options.checkpointTable, ConsistentRead: true,
      KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: this.pk } },
    }, undefined);
    return items.map(refusedShardOf);
  }
}

function refusedShardOf(item: Item): RefusedShard {
  return {
    partitionId: item.partitionId!.S!,
    shardId: item.shardId!.S!,
    code: item.code!.S!,
    message: item.message?.S ?? '',
    hint: item.hint?.S ?? '',
    firstSeenMs: Number(item.firstSeenMs?.N ?? 0),
    lastSeenMs: Number(item.lastSeenMs?.N ?? 0),
  };
}
