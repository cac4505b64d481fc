/**
 * A query's namespaces: which one is live, and the replay (shadow) being built beside it.
 *
 * Every checkpoint, state and watermark item of a query is keyed by a namespace (`${ns}#...`). A
 * query starts in the namespace named after itself. `sluice replay start` adds a shadow namespace
 * (`${query}@${runId}`) that recomputes the query from an earlier stream position into its own sink
 * location; `sluice replay cutover` makes it the live one in one conditional write. The pointer is
 * one item of the checkpoint table, `pk = ${query}#namespace, sk = active`:
 *
 *   active       the live namespace (no item: the query's own name)
 *   activeSink   JSON NamespaceLocation: where the live namespace's sink writes
 *   shadowNs     the shadow's namespace, while a replay runs
 *   shadow       JSON ShadowRun
 *   retired      JSON NamespaceLocation[]: namespaces cut over from, kept for rollback
 *   aborted      JSON AbortedRun[]: aborted shadows not swept yet (`sluice replay sweep`)
 *
 * The handlers read the pointer at the start of each invocation (one strongly consistent GetItem),
 * and once it exists every commit carries a ConditionCheck on it (`namespaceFence`): a writer that
 * read the pointer before a cutover or an abort cannot commit into a namespace that is no longer
 * live or shadow, so the retired namespace stops exactly where the cutover found it.
 */
import {
  ConditionalCheckFailedException, GetItemCommand, QueryCommand, TransactionCanceledException, TransactWriteItemsCommand, UpdateItemCommand,
  type DynamoDBClient, type TransactWriteItem,
} from '@aws-sdk/client-dynamodb';
import type { CostMeter } from '../core/cost-meter.js';
import { IllegalArgumentError, StreamingQueryError } from '../errors/sluice-error.js';
import { meterUnits, readUnitsFor, itemSize, type Item } from './dynamodb-cost.js';
import { CHECKPOINT_ITEMS, padId } from './tables.js';

export const NAMESPACE_POINTER = { pkSuffix: '#namespace', sk: 'active' } as const;

/** Where a namespace's sink writes (unset fields: the deployment's own). */
export interface NamespaceLocation {
  readonly namespace: string;
  /** S3 sinks: the key prefix. */
  readonly sinkPrefix?: string;
  /** DynamoDB sink: the table. */
  readonly sinkTable?: string;
  /** In `retired`: when the cutover retired it (a rollback needs the stream to still hold what came since). */
  readonly retiredAtMs?: number;
}

export interface ShadowRun extends NamespaceLocation {
  readonly runId: string;
  /** Each shard is read from its first record at or after this time (AT_TIMESTAMP). */
  readonly fromMs: number;
  readonly startedAtMs: number;
  /**
   * Who runs the shadow's batches: the deployed scheduled function (the deployed code is the fixed
   * query), or `sluice replay run --query-module` (the fixed query is not deployed yet).
   */
  readonly drivenBy: 'scheduled-function' | 'cli';
  /**
   * A retired namespace made the shadow again (`sluice replay rollback`): it resumes from its own
   * checkpoint (`fromMs` 0: a shard it never committed is read from its oldest record), and an abort
   * forgets it without deleting anything of it.
   */
  readonly rollback?: boolean;
}

/** A replay `abort` forgot: what a batch in flight during the abort may still have written. */
export interface AbortedRun extends NamespaceLocation {
  readonly runId: string;
  readonly abortedAtMs: number;
}

export interface NamespacePointer {
  readonly active: NamespaceLocation;
  /** Aborted runs not yet swept (`sluice replay sweep`), oldest first. */
  readonly aborted: readonly AbortedRun[];
  readonly shadow: ShadowRun | null;
  readonly retired: readonly NamespaceLocation[];
  /** False before the query's first replay: then no commit carries the fence. */
  readonly exists: boolean;
}

export class ReplayError extends StreamingQueryError {}

const keyOf = (query: string): Item => ({ pk: { S: `${query}${NAMESPACE_POINTER.pkSuffix}` }, sk: { S: NAMESPACE_POINTER.sk } });
export const namespacePointerKey = keyOf;

