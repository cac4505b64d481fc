/**
 * DynamoDbCheckpoint: a state partition's offset log, commit log, query metadata and state stores
 * in DynamoDB.
 *
 * How a batch becomes exactly-once
 * --------------------------------
 * A query runs as one writer per state partition (a Kinesis shard): Lambda hands a shard's records
 * to one invocation at a time, and every item below is keyed by the partition. Batch N goes
 * through four steps, and the log items are the only truth about how far it got:
 *
 *   1. Plan.   The batch's end offsets, watermark and timestamp are written as `offset#N`, on the
 *              condition that the item does not exist yet. If it exists, another run already planned
 *              N: this one stops instead of planning N differently. After a crash, recovery finds
 *              `offset#N` without `commit#N` and runs N again with exactly that plan, so the re-run
 *              reads the same records and sees the same watermark and clock.
 *   2. Run.    Operator state is opened at version N (strongly consistent reads) and the batch is
 *              computed. Nothing is visible yet.
 *   3. Write.  The sink writes the output keyed by (partition, batch id), so writing it again in a
 *              re-run replaces items with identical ones; state version N+1 is written the same
 *              way (same keys, same bytes). Both can happen any number of times.
 *   4. Commit. `commit#N` is written in a transaction that also checks that `commit#N-1` exists,
 *              on the condition that `commit#N` does not (and that carries the partition's
 *              watermark row, so planning, state, commit and watermark take one request each; the
 *              row records the commit, so the next commit's row Update can prove commit N-1 in
 *              place of the ConditionCheck: DynamoDbCommitSideWrite.chain). Exactly one attempt can succeed; it is the
 *              point after which the input is acknowledged (the shard's position moves on). An
 *              attempt that finds `commit#N` already there gets `false` and must not acknowledge
 *              anything; a missing `commit#N-1` means batches are being committed out of order,
 *              which is refused with a CheckpointError.
 *
 * When the one-writer rule is broken anyway (an invocation that timed out but still runs, an
 * operator starting a second run by hand), the conditional writes decide: the stale writer cannot
 * plan a batch that is planned, nor commit a batch that is committed, nor skip one. What it may have
 * written before being refused (sink items, a state version) is what the winner writes too, since a
 * batch's input is fixed by its offset entry and execution is deterministic.
 *
 * Items (checkpoint table, pk = `${queryName}#${partitionId}`): `meta`, `offset#<12-digit id>`,
 * `commit#<12-digit id>`, each with the entry as a JSON string attribute `entry`, the format
 * version `fmt` and the `batchId`; a commit item also carries its batch's progress record,
 * compressed (lib/aws/progress-record.ts), which is how `sluice status` and `sluice progress` read
 * the recent batches (the ring of `progress#<2 digits>` items earlier versions wrote is still read).
 * `blame#<12-digit id>`: where the search for a planned batch's failing records resumes
 * (lib/aws/dynamodb-batch-blame-log.ts); it plays no part in the protocol above.
 * All reads are strongly consistent; every request's consumed capacity goes to the CostMeter.
 */
import {
  ConditionalCheckFailedException,
  GetItemCommand,
  PutItemCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
  type DynamoDBClient,
  type TransactWriteItem,
} from '@aws-sdk/client-dynamodb';
import {
  CHECKPOINT_FORMAT_VERSION, type Checkpoint, type CommitEntry, type CommitLog, type CommitSideWrite, type MetadataLog, type OffsetSeq, type QueryMetadata,
} from '../checkpoint/checkpoint.js';
import { CheckpointError } from '../errors/sluice-error.js';
import type { CostMeter } from '../core/cost-meter.js';
import { batchWriteAll, itemSize, meterUnits, queryAll, readUnitsFor, sleep, writeUnitsFor, type Item } from './dynamodb-cost.js';
import { DynamoDbStateStoreProvider, type StateCache, type StateObjectLocation } from './dynamodb-state-store.js';
import { CHECKPOINT_ITEMS, padId } from './tables.js';
import { namespacePointerKey, REPLAY_FENCE_ATTRIBUTE } from './query-namespace.js';
import { PROGRESS_RECORDS } from '../runtime/runtime-config.js';
import { commitProgressAttributes, parseCommitProgress, parseProgressRecord } from './progress-record.js';
import { DynamoDbBatchBlameLog } from './dynamodb-batch-blame-log.js';
import type { BatchBlameLog } from '../checkpoint/batch-blame-log.js';

