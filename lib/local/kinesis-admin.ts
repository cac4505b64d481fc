/**
 * Small Kinesis administration helpers for local development and the integration tests: create a
 * stream and wait until it is ACTIVE, put records in PutRecords batches of 500 (retrying the entries
 * Kinesis rejected), list every shard (paginated) and split a shard at its hash-range midpoint.
 *
 * They work against AWS itself as well as kinesis-mock / LocalStack.
 */
import {
  CreateStreamCommand,
  DeleteStreamCommand,
  DescribeStreamSummaryCommand,
  PutRecordsCommand,
  ResourceInUseException,
  ResourceNotFoundException,
  SplitShardCommand,
  UpdateShardCountCommand,
  MergeShardsCommand,
  type KinesisClient,
  type PutRecordsRequestEntry,
  type Shard,
} from '@aws-sdk/client-kinesis';

import { listStreamShards } from '../aws/kinesis-shard-reader.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface WaitOptions {
  /** Give up after this many milliseconds (default 30 000). */
  readonly timeoutMs?: number;
  /** Milliseconds between DescribeStreamSummary calls (default 100). */
  readonly intervalMs?: number;
}

/** Polls DescribeStreamSummary until the stream is ACTIVE; throws on timeout. */
export async function waitForStreamActive(kinesis: KinesisClient, streamName: string, options: WaitOptions = {}): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  let last = 'unknown';
  for (;;) {
    try {
      const summary = await kinesis.send(new DescribeStreamSummaryCommand({ StreamName: streamName }));
      last = summary.StreamDescriptionSummary?.StreamStatus ?? 'unknown';
      if (last === 'ACTIVE') return;
    } catch (error) {
      if (!(error instanceof ResourceNotFoundException)) throw error;
      last = 'not found';
    }
    if (Date.now() >= deadline) throw new Error(`Kinesis stream ${streamName} is not ACTIVE after ${options.timeoutMs ?? 30_000} ms (status: ${last})`);
    await sleep(options.intervalMs ?? 100);
  }
}

/**
 * Creates a provisioned stream with `shardCount` shards and waits until it is ACTIVE. A stream that
 * already exists is not an error: the call just waits for it.
 */
export async function createStreamAndWait(
  kinesis: KinesisClient, streamName: string, shardCount = 1, options: WaitOptions = {},
): Promise<void> {
  try {
    await kinesis.send(new CreateStreamCommand({ StreamName: streamName, ShardCount: shardCount }));
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
  }
  await waitForStreamActive(kinesis, streamName, options);
}

/** Deletes a stream (and its consumers); a missing stream is not an error. Does not wait. */
export async function deleteStream(kinesis: KinesisClient, streamName: string): Promise<void> {
  try {
    await kinesis.send(new DeleteStreamCommand({ StreamName: streamName, EnforceConsumerDeletion: true }));
  } catch (error) {
    if (!(error instanceof ResourceNotFoundException)) throw error;
  }
}

/** Every shard of the stream, open and closed, following ListShards pagination. */
export const listAllShards = listStreamShards;

/** True when the shard is closed (it has an ending sequence number: it was split or merged). */
export function isShardClosed(shard: Shard): boolean {
  return shard.SequenceNumberRange?.EndingSequenceNumber !== undefined;
}

export interface PutRecordInput {
  readonly data: Uint8Array | string;
  readonly partitionKey: string;
  /** Routes the record to the shard whose hash range contains this decimal 128-bit key. */
  readonly explicitHashKey?: string;
}

export interface PutRecordResult {
  readonly shardId: string;
  readonly sequenceNumber: string;
}

export interface PutRecordsOptions {
  /** Attempts per batch for the entries Kinesis rejected (throttling, internal errors); default 8. */
  readonly maxAttempts?: number;
  /** First back-off in milliseconds, doubled per attempt up to 2 s; default 50. */
  readonly backoffMs?: number;
}

const MAX_PUT_RECORDS = 500;

