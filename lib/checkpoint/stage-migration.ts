/**
 * A query that ran in one stage (its state in the source shard's partition, because the stream had
 * one shard) and now runs with a repartition stage (a split, and functions compiled for more
 * shards): the state moves to stage 2 instead of being left behind. When every one-stage parent is
 * finished (closed, every record committed), each open internal shard's stage-2 partition is
 * seeded, as its batch 0, with the parents' final state restricted to the entries stage 1 routes
 * to that shard, and with the parents' watermark: as a reshard seed (reshard-seed.ts), the same
 * bytes on every attempt, and the conditional commit decides. The children's stateless stage 1 runs
 * only after this, so no record reaches stage 2 before the state it belongs to.
 *
 * Stage 2 also learns what the parents applied: a progress entry per parent (its last batch, its
 * maximum event time), so that the children's watermark starts from the parent's, as after a
 * split in one stage. The migration applies when every stateful operator moves to stage 2 (one hop);
 * otherwise the child is refused as before (RESHARD_STAGE_CHANGED).
 */
import { CheckpointError } from '../errors/sluice-error.js';
import { FULL_HASH_RANGE, hexRange, type RangeProgress } from '../sources/hash-range-progress.js';
import { seedRepartitionOffset } from '../sources/repartition-shard-source.js';
import type { Offset } from '../sources/source.js';
import { inHashKeyRange, kinesisHashKey, type HashKeyRange, type StoreRouting } from '../state/state-routing.js';
import { CHECKPOINT_FORMAT_VERSION, type Checkpoint, type OffsetSeq } from './checkpoint.js';
import { lastCommittedBatch } from './reshard-seed.js';

export interface OneStageParent {
  readonly partitionId: string;
  readonly checkpoint: Checkpoint;
  /** Its key in stage 2's per-source progress (the `src` stage 1 would write for it). */
  readonly sourcePartition: string;
}

export interface StageTwoPartition {
  readonly shardId: string;
  readonly partitionId: string;
  readonly checkpoint: Checkpoint;
  readonly range: HashKeyRange;
}

/** Whether every target holds the parents' state already (stage 1's children may run). */
export async function migrationDone(request: Pick<StageMigrationRequest, 'parents' | 'targets' | 'sourceName'>): Promise<boolean> {
  for (const target of request.targets) {
    if (!(await target.checkpoint.commitLog.getLatest()) || !(await seededBefore(target, request))) return false;
  }
  return true;
}

export interface StageMigrationRequest {
  readonly parents: readonly OneStageParent[];
  /** Stage 2's partitions on the internal stream's open shards. */
  readonly targets: readonly StageTwoPartition[];
  /** Stage 2's stores and how their entries route (the internal stream's routing). */
  readonly stores: readonly StoreRouting[];
  /** Stage 2's offsets name the internal stream by this source id. */
  readonly sourceName: string;
  /** The watermark delay: a parent's maximum event time is its watermark plus it. */
  readonly delayMs: number;
}

export type MigrationOutcome = 'migrated' | 'migrated-before' | 'nothing-to-carry';

interface ParentEnd {
  readonly parent: OneStageParent;
  readonly batchId: number;
  readonly offsets: OffsetSeq;
  readonly nextBatchWatermarkMs: number;
}

async function endOf(parent: OneStageParent): Promise<ParentEnd | null> {
  const end = await lastCommittedBatch(parent.checkpoint, parent.partitionId, 'its state cannot be moved to the repartition stage');
  return end && { parent, ...end };
}

/** Whether a committed stage-2 partition was seeded by this migration (its batch 0 names every parent). */
export async function seededBefore(target: StageTwoPartition, request: Pick<StageMigrationRequest, 'parents' | 'sourceName'>): Promise<boolean> {
  const first = await target.checkpoint.offsetLog.get(0);
  const sources = (first?.offsets[request.sourceName] as { sources?: Record<string, unknown> } | null | undefined)?.sources ?? {};
  return request.parents.every((p) => sources[p.sourcePartition] !== undefined);
}