export interface DynamoDbCheckpointOptions {
  readonly client: DynamoDBClient;
  readonly checkpointTable: string;
  readonly stateTable: string;
  readonly queryName: string;
  readonly partitionId: string;
  readonly meter?: CostMeter;
  /** A full state snapshot every this many versions (default 20); with snapshotByBytes, at most. */
  readonly snapshotEvery?: number;
  /** Snapshot once the deltas since the last snapshot outweigh it (DynamoDbStateStoreOptions). */
  readonly snapshotByBytes?: boolean;
  /** The state cache (default: the process-wide one; null: no cache). */
  readonly stateCache?: StateCache | null;
  /** State payload bytes per item before chunking (default 350 KB). */
  readonly stateChunkBytes?: number;
  /**
   * A condition that planning batch N also needs (checked in the same transaction as the offset
   * entry's put), or undefined: a re-drive batch's run must still be open (lib/aws/redrive-batch.ts).
   * `previous` reads the entry of batch N-1.
   */
  readonly planCondition?: (entry: OffsetSeq, previous: () => Promise<OffsetSeq | undefined>) => Promise<TransactWriteItem | undefined>;
  /**
   * A ConditionCheck that a batch planned under `planCondition` also needs: the partition is not
   * finished (lib/aws/reshard-guard.ts marks a closed, fully committed shard's watermark row
   * `closed` before its children are seeded from its final state). Refused: PARTITION_FINISHED.
   */
  readonly planFence?: TransactWriteItem;
  /** Where state payloads go when an S3 object is cheaper than items (DynamoDbStateStoreOptions.objects). */
  readonly stateObjects?: StateObjectLocation;
  /**
   * A condition every commit also checks (lib/aws/query-namespace.ts): the namespace this
   * checkpoint lives in is still live or the replay shadow, so a writer that started before a
   * cutover cannot commit into the retired namespace.
   */
  readonly commitFence?: TransactWriteItem;
}

/** Shared request plumbing of the logs and the metadata item. */
class CheckpointItems {
  constructor(
    readonly client: DynamoDBClient,
    readonly table: string,
    readonly pk: string,
    readonly meter: CostMeter | undefined,
  ) {}

  key(sk: string): Item {
    return { pk: { S: this.pk }, sk: { S: sk } };
  }

  async get(sk: string): Promise<Item | undefined> {
    const out = await this.client.send(new GetItemCommand({ TableName: this.table, Key: this.key(sk), ConsistentRead: true, ReturnConsumedCapacity: 'TOTAL' }));
    meterUnits(this.meter, 'read', out.ConsumedCapacity, () => readUnitsFor(out.Item ? itemSize(out.Item) : 0));
    return out.Item;
  }

  /** PutItem if absent: false when the item exists already. */
  async putIfAbsent(item: Item): Promise<boolean> {
    try {
      const out = await this.client.send(new PutItemCommand({
        TableName: this.table, Item: item, ConditionExpression: 'attribute_not_exists(pk)', ReturnConsumedCapacity: 'TOTAL',
      }));
      meterUnits(this.meter, 'write', out.ConsumedCapacity, () => writeUnitsFor(itemSize(item)));
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) {
        // AWS charges a refused conditional write like a write.
        meterUnits(this.meter, 'write', undefined, () => writeUnitsFor(itemSize(item)));
        return false;
      }
      throw wrap(error, `write ${this.pk} ${item.sk?.S}`);
    }
  }
}