/**
 * Puts records with PutRecords, 500 at a time, in input order. Entries that Kinesis rejects
 * (`ErrorCode` set) are retried with back-off until they succeed or `maxAttempts` is spent, which
 * throws. Returns, per input record and in input order, the shard and sequence number it got.
 *
 * Order caveat, as with any PutRecords client: a retried entry lands after the entries of its batch
 * that succeeded at once, so per-partition-key order is only guaranteed when nothing is rejected.
 * Put in batches of one partition key per call (or use PutRecord) when that matters.
 */
export async function putRecordsBatched(
  kinesis: KinesisClient, streamName: string, records: readonly PutRecordInput[], options: PutRecordsOptions = {},
): Promise<PutRecordResult[]> {
  const maxAttempts = options.maxAttempts ?? 8;
  const backoffMs = options.backoffMs ?? 50;
  const results: PutRecordResult[] = new Array(records.length);
  for (let start = 0; start < records.length; start += MAX_PUT_RECORDS) {
    let pending = records.slice(start, start + MAX_PUT_RECORDS).map((record, i) => ({ index: start + i, record }));
    for (let attempt = 1; pending.length > 0; attempt++) {
      const entries: PutRecordsRequestEntry[] = pending.map(({ record }) => ({
        Data: typeof record.data === 'string' ? Buffer.from(record.data, 'utf8') : record.data,
        PartitionKey: record.partitionKey,
        ...(record.explicitHashKey !== undefined ? { ExplicitHashKey: record.explicitHashKey } : {}),
      }));
      const response = await kinesis.send(new PutRecordsCommand({ StreamName: streamName, Records: entries }));
      const outcome = response.Records ?? [];
      const failed: typeof pending = [];
      let lastError = '';
      pending.forEach((item, i) => {
        const entry = outcome[i];
        if (entry && !entry.ErrorCode && entry.SequenceNumber && entry.ShardId) {
          results[item.index] = { shardId: entry.ShardId, sequenceNumber: entry.SequenceNumber };
        } else {
          failed.push(item);
          lastError = entry?.ErrorCode ? `${entry.ErrorCode}: ${entry.ErrorMessage ?? ''}` : 'no result entry';
        }
      });
      pending = failed;
      if (pending.length === 0) break;
      if (attempt >= maxAttempts) {
        throw new Error(`PutRecords to ${streamName}: ${pending.length} record(s) still rejected after ${attempt} attempts (${lastError})`);
      }
      await sleep(Math.min(backoffMs * 2 ** (attempt - 1), 2_000));
    }
  }
  return results;
}

/** The decimal hash key in the middle of a shard's hash range. */
export function midpointHashKey(shard: Shard): string {
  const start = BigInt(shard.HashKeyRange?.StartingHashKey ?? '0');
  const end = BigInt(shard.HashKeyRange?.EndingHashKey ?? ((1n << 128n) - 1n).toString());
  return ((start + end) / 2n + 1n).toString();
}

/**
 * Splits `shardId` in two at the midpoint of its hash range and waits until the stream is ACTIVE
 * again. Returns the ids of the child shards (lower hash half first).
 */
export async function splitShardEvenly(
  kinesis: KinesisClient, streamName: string, shardId: string, options: WaitOptions = {},
): Promise<string[]> {
  const shard = (await listAllShards(kinesis, streamName)).find((s) => s.ShardId === shardId);
  if (!shard) throw new Error(`shard ${shardId} not found in stream ${streamName}`);
  await kinesis.send(new SplitShardCommand({ StreamName: streamName, ShardToSplit: shardId, NewStartingHashKey: midpointHashKey(shard) }));
  await waitForStreamActive(kinesis, streamName, options);
  return childShardsOf(await listAllShards(kinesis, streamName), shardId);
}

/** Merges two adjacent shards and waits until ACTIVE; returns the child shard's id. */
export async function mergeShards(
  kinesis: KinesisClient, streamName: string, shardId: string, adjacentShardId: string, options: WaitOptions = {},
): Promise<string> {
  await kinesis.send(new MergeShardsCommand({ StreamName: streamName, ShardToMerge: shardId, AdjacentShardToMerge: adjacentShardId }));
  await waitForStreamActive(kinesis, streamName, options);
  const child = childShardsOf(await listAllShards(kinesis, streamName), shardId)[0];
  if (!child) throw new Error(`no child shard found after merging ${shardId} and ${adjacentShardId}`);
  return child;
}

