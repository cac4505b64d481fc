/**
 * A re-drive batch on a shard's own partition: records that do not come from the shard (dead
 * letters re-driven through the fixed query, or any other list of records) run as one batch of
 * the shard's partition, inside the normal exactly-once protocol, so a stateful source stage
 * applies them to the shard's own state (a separate partition would start from empty state).
 *
 *   1. The run's records are stored in the ledger (checkpoint table, pk `${query}#redrive`):
 *      page items `page#<run>#<n>` (a JSON list cut into pieces under DynamoDB's item size), and
 *      the run item `run#<run>` gets their count. `<run>` is `<shard>@redrive:<id>`.
 *   2. The batch is planned as batch N+1 of the shard's partition, after its last committed batch
 *      N: its offset keeps the shard's committed sequence number and carries `redrive: {run,
 *      count}`, so the next batch reads the shard on from where N ended. The offset entry's put
 *      is conditional (no N+1 yet), in one transaction with a check that the run is still open
 *      and one that the shard is not finished (its watermark row not `closed`: the reshard guard
 *      marks it before seeding the children from the shard's final state, then reads the offset
 *      log again, lib/aws/reshard-guard.ts). So a batch either lands before the mark (the children
 *      wait for its commit and the seed carries it) or is refused (PARTITION_FINISHED; the run
 *      moves to the open descendants), never in a state nobody reads again.
 *   3. Whoever finds the batch planned and not committed runs it with the ledger's records: this
 *      process at once, or the live Kinesis handler or the scheduled function on that shard if this
 *      process dies (shard-invocation.ts, `ensurePendingBatchRecords`). A process that died after 1's
 *      records were stored and before 2's plan: the scheduled function and the live Kinesis handler
 *      (rate-limited) plan and run the run (`storedRuns`), as would the next re-drive; if the shard
 *      finished (closed by a reshard) first, the next re-drive moves the run to its open descendants
 *      (through-query-redrive.ts).
 *   4. Its commit transaction marks the run `done` (with the batch id), so a run is applied once:
 *      a run not done either is the partition's pending batch (it is the latest offset entry: no
 *      batch is planned before the one pending commits) or was never planned, and planning it
 *      again is refused once it is done.
 *
 * A live handler racing this process plans or commits the same batch id: one of them loses the
 * conditional write, and its retry finds the other's batch (the re-run is identical).
 * Re-driven rows behind the watermark are late rows, dropped by the stateful operators as Spark
 * drops late input; the progress of the batch counts them.
 */
import { ConditionalCheckFailedException, GetItemCommand, PutItemCommand, UpdateItemCommand, type DynamoDBClient, type TransactWriteItem } from '@aws-sdk/client-dynamodb';
import type { OffsetSeq } from '../checkpoint/checkpoint.js';
import type { CostMeter } from '../core/cost-meter.js';
import { CheckpointError } from '../errors/sluice-error.js';
import type { CompiledQuery } from '../query/compiled-query.js';
import type { PartitionBackends, RedriveLedger } from '../query/partition-backends.js';
import type { QueryStage } from '../query/query-stage.js';
import { runShardInvocation } from '../query/shard-invocation.js';
import type { StreamingQueryProgress } from '../runtime/progress.js';
import { totalRowsDroppedByWatermark } from '../runtime/progress-figures.js';
import { asKinesisOffset, redriveRunOf, type ShardRecord } from '../sources/kinesis-shard-source.js';
import { REDRIVE_KEY_MARK } from '../sources/repartition-records.js';
import type { DynamoDbCommitSideWrite } from './dynamodb-checkpoint.js';
import { batchWriteAll, queryAll, type Item } from './dynamodb-cost.js';

export const REDRIVE_LEDGER_SUFFIX = '#redrive';
export const RUN_PREFIX = 'run#';
const PAGE_PREFIX = 'page#';
/** Characters of the records' JSON per page item (DynamoDB items hold 400 KB). */
const PAGE_CHARS = 300_000;

export const ledgerPk = (query: string): string => `${query}${REDRIVE_LEDGER_SUFFIX}`;
export const runKey = (shardId: string, runId: string): string => `${shardId}${REDRIVE_KEY_MARK}${runId}`;

/** The run item of a re-drive batch's run. */
function runItemKey(query: string, run: string): Item {
  return { pk: { S: ledgerPk(query) }, sk: { S: `${RUN_PREFIX}${run}` } };
}

const pageSk = (run: string, page: number): string => `${PAGE_PREFIX}${run}#${String(page).padStart(4, '0')}`;

/** The ledger of a query's re-drive batches in the checkpoint table: what the handlers read. */
export class DynamoDbRedriveLedger implements RedriveLedger {
  constructor(private readonly client: DynamoDBClient, private readonly table: string, private readonly query: string, private readonly meter?: CostMeter) {}

