/**
 * State partitions are shards, and a reshard replaces shards by children (a split gives two, a
 * merge one). Before a child shard's partition runs anything, on every path (the Kinesis handler,
 * the scheduled tick, drain, stage 2):
 *
 * 1. every ancestor is finished: its shard is closed and every record up to its end is committed,
 *    or was skipped by the event source mapping and recorded as such (lib/aws/skipped-batches.ts:
 *    a poison record at a parent's end must not block its children forever) (an ancestor that never ran, e.g. a short-lived child split again, is seeded and
 *    checked the same way, recursively), and no batch planned on it waits for its commit (a re-drive
 *    batch, lib/aws/redrive-batch.ts, holds no record of the shard). Until then the child waits (RESHARD_PARENT_PENDING,
 *    retryable: Lambda retries the child's records; the scheduled function skips it this time);
 * 2. a stateful child is seeded from its parents' final state (lib/checkpoint/reshard-seed.ts):
 *    the entries whose routing key hashes into its range after a split, the union after a merge,
 *    with the parents' watermarks and, for stage 2, what they applied per source shard;
 * 3. the parents' watermark rows are marked closed, so they no longer hold the minimum back.
 *
 * A finished parent runs nothing again: its keys belong to its children (`prepare` says so to
 * the scheduled function, which would otherwise run a no-data batch on it).
 */
import type { KinesisClient, Shard } from '@aws-sdk/client-kinesis';
import type { Checkpoint } from '../checkpoint/checkpoint.js';
import { seedFromParents } from '../checkpoint/reshard-seed.js';
import { refuseStateLeftInParents } from '../checkpoint/stage-layout-check.js';
import { CheckpointError, SluiceError } from '../errors/sluice-error.js';
import type { CompiledQuery } from '../query/compiled-query.js';
import type { QueryStage } from '../query/query-stage.js';
import { committedShardOffset } from '../query/shard-invocation.js';
import { readAfterPosition, seedRepartitionOffset } from '../sources/repartition-shard-source.js';
import { repartitionStateRouting, sourceStreamStateRouting, type HashKeyRange, type StoreRouting } from '../state/state-routing.js';
import type { ShardPosition } from './kinesis-shard-reader.js';
import { listStreamShards } from './kinesis-shard-reader.js';
import type { RefusalLog } from './refused-shards.js';
import { skippedRangeHolding, type SkippedRange } from './skipped-batches.js';

export type SkippedSpan = Pick<SkippedRange, 'firstSequenceNumber' | 'lastSequenceNumber'>;

export type ShardReadiness =
  | { readonly state: 'ready' }
  /** Closed and fully committed: its children own its keys now. */
  | { readonly state: 'finished' }
  | { readonly state: 'waiting'; readonly reason: string };

export interface ReshardGuardOptions {
  readonly kinesis: KinesisClient;
  /** The stream whose shards run `stage` (the source stream, or the internal one for stage 2). */
  readonly streamName: string;
  readonly query: CompiledQuery;
  readonly stage: QueryStage;
  readonly checkpointOf: (shardId: string) => Checkpoint;
  readonly reader: { readAfter(shardId: string, after: string | null, limit?: number): Promise<ShardPosition> };
  /**
   * The ranges the event source mapping skipped on a shard of this stage (recorded by the
   * on-failure handler): done for the guard, as committed records are. Default: none.
   */
  readonly skippedRanges?: (shardId: string) => Promise<readonly SkippedSpan[]>;
  /** Takes a finished shard out of the watermark minimum (the source stream's partitions). */
  readonly markClosed?: (shardId: string) => Promise<void>;
  /**
   * Where a refused child is recorded (and its record removed once it passes), so that `sluice
   * status` names it during the hours the mapping retries it (lib/aws/refused-shards.ts). Default: nowhere.
   */
  readonly refusals?: RefusalLog;
}

