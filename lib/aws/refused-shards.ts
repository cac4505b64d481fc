/**
 * Shards the reshard guard refuses (RESHARD_WITH_STATE, RESHARD_STAGE_CHANGED: not retryable,
 * lib/aws/reshard-guard.ts). The event source mapping retries such a child's records until
 * `maxRecordAge` (hours), and the scheduled function refuses it at every tick; logs and a metric
 * say so, but nothing in `sluice status` did. Each refusal is recorded here, one item per
 * partition, so that `sluice status` names the shard, the code, since when and the fix; the item
 * is marked resolved (and expires) when the shard later passes the guard.
 *
 * Items (checkpoint table): pk = `${namespace}${REFUSED_SHARDS_SUFFIX}`, sk = `<checkpoint partition>`,
 * `state` refused or resolved (a resolved item expires by the table's TTL). Only GetItem and
 * PutItem, which every function may call on the checkpoint table (cdk/grants.ts: no DeleteItem, and
 * the repartition function has no UpdateItem). Cheap on a retry loop: a container writes a
 * partition's refusal again only when its code changed or `REFUSAL_REFRESH_MS` passed (then
 * `lastSeenMs` moves), and reads first, so other containers retrying the same shard do not
 * rewrite it either; a shard that passes costs one read (per container, until it commits).
 */
import { GetItemCommand, PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SluiceError } from '../errors/sluice-error.js';
import { PROGRESS_RECORDS } from '../runtime/runtime-config.js';
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
  /** resolved: the shard passed the guard later (the item expires by TTL). */
  readonly state: 'refused' | 'resolved';
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
    const stored = await this.read(partitionId);
    const same = stored?.state === 'refused' && stored.code === error.code ? stored : null;
    if (!same || same.lastSeenMs < nowMs - REFUSAL_REFRESH_MS) {
      await this.put({
        partitionId: { S: partitionId }, shardId: { S: shardId }, state: { S: 'refused' }, code: { S: error.code },
        message: { S: error.message }, hint: { S: error.hint ?? '' },
        firstSeenMs: { N: String(same?.firstSeenMs ?? nowMs) }, lastSeenMs: { N: String(nowMs) },
      }, partitionId);
    }
    this.written.set(partitionId, { code: error.code, atMs: same && same.lastSeenMs >= nowMs - REFUSAL_REFRESH_MS ? same.lastSeenMs : nowMs });
  }

  async passed(partitionId: string): Promise<void> {
    this.written.delete(partitionId);
    const stored = await this.read(partitionId);
    if (stored?.state !== 'refused') return;
    const nowMs = (this.options.now ?? Date.now)();
    await this.put({
      ...itemOf(stored), state: { S: 'resolved' }, resolvedAtMs: { N: String(nowMs) },
      [PROGRESS_RECORDS.ttlAttribute]: { N: String(Math.floor(nowMs / 1000) + PROGRESS_RECORDS.ttlSeconds) },
    }, partitionId);
  }

  private async read(partitionId: string): Promise<RefusedShard | null> {
    const out = await this.options.client.send(new GetItemCommand({
      TableName: this.options.checkpointTable, Key: { pk: { S: this.pk }, sk: { S: partitionId } }, ConsistentRead: true,
    }));
    return out.Item ? refusedShardOf(out.Item) : null;
  }

  private async put(attributes: Item, partitionId: string): Promise<void> {
    await this.options.client.send(new PutItemCommand({
      TableName: this.options.checkpointTable, Item: { pk: { S: this.pk }, sk: { S: partitionId }, ...attributes },
    }));
  }

  /** The shards refused now (resolved ones are left out). */
  async list(): Promise<RefusedShard[]> {
    const items = await queryAll(this.options.client, {
      TableName: this.options.checkpointTable, ConsistentRead: true,
      KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: this.pk } },
    }, undefined);
    return items.map(refusedShardOf).filter((r) => r.state === 'refused');
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
    state: item.state?.S === 'resolved' ? 'resolved' : 'refused',
  };
}

function itemOf(r: RefusedShard): Item {
  return {
    partitionId: { S: r.partitionId }, shardId: { S: r.shardId }, code: { S: r.code }, message: { S: r.message }, hint: { S: r.hint },
    firstSeenMs: { N: String(r.firstSeenMs) }, lastSeenMs: { N: String(r.lastSeenMs) },
  };
}