  async records(run: string): Promise<ShardRecord[]> {
    const pages = await queryAll(this.client, {
      TableName: this.table, KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)', ConsistentRead: true,
      ExpressionAttributeValues: { ':pk': { S: ledgerPk(this.query) }, ':p': { S: `${PAGE_PREFIX}${run}#` } },
    }, this.meter);
    // None: the run was done and its records removed after another writer committed it (a retry sees the commit).
    if (pages.length === 0) throw new Error(`re-drive run ${run}: no records in the ledger (${ledgerPk(this.query)}); committed and removed already?`);
    return JSON.parse(pages.map((p) => p.text!.S!).join('')) as ShardRecord[];
  }

  async storedRuns(shardId: string): Promise<string[]> {
    const runs = await queryAll(this.client, {
      TableName: this.table, KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)', ConsistentRead: true,
      FilterExpression: '#state = :open AND attribute_exists(#count)', ExpressionAttributeNames: { '#state': 'state', '#count': 'count' },
      ExpressionAttributeValues: { ':pk': { S: ledgerPk(this.query) }, ':p': { S: `${RUN_PREFIX}${runKey(shardId, '')}` }, ':open': { S: 'open' } },
    }, this.meter);
    return runs.map((r) => r.sk!.S!.slice(RUN_PREFIX.length)).sort();
  }

  doneWrite(run: string, batchId: number): DynamoDbCommitSideWrite {
    return {
      description: `re-drive run ${run} done`, optional: false,
      item: {
        Update: {
          TableName: this.table, Key: runItemKey(this.query, run),
          UpdateExpression: 'SET #state = :done, batchId = :b, doneAtMs = :t', ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: { ':done': { S: 'done' }, ':b': { N: String(batchId) }, ':t': { N: String(Date.now()) } },
        },
      },
    };
  }
}

/**
 * The checkpoint's plan condition (DynamoDbCheckpointOptions.planCondition): a re-drive batch is
 * planned only while its run is open. (A no-data batch right after it repeats its offset: not a
 * re-drive batch, no condition.)
 */
export function redrivePlanCondition(table: string, query: string) {
  return async (entry: OffsetSeq, previous: () => Promise<OffsetSeq | undefined>): Promise<TransactWriteItem | undefined> => {
    const marked = Object.entries(entry.offsets).filter(([, o]) => asKinesisOffset(o)?.redrive);
    if (marked.length === 0) return undefined;
    const before = await previous();
    const run = marked.map(([name, end]) => redriveRunOf(before?.offsets[name] ?? null, end)).find((r) => r !== null);
    if (!run) return undefined;
    return {
      ConditionCheck: {
        TableName: table, Key: runItemKey(query, run.run), ConditionExpression: '#state = :open',
        ExpressionAttributeNames: { '#state': 'state' }, ExpressionAttributeValues: { ':open': { S: 'open' } },
      },
    };
  };
}

export interface RunItem {
  readonly state: 'open' | 'done';
  readonly count?: number;
  readonly batchId?: number;
}

export async function readRunItem(client: DynamoDBClient, table: string, query: string, run: string): Promise<RunItem | undefined> {
  const out = await client.send(new GetItemCommand({ TableName: table, Key: runItemKey(query, run), ConsistentRead: true }));
  if (!out.Item) return undefined;
  return {
    state: out.Item.state?.S === 'done' ? 'done' : 'open',
    ...(out.Item.count?.N ? { count: Number(out.Item.count.N) } : {}),
    ...(out.Item.batchId?.N ? { batchId: Number(out.Item.batchId.N) } : {}),
  };
}

/**
 * Stores a run's records in the ledger (pages, then their count on the run item, created open if
 * absent). Idempotent: the same records give the same pages. Refused for a run already done.
 */
export async function storeRedriveRecords(client: DynamoDBClient, table: string, query: string, run: string, records: readonly ShardRecord[]): Promise<void> {
  const text = JSON.stringify(records);
  const pages = Math.max(1, Math.ceil(text.length / PAGE_CHARS));
  for (let i = 0; i < pages; i++) {
    await client.send(new PutItemCommand({
      TableName: table, Item: { pk: { S: ledgerPk(query) }, sk: { S: pageSk(run, i) }, text: { S: text.slice(i * PAGE_CHARS, (i + 1) * PAGE_CHARS) } },
    }));
  }
  await client.send(new UpdateItemCommand({
    TableName: table, Key: runItemKey(query, run),
    UpdateExpression: 'SET #count = :n, pages = :p, #state = if_not_exists(#state, :open), openedAtMs = if_not_exists(openedAtMs, :t)',
    ConditionExpression: 'attribute_not_exists(#state) OR #state = :open',
    ExpressionAttributeNames: { '#count': 'count', '#state': 'state' },
    ExpressionAttributeValues: { ':n': { N: String(records.length) }, ':p': { N: String(pages) }, ':open': { S: 'open' }, ':t': { N: String(Date.now()) } },
  })).catch((error: unknown) => {
    if (error instanceof ConditionalCheckFailedException) throw new Error(`re-drive run ${run} is done already: its records are not stored again`);
    throw error;
  });
}