/** How a stage's state entries follow their keys to child shards. */
export function stateRoutingOf(query: CompiledQuery, stage: QueryStage): StoreRouting[] {
  if (!stage.isStateful) return [];
  if (stage.reads === 'internal-stream') return repartitionStateRouting(stage.plan, stage.inputHop?.routingKeyPositions ?? [], stage.inputHop?.stateUnroutable, stage.inputHop?.stateKeyPositions);
  return sourceStreamStateRouting(stage.plan, query.definition.source?.partitionKey);
}

function rangeOf(shard: Shard): HashKeyRange {
  return { start: BigInt(shard.HashKeyRange?.StartingHashKey ?? '0'), end: BigInt(shard.HashKeyRange?.EndingHashKey ?? '0') };
}

/** A parent no longer listed: its range is unknown, so its state is filtered by key. */
const UNKNOWN_RANGE: HashKeyRange = { start: 0n, end: (1n << 128n) - 1n };

function parentsOf(shard: Shard): string[] {
  return [shard.ParentShardId, shard.AdjacentParentShardId].filter((p): p is string => p !== undefined && p !== null);
}

/** The shards in an order where every parent comes before its children. */
export function parentsFirst(shards: readonly Shard[]): Shard[] {
  const byId = new Map(shards.map((s) => [s.ShardId!, s]));
  const done = new Set<string>();
  const out: Shard[] = [];
  const visit = (shard: Shard): void => {
    if (done.has(shard.ShardId!)) return;
    done.add(shard.ShardId!);
    for (const parent of parentsOf(shard)) {
      const p = byId.get(parent);
      if (p) visit(p);
    }
    out.push(shard);
  };
  shards.forEach(visit);
  return out;
}

export class ReshardGuard {
  /** Partitions that committed or were seeded: nothing to check again in this container. */
  private readonly ready = new Set<string>();
  private readonly finished = new Set<string>();
  private readonly stores: StoreRouting[];

  constructor(private readonly options: ReshardGuardOptions) {
    this.stores = stateRoutingOf(options.query, options.stage);
  }

  /** Throws RESHARD_PARENT_PENDING (retryable) while an ancestor is not finished. */
  async check(shardId: string): Promise<void> {
    const readiness = await this.prepare(shardId);
    if (readiness.state === 'waiting') throw pending(shardId, readiness.reason);
  }

  /**
   * Whether `shardId` may run now, seeding its state from its parents when it is a child that has
   * not run yet. With `detectFinished`, a closed and fully committed shard is reported finished
   * (one GetRecords), which the scheduled function uses to leave it alone.
   */
  async prepare(shardId: string, options: { detectFinished?: boolean; shards?: readonly Shard[] } = {}): Promise<ShardReadiness> {
    if (this.finished.has(shardId)) return { state: 'finished' };
    if (!options.detectFinished && this.ready.has(shardId)) return { state: 'ready' };
    const shards = options.shards ?? await listStreamShards(this.options.kinesis, this.options.streamName);
    const readiness = await this.prepareIn(shardId, shards, new Set());
    if (readiness.state !== 'ready' || !options.detectFinished) return readiness;
    const shard = shards.find((s) => s.ShardId === shardId);
    return shard && await this.isFinished(shard) ? { state: 'finished' } : readiness;
  }

  private async prepareIn(shardId: string, shards: readonly Shard[], visiting: Set<string>): Promise<ShardReadiness> {
    if (this.ready.has(shardId)) return { state: 'ready' };
    const checkpoint = this.options.checkpointOf(shardId);
    if (await checkpoint.commitLog.getLatest()) {
      this.ready.add(shardId);
      return { state: 'ready' };
    }
    const shard = shards.find((s) => s.ShardId === shardId);
    const parentIds = shard ? parentsOf(shard) : [];
    if (visiting.has(shardId)) throw new Error(`shard lineage of ${shardId} is cyclic`);
    visiting.add(shardId);
    const parents: { partitionId: string; checkpoint: Checkpoint; range: HashKeyRange }[] = [];
    for (const parentId of parentIds) {
      const parent = shards.find((s) => s.ShardId === parentId);
      // A parent past the stream's retention is no longer listed: what it held was read or is gone.
      if (!parent) {
        parents.push({ partitionId: this.partition(parentId), checkpoint: this.options.checkpointOf(parentId), range: UNKNOWN_RANGE });
        continue;
      }
      const upstream = await this.prepareIn(parentId, shards, visiting);
      if (upstream.state === 'waiting') return upstream;
      if (!(await this.isFinished(parent))) {
        return { state: 'waiting', reason: `its parent ${parentId} has records not committed yet` };
      }
      parents.push({ partitionId: this.partition(parentId), checkpoint: this.options.checkpointOf(parentId), range: rangeOf(parent) });
    }
    if (shard && parents.length > 0) await this.recordingRefusal(shardId, () => this.seed(shardId, shard, checkpoint, parents));
    this.ready.add(shardId);
    return { state: 'ready' };
  }

