/**
 * One spill collector at a time per query, and the scheduled one at most once per interval: one
 * item of the checkpoint table, `pk = <query>#spill-gc, sk = lease`, with `leaseUntil` (a run
 * holds it until then, and stops its deletes before) and `lastRunAt` (when a run last finished).
 *
 * Mutual exclusion is what keeps a stale run from deleting an object that a writer re-created
 * after another run deleted it and its tombstone (lib/aws/dynamodb-spill.ts).
 *
 * A run stopped within its scan leaves `scanProgress` (JSON) and no `lastRunAt`: the next run
 * that takes the lease continues that scan, however soon (lib/aws/dynamodb-spill-gc.ts says why a
 * continued scan judges safely). A run that ends without it removes it.
 */
import { ConditionalCheckFailedException, UpdateItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { randomUUID } from 'node:crypto';
import type { SpillScanProgress } from './dynamodb-spill-gc.js';

export interface SpillGcLease {
  readonly holder: string;
  readonly until: number;
  /** Where the last run's scan stopped, when it did. */
  readonly progress?: SpillScanProgress;
}

/** The most progress kept in the lease item (an item holds 400 KB); a larger one is dropped and the next scan starts over. */
export const MAX_PROGRESS_BYTES = 300_000;

const keyOf = (query: string) => ({ pk: { S: `${query}#spill-gc` }, sk: { S: 'lease' } });

/**
 * Takes the lease until `nowMs + durationMs`; null when another run holds it, or when a run
 * finished less than `minIntervalMs` ago.
 */
export async function claimSpillGcLease(
  client: DynamoDBClient, table: string, query: string, nowMs: number, durationMs: number, minIntervalMs = 0,
): Promise<SpillGcLease | null> {
  const lease = { holder: randomUUID(), until: nowMs + durationMs };
  try {
    const claimed = await client.send(new UpdateItemCommand({
      TableName: table, Key: keyOf(query),
      UpdateExpression: 'SET leaseUntil = :until, holder = :holder',
      // On demand (no interval) only another holder refuses the run.
      ConditionExpression: `(attribute_not_exists(leaseUntil) OR leaseUntil < :now)${minIntervalMs > 0 ? ' AND (attribute_not_exists(lastRunAt) OR lastRunAt <= :due)' : ''}`,
      ExpressionAttributeValues: {
        ':until': { N: String(lease.until) }, ':holder': { S: lease.holder }, ':now': { N: String(nowMs) },
        ...(minIntervalMs > 0 ? { ':due': { N: String(nowMs - minIntervalMs) } } : {}),
      },
      ReturnValues: 'ALL_OLD',
    }));
    const progress = claimed.Attributes?.scanProgress?.S;
    return progress ? { ...lease, progress: JSON.parse(progress) as SpillScanProgress } : lease;
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException || (error as { name?: string }).name === 'ConditionalCheckFailedException') return null;
    throw error;
  }
}

/**
 * Ends the run. With `progress` (its scan stopped before the end) it keeps that for the next run
 * and records no run, so the next tick continues the scan; else it records when the run ended. A
 * progress too large to keep is dropped and the run recorded, so a scan that cannot be continued
 * is not started again at every tick (collect it with `sluice spill gc`).
 */
export async function releaseSpillGcLease(
  client: DynamoDBClient, table: string, query: string, lease: SpillGcLease, nowMs: number, progress?: SpillScanProgress,
): Promise<void> {
  const kept = progress ? JSON.stringify(progress) : undefined;
  const resumable = kept !== undefined && Buffer.byteLength(kept) <= MAX_PROGRESS_BYTES;
  try {
    await client.send(new UpdateItemCommand({
      TableName: table, Key: keyOf(query),
      UpdateExpression: resumable ? 'SET scanProgress = :progress REMOVE leaseUntil, holder' : 'SET lastRunAt = :now REMOVE leaseUntil, holder, scanProgress',
      ConditionExpression: 'holder = :holder',
      ExpressionAttributeValues: { ':holder': { S: lease.holder }, ...(resumable ? { ':progress': { S: kept } } : { ':now': { N: String(nowMs) } }) },
    }));
  } catch (error) {
    // The lease ran out and another run took it: that run's record stands.
    if (error instanceof ConditionalCheckFailedException || (error as { name?: string }).name === 'ConditionalCheckFailedException') return;
    throw error;
  }
}