function entryItem(items: CheckpointItems, sk: string, batchId: number | undefined, entry: unknown): Item {
  return {
    ...items.key(sk),
    fmt: { N: String(CHECKPOINT_FORMAT_VERSION) },
    ...(batchId === undefined ? {} : { batchId: { N: String(batchId) } }),
    entry: { S: JSON.stringify(entry) },
  };
}

function parseEntry<T>(item: Item, pk: string): T {
  const fmt = Number(item.fmt?.N ?? '1');
  if (fmt > CHECKPOINT_FORMAT_VERSION) {
    throw new CheckpointError(`Checkpoint item ${pk} ${item.sk?.S} has format ${fmt}; this Sluice reads up to ${CHECKPOINT_FORMAT_VERSION}.`, {
      code: 'CHECKPOINT_FORMAT_TOO_NEW', hint: 'run the Sluice version that wrote this checkpoint, or start with a new checkpoint.',
    });
  }
  if (item.entry?.S === undefined) {
    throw new CheckpointError(`Checkpoint item ${pk} ${item.sk?.S} has no entry.`, { code: 'CHECKPOINT_CORRUPT' });
  }
  return JSON.parse(item.entry.S) as T;
}

function wrap(error: unknown, what: string): unknown {
  if (error instanceof CheckpointError) return error;
  const e = error as { name?: string; message?: string; $retryable?: unknown };
  const throttled = e.name === 'ProvisionedThroughputExceededException' || e.name === 'ThrottlingException' || e.name === 'RequestLimitExceeded';
  return new CheckpointError(`DynamoDB checkpoint: could not ${what}: ${e.message ?? String(error)}`, {
    code: throttled ? 'CHECKPOINT_THROTTLED' : 'CHECKPOINT_IO', retryable: true, cause: error,
  });
}

/** One of the two logs: items `${prefix}<12-digit batch id>` in the partition's collection. */
class DynamoDbMetadataLog<T> implements MetadataLog<T> {
  constructor(protected readonly items: CheckpointItems, protected readonly prefix: string) {}

  protected sk(batchId: number): string {
    if (!Number.isInteger(batchId) || batchId < 0) throw new RangeError(`batch id must be a non-negative integer, got ${batchId}`);
    return `${this.prefix}${padId(batchId)}`;
  }

  async add(batchId: number, entry: T): Promise<boolean> {
    return this.items.putIfAbsent(entryItem(this.items, this.sk(batchId), batchId, entry));
  }

  async get(batchId: number): Promise<T | undefined> {
    const item = await this.items.get(this.sk(batchId)).catch((e: unknown) => { throw wrap(e, `read ${this.sk(batchId)}`); });
    return item ? parseEntry<T>(item, this.items.pk) : undefined;
  }

  async getLatest(): Promise<[number, T] | undefined> {
    const [item] = await queryAll(this.items.client, {
      TableName: this.items.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)',
      ExpressionAttributeValues: { ':pk': { S: this.items.pk }, ':p': { S: this.prefix } },
      ScanIndexForward: false, Limit: 1, ConsistentRead: true,
    }, this.items.meter, 1).catch((e: unknown) => { throw wrap(e, `read the latest ${this.prefix} entry`); });
    if (!item) return undefined;
    return [Number(item.sk!.S!.slice(this.prefix.length)), parseEntry<T>(item, this.items.pk)];
  }

  async purge(beforeBatchId: number): Promise<void> {
    if (beforeBatchId <= 0) return;
    const keys = await queryAll(this.items.client, {
      TableName: this.items.table,
      KeyConditionExpression: 'pk = :pk AND sk BETWEEN :lo AND :hi',
      ExpressionAttributeValues: { ':pk': { S: this.items.pk }, ':lo': { S: this.sk(0) }, ':hi': { S: this.sk(beforeBatchId - 1) } },
      ProjectionExpression: 'pk, sk',
    }, this.items.meter).catch((e: unknown) => { throw wrap(e, `list ${this.prefix} entries to purge`); });
    await batchWriteAll(this.items.client, this.items.table, keys.map((k) => ({ DeleteRequest: { Key: { pk: k.pk!, sk: k.sk! } } })), this.items.meter)
      .catch((e: unknown) => { throw wrap(e, `purge ${this.prefix} entries`); });
  }
}

