/**
 * One spill collector at a time per query, and the scheduled one at most once per interval: one
 * item of the checkpoint table, `pk = <query>#spill-gc, sk = lease`, with `leaseUntil` (a run
 * holds it until then, and stops its deletes before) and `lastRunAt` (when a run last finished).
 *
 * Mutual exclusion is what keeps a stale run from deleting an object that a writer re-created
 * after another run deleted it and its tombstone (lib/aws/dynamodb-spill.ts).
 */
import { ConditionalCheckFailedException, UpdateItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { randomUUID } from 'node:crypto';

export interface SpillGcLease {
  readonly holder: string;
  readonly until: number;
}

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
    await client.send(new UpdateItemCommand({
      TableName: table, Key: keyOf(query),
      UpdateExpression: 'SET leaseUntil = :until, holder = :holder',
      // On demand (no interval) only another holder refuses the run.
      ConditionExpression: `(attribute_not_exists(leaseUntil) OR leaseUntil < :now)${minIntervalMs > 0 ? ' AND (attribute_not_exists(lastRunAt) OR lastRunAt <= :due)' : ''}`,
      ExpressionAttributeValues: {
        ':until': { N: String(lease.until) }, ':holder': { S: lease.holder }, ':now': { N: String(nowMs) },
        ...(minIntervalMs > 0 ? { ':due': { N: String(nowMs - minIntervalMs) } } : {}),
      },
    }));
    return lease;
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException || (error as { name?: string }).name === 'ConditionalCheckFailedException') return null;
    throw error;
  }
}

/**
 * Ends the run and records when: a run stopped by its deadline counts too, so a table too large to
 * scan in one invocation is not scanned again at every tick (collect it with `sluice spill gc`).
 */
export async function releaseSpillGcLease(
  client: DynamoDBClient, table: string, query: string, lease: SpillGcLease, nowMs: number,
): Promise<void> {
  try {
    await client.send(new UpdateItemCommand({
      TableName: table, Key: keyOf(query),
      UpdateExpression: 'SET lastRunAt = :now REMOVE leaseUntil, holder',
      ConditionExpression: 'holder = :holder',
      ExpressionAttributeValues: { ':holder': { S: lease.holder }, ':now': { N: String(nowMs) } },
    }));
  } catch (error) {
    // The lease ran out and another run took it: that run's record stands.
    if (error instanceof ConditionalCheckFailedException || (error as { name?: string }).name === 'ConditionalCheckFailedException') return;
    throw error;
  }
}