/** Removes a done run's records from the ledger (they are raw input, kept no longer than needed). */
export async function deleteRedriveRecords(client: DynamoDBClient, table: string, query: string, run: string): Promise<void> {
  const keys = await queryAll(client, {
    TableName: table, KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)', ProjectionExpression: 'pk, sk',
    ExpressionAttributeValues: { ':pk': { S: ledgerPk(query) }, ':p': { S: `${PAGE_PREFIX}${run}#` } },
  }, undefined);
  await batchWriteAll(client, table, keys.map((k) => ({ DeleteRequest: { Key: { pk: k.pk!, sk: k.sk! } } })), undefined);
}

export interface RedriveBatchRunner {
  readonly client: DynamoDBClient;
  readonly table: string;
  readonly compiled: CompiledQuery;
  readonly stage: QueryStage;
  /** The shard's partition backends (with the re-drive ledger and the plan condition). */
  forPartition(shardId: string): PartitionBackends;
  /** Invocations at most before giving up (each runs a pending batch, then the run's). */
  readonly maxInvocations?: number;
}

export interface RedriveBatchOutcome {
  readonly run: string;
  readonly records: number;
  /** The batch id it committed as on the shard's partition. */
  readonly batchId: number;
  /** This process ran the commit; false: another writer (a live handler, an earlier re-drive) did. */
  readonly committedHere: boolean;
  /** Re-driven rows behind the watermark, dropped as late (null: the batch ran elsewhere). */
  readonly lateRows: number | null;
  /** Re-driven records the query refused again (dead-lettered under the run's id), when it ran here. */
  readonly deadLettered: number | null;
  readonly batches: number;
}

/**
 * Runs `records` (any origin; sequence numbers are set to their places 1..n) as re-drive run
 * `run` on shard `shardId`'s own partition, exactly once: stores them in the ledger, plans their
 * batch, runs it (after any pending batch of the shard), and returns when the run is done, by
 * whichever writer. Calling it again for an open run finishes it; for a done run, it only reports.
 */
export async function runRedriveBatch(runner: RedriveBatchRunner, shardId: string, run: string, records: readonly ShardRecord[]): Promise<RedriveBatchOutcome> {
  const query = runner.compiled.name;
  const numbered = records.map((r, i) => ({ ...r, sequenceNumber: String(i + 1) }));
  let item = await readRunItem(runner.client, runner.table, query, run);
  // Once stored, a run's records are the ones its batch may be planned with: never replaced.
  if (item?.state !== 'done' && item?.count === undefined) await storeRedriveRecords(runner.client, runner.table, query, run, numbered);
  else if (item.state !== 'done' && item.count !== numbered.length) {
    throw new Error(`re-drive run ${run}: the ledger holds ${item.count} record(s) for it, not ${numbered.length}`);
  }
  let batches = 0;
  let ours: StreamingQueryProgress | undefined;
  const limit = runner.maxInvocations ?? 20;
  for (let invocation = 0; ; invocation++) {
    item = await readRunItem(runner.client, runner.table, query, run);
    if (item?.state === 'done') break;
    if (invocation >= limit) throw new Error(`re-drive run ${run}: not committed after ${invocation} invocations (run again to resume it)`);
    const result = await runShardInvocation(runner.compiled, {
      shardId, records: [], stage: runner.stage, maxBatches: 2, redrive: { run, records: numbered },
    }, runner.forPartition(shardId));
    batches += result.progress.length;
    ours = result.progress.find((p) => isBatchOf(p, run)) ?? ours;
    if (result.error && !isLostRace(result.error)) throw new Error(`re-drive run ${run} on ${shardId} failed (run again to resume it): ${result.error.message}`, { cause: result.error });
    // A lost race: the other writer's batch is pending or committed; the next invocation sees it.
    if (result.error) await new Promise((resolve) => setTimeout(resolve, 50 * (invocation + 1)));
  }
  return {
    run, records: records.length, batchId: item.batchId ?? -1, committedHere: ours !== undefined, batches,
    lateRows: ours ? totalRowsDroppedByWatermark(ours) : null,
    deadLettered: ours ? ours.numDeadLetteredRows : null,
  };
}

function isBatchOf(progress: StreamingQueryProgress, run: string): boolean {
  return progress.sources.some((s) => redriveRunOf(s.startOffset as never, s.endOffset as never)?.run === run);
}

/** The conditional writes decided against this writer: another one planned or committed the batch. */
function isLostRace(error: Error): boolean {
  const code = error instanceof CheckpointError ? error.code : (error.cause instanceof CheckpointError ? error.cause.code : undefined);
  return code === 'CONCURRENT_QUERY' || code === 'PLAN_CONDITION_FAILED';
}

/** The plan was refused by its fence: the shard's partition is finished (lib/aws/dynamodb-checkpoint.ts `planFence`). */
export function isPartitionFinished(error: unknown): boolean {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    if ((e as { code?: unknown }).code === 'PARTITION_FINISHED') return true;
  }
  return false;
}