/** The offset log whose entries may need a condition on another item to be planned (`planCondition`). */
class DynamoDbOffsetLog extends DynamoDbMetadataLog<OffsetSeq> {
  constructor(
    items: CheckpointItems, prefix: string,
    private readonly planCondition: NonNullable<DynamoDbCheckpointOptions['planCondition']>,
    private readonly planFence: TransactWriteItem | undefined,
  ) {
    super(items, prefix);
  }

  override async add(batchId: number, entry: OffsetSeq): Promise<boolean> {
    const condition = await this.planCondition(entry, () => (batchId > 0 ? this.get(batchId - 1) : Promise.resolve(undefined)));
    if (!condition) return super.add(batchId, entry);
    const item = entryItem(this.items, this.sk(batchId), batchId, entry);
    const fence = this.planFence ? [this.planFence] : [];
    try {
      const out = await this.items.client.send(new TransactWriteItemsCommand({
        TransactItems: [{ Put: { TableName: this.items.table, Item: item, ConditionExpression: 'attribute_not_exists(pk)' } }, condition, ...fence],
        ReturnConsumedCapacity: 'TOTAL',
      }));
      meterUnits(this.items.meter, 'write', out.ConsumedCapacity, () => 2 * writeUnitsFor(itemSize(item)) + 2 + 2 * fence.length);
      return true;
    } catch (error) {
      if (!(error instanceof TransactionCanceledException)) throw wrap(error, `plan batch ${batchId}`);
      const reasons = (error.CancellationReasons ?? []).map((r) => r.Code ?? 'None');
      if (reasons[0] === 'ConditionalCheckFailed') return false;
      // Before the fence: a run already committed is reported as such, whatever happened to the shard since.
      if (reasons[1] === 'ConditionalCheckFailed') {
        throw new CheckpointError(`Batch ${batchId} of ${this.items.pk} cannot be planned: its condition on another item failed (a re-drive run already committed).`, {
          code: 'PLAN_CONDITION_FAILED', context: { batchId, pk: this.items.pk },
        });
      }
      if (reasons[2] === 'ConditionalCheckFailed') {
        throw new CheckpointError(`Batch ${batchId} of ${this.items.pk} cannot be planned: the partition is finished (its shard was closed by a reshard and its children were seeded from its final state).`, {
          code: 'PARTITION_FINISHED', context: { batchId, pk: this.items.pk },
          hint: 'its keys belong to the open descendants now; a re-drive run of this shard runs there (the next `sluice redrive` moves it).',
        });
      }
      throw new CheckpointError(`Could not plan batch ${batchId} of ${this.items.pk}: transaction cancelled (${reasons.join(', ')}).`, {
        code: 'CHECKPOINT_IO', retryable: true, cause: error,
      });
    }
  }
}

/**
 * A side write of a batch's commit on DynamoDB: one more item of the commit transaction (same
 * account and region; any table). `optional`: its own condition failing drops it (the commit is
 * retried without it) instead of failing the commit.
 */
export interface DynamoDbCommitSideWrite extends CommitSideWrite {
  readonly item: TransactWriteItem;
  readonly optional: boolean;
  /**
   * The same write, also recording commit N of `commitPk` on its item (`record`), and, when the
   * writer knows its item holds commit N-1, one that also proves it (`proveAndRecord`: a condition
   * that holds only if commit N-1 was written): the commit then needs no ConditionCheck of commit N-1.
   * The item is written only in commit transactions, so it says which commit is the latest.
   */
  readonly chain?: (commitPk: string, batchId: number) => Promise<{ record: TransactWriteItem; proveAndRecord?: TransactWriteItem }>;
  /** Called once the commit transaction wrote it (`recorded`: a `chain` item, which records the commit). */
  readonly onWritten?: (recorded: boolean) => void;
}