/** Moves the finished one-stage parents' state into stage 2's partitions, once. */
export async function migrateToRepartitionStage(request: StageMigrationRequest): Promise<MigrationOutcome> {
  const ends = (await Promise.all(request.parents.map(endOf))).filter((e): e is ParentEnd => e !== null);
  if (ends.length === 0) return 'nothing-to-carry';
  const pending: StageTwoPartition[] = [];
  for (const target of request.targets) {
    if (!(await target.checkpoint.commitLog.getLatest())) pending.push(target);
    else if (!(await seededBefore(target, request))) throw ranBefore(target, request);
  }
  if (pending.length === 0) return 'migrated-before';

  const carried = await routedEntries(request, ends);
  const progress = Object.fromEntries(ends.map((e): [string, RangeProgress] => [e.parent.sourcePartition, appliedUpTo(e, request.delayMs)]));
  const full = { offset: { sources: progress } as unknown as Offset, range: FULL_HASH_RANGE };
  for (const target of pending) {
    const entries = carried.get(target) ?? new Map<string, Map<string, unknown>>();
    for (const store of request.stores) {
      const seeded = await target.checkpoint.stateStore.open(store.id, 0);
      const mine = entries.get(storeKey(store)) ?? new Map<string, unknown>();
      for (const key of [...mine.keys()].sort()) seeded.put(key, mine.get(key));
      await seeded.commit();
    }
    // Batch 1 runs as the parents' next batch would have: late rows behind their last watermark, eviction up to their next.
    await target.checkpoint.offsetLog.add(0, {
      formatVersion: CHECKPOINT_FORMAT_VERSION,
      batchId: 0,
      offsets: { [request.sourceName]: seedRepartitionOffset(target.shardId, target.range, [full]) },
      batchWatermarkMs: Math.min(...ends.map((e) => e.offsets.batchWatermarkMs)),
      batchTimestampMs: Math.max(...ends.map((e) => e.offsets.batchTimestampMs)),
      conf: ends[0]!.offsets.conf,
    });
    await target.checkpoint.commitLog.add(0, {
      formatVersion: CHECKPOINT_FORMAT_VERSION, batchId: 0, nextBatchWatermarkMs: Math.max(...ends.map((e) => e.nextBatchWatermarkMs)),
    });
  }
  return 'migrated';
}

/** Everything the parent applied, over the whole hash space: its children's watermark starts from its maximum event time. */
function appliedUpTo(end: ParentEnd, delayMs: number): RangeProgress {
  const [lo, hi] = hexRange(FULL_HASH_RANGE);
  const watermark = end.nextBatchWatermarkMs;
  return { span: [lo, hi], ranges: [{ lo, hi, batch: end.batchId, maxEventTimeMs: watermark > 0 ? watermark + delayMs : null }], idle: false };
}

const storeKey = (store: StoreRouting): string => `${store.id.operatorId}/${store.id.storeName}`;

/** Per target, per store, the parents' entries whose routing key hashes into the target's range. */
async function routedEntries(request: StageMigrationRequest, ends: readonly ParentEnd[]): Promise<Map<StageTwoPartition, Map<string, Map<string, unknown>>>> {
  const out = new Map<StageTwoPartition, Map<string, Map<string, unknown>>>();
  for (const store of request.stores) {
    for (const end of ends) {
      const state = await end.parent.checkpoint.stateStore.open(store.id, end.batchId + 1);
      for (const [key, value] of state.entries()) {
        const target = targetOf(request, store, key, value);
        const byStore = out.get(target) ?? new Map<string, Map<string, unknown>>();
        out.set(target, byStore);
        const entries = byStore.get(storeKey(store)) ?? new Map<string, unknown>();
        byStore.set(storeKey(store), entries);
        if (entries.has(key)) {
          throw new CheckpointError(`State key ${storeKey(store)} is held by more than one one-stage partition; they cannot be moved into one stage-2 partition.`, {
            code: 'RESHARD_STATE_CONFLICT', context: { parents: request.parents.map((p) => p.partitionId) },
          });
        }
        entries.set(key, value);
      }
      state.abort();
    }
  }
  return out;
}

function targetOf(request: StageMigrationRequest, store: StoreRouting, key: string, value: unknown): StageTwoPartition {
  const routingKey = store.routingKey?.(key, value) ?? null;
  if (routingKey === null) {
    if (request.targets.length === 1) return request.targets[0]!;
    throw new CheckpointError(
      `The state of stateful operator ${store.id.operatorId} cannot be divided between the ${request.targets.length} shards of the internal stream: `
      + `${store.unroutable ?? 'an entry has no routing key'}.`,
      {
        code: 'RESHARD_STAGE_CHANGED',
        hint: 'give the internal stream one shard (repartitionShardCount: 1) until the state has moved, or deploy under a new query name.',
        context: { operatorId: store.id.operatorId },
      },
    );
  }
  const hash = kinesisHashKey(routingKey);
  const target = request.targets.find((t) => inHashKeyRange(hash, t.range));
  if (!target) throw new Error(`no open internal shard holds hash ${hash.toString(16)}: the internal stream's shards do not cover the hash space`);
  return target;
}

function ranBefore(target: StageTwoPartition, request: StageMigrationRequest): CheckpointError {
  return new CheckpointError(
    `Stage-2 partition ${target.partitionId} committed batches before the state of ${request.parents.map((p) => p.partitionId).join(', ')} `
    + '(which ran the query in one stage) was moved to it: the state cannot be added to it any more.',
    {
      code: 'RESHARD_STAGE_CHANGED',
      errorClass: 'STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA',
      hint: 'deploy under a new query name (its state starts empty).',
      context: { partition: target.partitionId },
    },
  );
}