  /** A child's first run: refused when its parents' state cannot follow it, else seeded from them. */
  private async seed(shardId: string, shard: Shard, checkpoint: Checkpoint, parents: { partitionId: string; checkpoint: Checkpoint; range: HashKeyRange }[]): Promise<void> {
    if (!this.options.stage.isStateful) await refuseStateLeftInParents(this.partition(shardId), parents);
    if (this.options.stage.isStateful) {
      await seedFromParents({
        childPartitionId: this.partition(shardId),
        child: checkpoint,
        childRange: rangeOf(shard),
        parents,
        stores: this.stores,
        sourceName: this.options.stage.sourceId,
        startOffset: (offsets) => (this.options.stage.reads === 'internal-stream'
          ? seedRepartitionOffset(shardId, rangeOf(shard), offsets.map((offset, i) => ({ offset, range: parents[i]!.range })))
          : null),
      });
    }
  }

  /** A refusal (not retryable) is recorded for `sluice status`; a child that passes clears it. */
  private async recordingRefusal(shardId: string, run: () => Promise<void>): Promise<void> {
    const log = this.options.refusals;
    try {
      await run();
    } catch (error) {
      // The refusal is what the caller must see: a failed write of its record does not replace it.
      if (log && error instanceof SluiceError && !error.retryable) await log.refused(this.partition(shardId), shardId, error).catch(() => undefined);
      throw error;
    }
    await log?.passed(this.partition(shardId));
  }

  /** Closed, and nothing after its committed position but skipped ranges. */
  private async isFinished(shard: Shard): Promise<boolean> {
    const shardId = shard.ShardId!;
    if (this.finished.has(shardId)) return true;
    if (shard.SequenceNumberRange?.EndingSequenceNumber === undefined) return false;
    const checkpoint = this.options.checkpointOf(shardId);
    // A planned batch not committed yet (a re-drive batch holds no record of the shard) still changes its state.
    const [planned, commit] = await Promise.all([checkpoint.offsetLog.getLatest(), checkpoint.commitLog.getLatest()]);
    if (planned && planned[0] !== commit?.[0]) return false;
    const committed = await committedShardOffset(checkpoint, this.options.stage.sourceId);
    let after = readAfterPosition(committed?.sequenceNumber);
    let skipped: readonly SkippedSpan[] | undefined;
    for (;;) {
      const position = await this.options.reader.readAfter(shardId, after, 1);
      const next = position.records[0];
      if (!next) {
        if (!position.closed) return false;
        break;
      }
      // The next record not committed: done only if a recorded skip holds it; go on after that skip.
      skipped ??= await this.options.skippedRanges?.(shardId) ?? [];
      const span = skippedRangeHolding(skipped, next.sequenceNumber);
      if (!span) return false;
      after = span.lastSequenceNumber;
    }
    this.finished.add(shardId);
    await this.options.markClosed?.(shardId);
    return true;
  }

  private partition(shardId: string): string {
    return this.options.stage.checkpointPartition(shardId);
  }
}

function pending(shardId: string, reason: string): CheckpointError {
  return new CheckpointError(`Shard ${shardId} waits for its parents after a reshard: ${reason}.`, {
    code: 'RESHARD_PARENT_PENDING',
    retryable: true,
    hint: 'nothing to do: the child runs once its parents\' last records are committed (Lambda retries it; the scheduled function runs it next time).',
    context: { shardId },
  });
}