function isDynamoDbSideWrite(write: CommitSideWrite): write is DynamoDbCommitSideWrite {
  return typeof (write as Partial<DynamoDbCommitSideWrite>).item === 'object' && typeof (write as Partial<DynamoDbCommitSideWrite>).optional === 'boolean';
}

/**
 * The commit log: commit N is written only after commit N-1, in one transaction:
 *   [ConditionCheck commit N-1 exists]   (N > 0, unless a side write proves it)
 *   Put commit N if absent, with batch N's progress record as attributes when one is staged (an
 *     item of its own would cost 2 more write units; a refused commit writes no record)
 *   [fence]
 *   ...side writes (the watermark row; whatever else belongs to the commit)
 * A side write that can `chain` (the watermark row) records the commit on its item; when it can
 * prove commit N-1 (its item recorded N-1, which only commit N-1's transaction writes), its
 * condition replaces the ConditionCheck (2 write units); if that condition fails, the commit is
 * tried again with the ConditionCheck, which decides as before.
 */
class DynamoDbCommitLog extends DynamoDbMetadataLog<CommitEntry> implements CommitLog {
  /** Batch N's progress record, staged by the engine to ride in commit N's transaction. */
  staged: { batchId: number; progress: object } | null = null;

  /**
   * `fence`: the namespace fence of a writer that read the pointer. Without it (the writer read no
   * pointer: the query was never replayed), `pointerKey` is the pointer item a first commit checks
   * is still absent; later commits check the previous commit carries no REPLAY_FENCE_ATTRIBUTE,
   * which `sluice replay start` sets (lib/aws/query-namespace.ts), or, when the watermark row
   * proves commit N-1, that the row carries none (start marks it too). Both ride on items the
   * transaction has anyway, except batch 0's one check.
   */
  constructor(items: CheckpointItems, prefix: string, private readonly fence?: TransactWriteItem, private readonly pointerKey?: Item) {
    super(items, prefix);
  }

  override async add(batchId: number, entry: CommitEntry): Promise<boolean> {
    return this.addWithSideWrites(batchId, entry, []);
  }