/**
 * Set by the first `replay start` on the latest commit item of every live partition: a writer that
 * read no pointer (it began before the start) checks its previous commit lacks it, so it cannot
 * commit once the start has passed (lib/aws/dynamodb-checkpoint.ts).
 */
export const REPLAY_FENCE_ATTRIBUTE = 'replayFence';

export const shadowNamespaceOf = (query: string, runId: string): string => `${query}@${runId}`;

/**
 * Inside the sink's prefix, so the functions' S3 grants (`<prefix>*`) cover it, under a folder
 * starting with `_`, which the sink readers, compaction, Athena/Glue and Spark treat as hidden:
 * no reader of the live prefix sees the shadow's objects.
 */
export function shadowSinkPrefix(basePrefix: string, runId: string): string {
  return `${basePrefix.replace(/\/+$/, '')}/_replay/${runId}/`;
}

export async function readNamespacePointer(client: DynamoDBClient, table: string, query: string, meter?: CostMeter): Promise<NamespacePointer> {
  const out = await client.send(new GetItemCommand({ TableName: table, Key: keyOf(query), ConsistentRead: true, ReturnConsumedCapacity: 'TOTAL' }));
  meterUnits(meter, 'read', out.ConsumedCapacity, () => readUnitsFor(out.Item ? itemSize(out.Item) : 0));
  const item = out.Item;
  if (!item) return { active: { namespace: query }, shadow: null, retired: [], aborted: [], exists: false };
  const json = <T>(name: string, fallback: T): T => (item[name]?.S ? JSON.parse(item[name].S) as T : fallback);
  return {
    active: json<NamespaceLocation>('activeSink', { namespace: item.active?.S ?? query }),
    shadow: item.shadowNs?.S ? json<ShadowRun | null>('shadow', null) : null,
    retired: json<NamespaceLocation[]>('retired', []),
    aborted: json<AbortedRun[]>('aborted', []),
    exists: true,
  };
}

/**
 * The ConditionCheck a commit in `namespace` carries once the pointer exists: the namespace is
 * still the live one or the shadow. A refused commit fails the invocation, which is retried and
 * then reads the new pointer.
 */
export function namespaceFence(table: string, query: string, namespace: string): TransactWriteItem {
  return {
    ConditionCheck: {
      TableName: table, Key: keyOf(query),
      ConditionExpression: 'active = :ns OR shadowNs = :ns',
      ExpressionAttributeValues: { ':ns': { S: namespace } },
    },
  };
}

/** Records the shadow; refused while another replay of the query runs. */
export async function startShadow(client: DynamoDBClient, table: string, query: string, run: ShadowRun, live: NamespaceLocation): Promise<void> {
  try {
    await client.send(new UpdateItemCommand({
      TableName: table, Key: keyOf(query),
      UpdateExpression: 'SET shadowNs = :ns, shadow = :run, active = if_not_exists(active, :query), activeSink = if_not_exists(activeSink, :live)',
      ConditionExpression: 'attribute_not_exists(shadowNs)',
      ExpressionAttributeValues: {
        ':ns': { S: run.namespace }, ':run': { S: JSON.stringify(run) }, ':query': { S: query }, ':live': { S: JSON.stringify(live) },
      },
    }));
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) throw error;
    const current = await readNamespacePointer(client, table, query);
    throw new ReplayError(`A replay of '${query}' is already running (run ${current.shadow?.runId ?? '?'}, from ${
      current.shadow ? new Date(current.shadow.fromMs).toISOString() : '?'}).`, {
      code: 'REPLAY_ALREADY_RUNNING', hint: `finish it (\`sluice replay cutover ${query}\`) or remove it (\`sluice replay abort ${query}\`) first.`,
    });
  }
}

/** The live partition whose next commit would move it past what the shadow has read. */
export interface LiveCommitGuard {
  /** The live partition's checkpoint pk, `${namespace}#${partitionId}`. */
  readonly pk: string;
  /** The sort key of the live partition's next commit (`commit#<latest + 1>`). */
  readonly nextCommitSk: string;
}