/** UpdateShardCount with uniform scaling (what the construct does when the repartition shard count changes), then waits until ACTIVE. */
export async function updateShardCount(kinesis: KinesisClient, streamName: string, targetShardCount: number, options: WaitOptions = {}): Promise<void> {
  await kinesis.send(new UpdateShardCountCommand({ StreamName: streamName, TargetShardCount: targetShardCount, ScalingType: 'UNIFORM_SCALING' }));
  await waitForStreamActive(kinesis, streamName, options);
}

function childShardsOf(shards: readonly Shard[], parentId: string): string[] {
  return shards
    .filter((s) => s.ParentShardId === parentId || s.AdjacentParentShardId === parentId)
    .sort((a, b) => compareBig(a.HashKeyRange?.StartingHashKey ?? '0', b.HashKeyRange?.StartingHashKey ?? '0'))
    .map((s) => s.ShardId!);
}

function compareBig(a: string, b: string): number {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * An explicit hash key inside the given shard's range (its starting key), to route test records to
 * a chosen shard deterministically.
 */
export function hashKeyForShard(shard: Shard): string {
  return shard.HashKeyRange?.StartingHashKey ?? '0';
}

/**
 * One reshard step: split a shard at its midpoint, or merge two adjacent open shards. `first-open`
 * and `first-adjacent` pick the open shard(s) lowest in the hash-key space.
 */
export type ReshardStep =
  | { readonly split: 'first-open' | string }
  | { readonly merge: 'first-adjacent' | readonly [string, string] }
  /** UpdateShardCount (uniform scaling): Kinesis splits and merges as it needs to reach the count. */
  | { readonly shardCount: number };

/** The open shards, lowest hash key first. */
export async function openShards(kinesis: KinesisClient, streamName: string): Promise<Shard[]> {
  return (await listAllShards(kinesis, streamName))
    .filter((s) => !isShardClosed(s))
    .sort((a, b) => compareBig(a.HashKeyRange?.StartingHashKey ?? '0', b.HashKeyRange?.StartingHashKey ?? '0'));
}

/**
 * Reshards a stream step by step, each step waiting until the stream is ACTIVE again; returns the
 * shards each step created. Tests and fault injection (a reshard mid-run) call it.
 */
export async function reshardStream(
  kinesis: KinesisClient, streamName: string, steps: readonly ReshardStep[], options: WaitOptions = {},
): Promise<string[][]> {
  const created: string[][] = [];
  for (const step of steps) {
    const open = await openShards(kinesis, streamName);
    if ('shardCount' in step) {
      const before = new Set((await listAllShards(kinesis, streamName)).map((s) => s.ShardId!));
      await updateShardCount(kinesis, streamName, step.shardCount, options);
      created.push((await listAllShards(kinesis, streamName)).map((s) => s.ShardId!).filter((id) => !before.has(id)));
    } else if ('split' in step) {
      const shardId = step.split === 'first-open' ? open[0]?.ShardId : step.split;
      if (!shardId) throw new Error(`stream ${streamName} has no open shard to split`);
      created.push(await splitShardEvenly(kinesis, streamName, shardId, options));
    } else {
      let pair = step.merge === 'first-adjacent' ? undefined : step.merge;
      for (let i = 0; pair === undefined && i + 1 < open.length; i++) {
        const end = BigInt(open[i]!.HashKeyRange!.EndingHashKey!);
        if (end + 1n === BigInt(open[i + 1]!.HashKeyRange!.StartingHashKey!)) pair = [open[i]!.ShardId!, open[i + 1]!.ShardId!];
      }
      if (!pair) throw new Error(`stream ${streamName} has no two adjacent open shards to merge`);
      created.push([await mergeShards(kinesis, streamName, pair[0], pair[1], options)]);
    }
  }
  return created;
}