  async addWithSideWrites(batchId: number, entry: CommitEntry, sideWrites: readonly CommitSideWrite[]): Promise<boolean> {
    const writes = sideWrites.map((w) => {
      if (!isDynamoDbSideWrite(w)) throw new CheckpointError(`The DynamoDB commit log cannot write ${w.description} in its commit.`, { code: 'CHECKPOINT_IO' });
      return w;
    });
    const unfenced = !this.fence && this.pointerKey !== undefined;
    const staged = this.staged?.batchId === batchId ? this.staged.progress : null;
    this.staged = null;
    const item = { ...entryItem(this.items, this.sk(batchId), batchId, entry), ...(staged ? commitProgressAttributes(staged) : {}) };
    const chainWrite = writes.find((w) => w.chain !== undefined);
    const chain = chainWrite ? await chainWrite.chain!(this.items.pk, batchId) : undefined;
    let proving = batchId > 0 && chain?.proveAndRecord !== undefined;
    let included = writes;
    for (let attempt = 0; ; attempt++) {
      const chained = chainWrite !== undefined && chain !== undefined && included.includes(chainWrite);
      const provingNow = proving && chained;
      const commitItems: TransactWriteItem[] = [];
      const checkIndex = batchId > 0 && !provingNow
        ? commitItems.push({
          ConditionCheck: {
            TableName: this.items.table, Key: this.items.key(this.sk(batchId - 1)),
            ...(unfenced
              ? { ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(#fence)', ExpressionAttributeNames: { '#fence': REPLAY_FENCE_ATTRIBUTE } }
              : { ConditionExpression: 'attribute_exists(pk)' }),
          },
        }) - 1
        : -1;
      const putIndex = commitItems.push({ Put: { TableName: this.items.table, Item: item, ConditionExpression: 'attribute_not_exists(pk)' } }) - 1;
      const fenceIndex = this.fence
        ? commitItems.push(this.fence) - 1
        : unfenced && batchId === 0
          ? commitItems.push({ ConditionCheck: { TableName: this.items.table, Key: this.pointerKey!, ConditionExpression: 'attribute_not_exists(pk)' } }) - 1
          : -1;
      const sideItem = (w: DynamoDbCommitSideWrite): TransactWriteItem => {
        if (w !== chainWrite || !chain) return w.item;
        if (!provingNow) return chain.record;
        // A writer without a fence proves N-1 on the row only while `replay start` has not marked the row
        // (fenceUnfencedWriters); once marked, the ConditionCheck of commit N-1 decides, fence included.
        return unfenced ? withoutReplayFence(chain.proveAndRecord!) : chain.proveAndRecord!;
      };
      const transactItems = [...commitItems, ...included.map(sideItem)];
      const units = (): number => writeUnitsFor(itemSize(item), true) + (checkIndex >= 0 ? 2 : 0) + included.length * 2 + (fenceIndex >= 0 ? 2 : 0);
      try {
        const out = await this.items.client.send(new TransactWriteItemsCommand({ TransactItems: transactItems, ReturnConsumedCapacity: 'TOTAL' }));
        meterUnits(this.items.meter, 'write', out.ConsumedCapacity, units);
        for (const w of included) w.onWritten?.(w === chainWrite && chained);
        return true;
      } catch (error) {
        if (!(error instanceof TransactionCanceledException)) throw wrap(error, `commit batch ${batchId}`);
        meterUnits(this.items.meter, 'write', undefined, units);
        const reasons = (error.CancellationReasons ?? []).map((r) => r.Code ?? 'None');
        const failed = (i: number): boolean => reasons[i] === 'ConditionalCheckFailed';
        if (failed(putIndex)) return false;
        if (fenceIndex >= 0 && failed(fenceIndex)) {
          throw new CheckpointError(`Cannot commit batch ${batchId} of ${this.items.pk}: its namespace is no longer the query's live one nor its replay (cut over or aborted).`, {
            code: 'NAMESPACE_RETIRED', retryable: true, context: { batchId, pk: this.items.pk },
            hint: 'nothing to do: the retried invocation reads the live namespace again.',
          });
        }
        if (checkIndex >= 0 && failed(checkIndex)) {
          // DynamoDB may stop at the first failed condition: see whether commit N is there after all.
          if (await this.items.get(this.sk(batchId))) return false;
          if (unfenced && (await this.items.get(this.sk(batchId - 1)))?.[REPLAY_FENCE_ATTRIBUTE]) {
            throw new CheckpointError(`Cannot commit batch ${batchId} of ${this.items.pk}: a replay of the query started after this writer read its namespaces.`, {
              code: 'NAMESPACE_RETIRED', retryable: true, context: { batchId, pk: this.items.pk },
              hint: 'nothing to do: the retried invocation reads the namespace pointer and commits with its fence.',
            });
          }
          throw new CheckpointError(
            `Cannot commit batch ${batchId} of ${this.items.pk}: batch ${batchId - 1} is not in the commit log. Batches commit in order, one after another.`,
            {
              code: 'COMMIT_LOG_GAP', context: { batchId, pk: this.items.pk },
              hint: 'another writer rewound or damaged this checkpoint, or the commit log was purged up to its latest entry; stop other runs of the query and restart it.',
            },
          );
        }
        if (provingNow && failed(commitItems.length + included.indexOf(chainWrite!))) {
          // The row does not hold commit N-1 (another writer moved it, or it never recorded it): the ConditionCheck decides.
          proving = false;
          continue;
        }
        const refused = included.filter((w, i) => failed(commitItems.length + i));
        if (refused.length > 0 && refused.every((w) => w.optional)) {
          // Only side writes whose own condition failed: the commit goes ahead without them.
          included = included.filter((w) => !refused.includes(w));
          continue;
        }
        if (refused.length > 0) {
          throw new CheckpointError(`Could not commit batch ${batchId} of ${this.items.pk}: ${refused.map((w) => w.description).join(', ')} refused.`, {
            code: 'CHECKPOINT_IO', retryable: true, cause: error,
          });
        }
        if (reasons.includes('TransactionConflict') && attempt < 5) {
          // A concurrent transaction on the same items: the retry will see its outcome.
          await sleep(20 * 2 ** attempt + Math.random() * 20);
          continue;
        }
        throw new CheckpointError(`Could not commit batch ${batchId} of ${this.items.pk}: transaction cancelled (${reasons.join(', ')}).`, {
          code: 'CHECKPOINT_IO', retryable: true, cause: error,
        });
      }
    }
  }
}

/** The row Update, also conditioned on the row carrying no REPLAY_FENCE_ATTRIBUTE. */
function withoutReplayFence(write: TransactWriteItem): TransactWriteItem {
  const update = write.Update!;
  return {
    Update: {
      ...update,
      ConditionExpression: update.ConditionExpression ? `(${update.ConditionExpression}) AND attribute_not_exists(#replayFence)` : 'attribute_not_exists(#replayFence)',
      ExpressionAttributeNames: { ...update.ExpressionAttributeNames, '#replayFence': REPLAY_FENCE_ATTRIBUTE },
    },
  };
}

export class DynamoDbCheckpoint implements Checkpoint {
  readonly offsetLog: MetadataLog<OffsetSeq>;
  readonly commitLog: CommitLog;
  readonly stateStore: DynamoDbStateStoreProvider;
  readonly blameLog: BatchBlameLog;
  private readonly commits: DynamoDbCommitLog;
  /** The partition key of this partition's checkpoint items. */
  readonly pk: string;
  private readonly items: CheckpointItems;

  constructor(readonly options: DynamoDbCheckpointOptions) {
    if (!options.queryName || options.queryName.includes('#')) throw new RangeError(`queryName must be non-empty and contain no '#', got '${options.queryName}'`);
    if (!options.partitionId || options.partitionId.includes('#')) throw new RangeError(`partitionId must be non-empty and contain no '#', got '${options.partitionId}'`);
    this.pk = `${options.queryName}#${options.partitionId}`;
    this.items = new CheckpointItems(options.client, options.checkpointTable, this.pk, options.meter);
    this.offsetLog = options.planCondition
      ? new DynamoDbOffsetLog(this.items, CHECKPOINT_ITEMS.offsetPrefix, options.planCondition, options.planFence)
      : new DynamoDbMetadataLog<OffsetSeq>(this.items, CHECKPOINT_ITEMS.offsetPrefix);
    this.commits = new DynamoDbCommitLog(this.items, CHECKPOINT_ITEMS.commitPrefix, options.commitFence, namespacePointerKey(options.queryName.split('@')[0]!));
    this.commitLog = this.commits;
    this.blameLog = new DynamoDbBatchBlameLog(options.client, options.checkpointTable, this.pk, options.meter);
    this.stateStore = new DynamoDbStateStoreProvider({
      client: options.client, table: options.stateTable, queryName: options.queryName, partitionId: options.partitionId,
      ...(options.meter ? { meter: options.meter } : {}),
      ...(options.snapshotEvery !== undefined ? { snapshotEvery: options.snapshotEvery } : {}),
      ...(options.snapshotByBytes !== undefined ? { snapshotByBytes: options.snapshotByBytes } : {}),
      ...(options.stateCache !== undefined ? { cache: options.stateCache } : {}),
      ...(options.stateChunkBytes !== undefined ? { chunkBytes: options.stateChunkBytes } : {}),
      ...(options.stateObjects ? { objects: options.stateObjects } : {}),
    });
  }

  stageProgress(batchId: number, progress: object): void {
    this.commits.staged = { batchId, progress };
  }

  /**
   * The partition's recent progress records (the last PROGRESS_RECORDS.keep batches'), oldest
   * first; read-only. From the latest commit items, and from the ring earlier versions wrote (a
   * commit's own record wins over a ring item of the same batch).
   */
  async readRecentProgress<T = unknown>(): Promise<T[]> {
    const { keep } = PROGRESS_RECORDS;
    const query = (prefix: string, limit?: number): Promise<Item[]> => queryAll(this.items.client, {
      TableName: this.items.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)',
      ExpressionAttributeValues: { ':pk': { S: this.items.pk }, ':p': { S: prefix } },
      ConsistentRead: true,
      ...(limit === undefined ? {} : { ScanIndexForward: false, Limit: limit }),
    }, this.items.meter, limit).catch((e: unknown) => { throw wrap(e, 'read recent progress'); });
    const [commits, ring] = await Promise.all([query(CHECKPOINT_ITEMS.commitPrefix, keep), query(CHECKPOINT_ITEMS.progressPrefix)]);
    const byBatch = new Map<number, T>();
    for (const item of ring) byBatch.set(Number(item.batchId?.N ?? -1), parseProgressRecord<T>(item, this.items.pk));
    for (const item of commits.slice(0, keep)) {
      const progress = parseCommitProgress<T>(item, this.items.pk);
      if (progress !== undefined) byBatch.set(Number(item.batchId?.N ?? -1), progress);
    }
    return [...byBatch].sort((a, b) => a[0] - b[0]).slice(-keep).map(([, p]) => p);
  }

  async readQueryMetadata(): Promise<QueryMetadata | undefined> {
    const item = await this.items.get(CHECKPOINT_ITEMS.metadata).catch((e: unknown) => { throw wrap(e, 'read the query metadata'); });
    return item ? parseEntry<QueryMetadata>(item, this.pk) : undefined;
  }

  /** A conditional PutItem on the item's stored entry (the checkpoint table's PutItem grant; no DeleteItem). */
  async replaceQueryMetadata(expected: QueryMetadata, metadata: QueryMetadata): Promise<boolean> {
    const existing = await this.items.get(CHECKPOINT_ITEMS.metadata).catch((e: unknown) => { throw wrap(e, 'read the query metadata'); });
    if (!existing || JSON.stringify(parseEntry<QueryMetadata>(existing, this.pk)) !== JSON.stringify(expected)) return false;
    const item = entryItem(this.items, CHECKPOINT_ITEMS.metadata, undefined, metadata);
    try {
      await this.items.client.send(new PutItemCommand({
        TableName: this.items.table, Item: item, ConditionExpression: '#e = :e', ExpressionAttributeNames: { '#e': 'entry' },
        ExpressionAttributeValues: { ':e': existing.entry! }, ReturnConsumedCapacity: 'TOTAL',
      }));
      meterUnits(this.items.meter, 'write', undefined, () => writeUnitsFor(itemSize(item)));
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw wrap(error, 'replace the query metadata');
    }
  }

  /**
   * Written once, at the query's first start. A second write is accepted only if it carries the
   * same query id and fingerprint (a retried start); anything else means two runs started at once.
   */
  async writeQueryMetadata(metadata: QueryMetadata): Promise<void> {
    if (await this.items.putIfAbsent(entryItem(this.items, CHECKPOINT_ITEMS.metadata, undefined, metadata))) return;
    const existing = await this.readQueryMetadata();
    if (existing && JSON.stringify(existing) === JSON.stringify(metadata)) return;
    throw new CheckpointError(
      `The checkpoint of ${this.pk} was initialised concurrently by another run (query id ${existing?.queryId ?? 'unknown'}).`,
      { code: 'CONCURRENT_QUERY', hint: 'only one run of a query may use a checkpoint at a time; stop the other run and restart.' },
    );
  }
}