/**
 * Makes the shadow the live namespace, in one transaction: the pointer moves only if `runId` is
 * still the shadow and no live partition committed past what `status` saw (each `guards` entry);
 * the old live namespace is kept, retired, for rollback. False when a live commit came in between
 * (read the positions again).
 */
export async function cutoverShadow(
  client: DynamoDBClient, table: string, query: string, pointer: NamespacePointer, runId: string, guards: readonly LiveCommitGuard[],
  nowMs = Date.now(),
): Promise<boolean> {
  const shadow = pointer.shadow;
  if (!shadow || shadow.runId !== runId) throw new ReplayError(`No replay run ${runId} of '${query}' to cut over to.`, { code: 'REPLAY_NOT_FOUND' });
  if (guards.length > 99) {
    throw new IllegalArgumentError(`A cutover checks every live partition in one transaction (at most 99); '${query}' has ${guards.length}.`, { code: 'REPLAY_TOO_MANY_PARTITIONS' });
  }
  const location: NamespaceLocation = {
    namespace: shadow.namespace, ...(shadow.sinkPrefix ? { sinkPrefix: shadow.sinkPrefix } : {}), ...(shadow.sinkTable ? { sinkTable: shadow.sinkTable } : {}),
  };
  const items: TransactWriteItem[] = [
    {
      Update: {
        TableName: table, Key: keyOf(query),
        UpdateExpression: 'SET active = :ns, activeSink = :loc, retired = :retired REMOVE shadowNs, shadow',
        ConditionExpression: 'shadowNs = :ns AND active = :live',
        ExpressionAttributeValues: {
          ':ns': { S: shadow.namespace }, ':loc': { S: JSON.stringify(location) }, ':live': { S: pointer.active.namespace },
          // A rollback's shadow leaves the retired list (it is live again); newest first.
          ':retired': { S: JSON.stringify([{ ...pointer.active, retiredAtMs: nowMs }, ...pointer.retired.filter((r) => r.namespace !== shadow.namespace)]) },
        },
      },
    },
    ...guards.map((g): TransactWriteItem => ({
      ConditionCheck: { TableName: table, Key: { pk: { S: g.pk }, sk: { S: g.nextCommitSk } }, ConditionExpression: 'attribute_not_exists(pk)' },
    })),
  ];
  try {
    await client.send(new TransactWriteItemsCommand({ TransactItems: items }));
    return true;
  } catch (error) {
    if (!(error instanceof TransactionCanceledException)) throw error;
    const reasons = (error.CancellationReasons ?? []).map((r) => r.Code ?? 'None');
    if (reasons[0] === 'ConditionalCheckFailed') {
      throw new ReplayError(`The replay run ${runId} of '${query}' was cut over or aborted meanwhile.`, { code: 'REPLAY_NOT_FOUND' });
    }
    if (reasons.some((r) => r === 'ConditionalCheckFailed' || r === 'TransactionConflict')) return false;
    throw error;
  }
}

/**
 * Forgets the shadow (its items are deleted by the caller); refused when `runId` is not the shadow.
 * With `aborted` (not a rollback's shadow), records it among the aborted runs, so that
 * `sluice replay sweep` deletes once more what a batch in flight during the abort wrote after it.
 */
export async function dropShadow(
  client: DynamoDBClient, table: string, query: string, runId: string, namespace: string, aborted?: { pointer: NamespacePointer; run: AbortedRun },
): Promise<void> {
  try {
    await client.send(new UpdateItemCommand({
      TableName: table, Key: keyOf(query),
      UpdateExpression: aborted ? 'SET aborted = :aborted REMOVE shadowNs, shadow' : 'REMOVE shadowNs, shadow',
      // The aborted list as read: a sweep that changed it meanwhile makes this abort read it again.
      ConditionExpression: aborted
        ? (aborted.pointer.aborted.length === 0 ? 'shadowNs = :ns AND attribute_not_exists(aborted)' : 'shadowNs = :ns AND aborted = :was')
        : 'shadowNs = :ns',
      ExpressionAttributeValues: {
        ':ns': { S: namespace },
        ...(aborted ? { ':aborted': { S: JSON.stringify([...aborted.pointer.aborted, aborted.run]) } } : {}),
        ...(aborted && aborted.pointer.aborted.length > 0 ? { ':was': { S: JSON.stringify(aborted.pointer.aborted) } } : {}),
      },
    }));
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException) throw new ReplayError(`No replay run ${runId} of '${query}' to abort.`, { code: 'REPLAY_NOT_FOUND' });
    throw error;
  }
}

/** Drops swept runs from the aborted list; false when the list changed meanwhile (read again). */
export async function forgetAbortedRuns(client: DynamoDBClient, table: string, query: string, pointer: NamespacePointer, swept: readonly string[]): Promise<boolean> {
  const left = pointer.aborted.filter((r) => !swept.includes(r.runId));
  try {
    await client.send(new UpdateItemCommand({
      TableName: table, Key: keyOf(query), UpdateExpression: 'SET aborted = :left', ConditionExpression: 'aborted = :was',
      ExpressionAttributeValues: { ':left': { S: JSON.stringify(left) }, ':was': { S: JSON.stringify(pointer.aborted) } },
    }));
    return true;
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException) return false;
    throw error;
  }
}

/**
 * Fences off the writers that read no pointer (they began before the first `replay start`): marks
 * each of the namespace's partitions' watermark row and latest commit with REPLAY_FENCE_ATTRIBUTE,
 * and again while a newer commit appeared meanwhile. Their next commit checks that its previous one is not
 * marked; a first commit (batch 0) checks the pointer is absent. Answers the partitions marked.
 */
export async function fenceUnfencedWriters(
  client: DynamoDBClient, table: string, namespace: string, partitions: readonly string[], runId: string,
): Promise<number> {
  let marked = 0;
  for (const partition of partitions) {
    const pk = `${namespace}#${partition}`;
    // The row first: a commit that proves N-1 on its watermark row instead of checking commit N-1
    // falls back to that check once the row is marked (lib/aws/dynamodb-checkpoint.ts).
    await client.send(new UpdateItemCommand({
      TableName: table, Key: { pk: { S: `${namespace}${CHECKPOINT_ITEMS.watermarksSuffix}` }, sk: { S: partition } }, UpdateExpression: 'SET #fence = :run',
      ConditionExpression: 'attribute_exists(pk)', ExpressionAttributeNames: { '#fence': REPLAY_FENCE_ATTRIBUTE }, ExpressionAttributeValues: { ':run': { S: runId } },
    })).catch((error: unknown) => { if (!(error instanceof ConditionalCheckFailedException)) throw error; });
    const latest = await client.send(new QueryCommand({
      TableName: table, KeyConditionExpression: 'pk = :pk AND begins_with(sk, :c)', ScanIndexForward: false, Limit: 1, ConsistentRead: true,
      ExpressionAttributeValues: { ':pk': { S: pk }, ':c': { S: CHECKPOINT_ITEMS.commitPrefix } }, ProjectionExpression: 'sk',
    }));
    let sk = latest.Items?.[0]?.sk?.S;
    while (sk !== undefined) {
      await client.send(new UpdateItemCommand({
        TableName: table, Key: { pk: { S: pk }, sk: { S: sk } }, UpdateExpression: 'SET #fence = :run',
        ConditionExpression: 'attribute_exists(pk)', ExpressionAttributeNames: { '#fence': REPLAY_FENCE_ATTRIBUTE }, ExpressionAttributeValues: { ':run': { S: runId } },
      }));
      // A commit that won the race against the mark: mark it too (it was the last one such a writer could make).
      const next = `${CHECKPOINT_ITEMS.commitPrefix}${padId(Number(sk.slice(CHECKPOINT_ITEMS.commitPrefix.length)) + 1)}`;
      const found = await client.send(new GetItemCommand({ TableName: table, Key: { pk: { S: pk }, sk: { S: next } }, ConsistentRead: true, ProjectionExpression: 'sk' }));
      sk = found.Item ? next : undefined;
      if (!found.Item) marked++;
    }
  }
  return marked;
}
