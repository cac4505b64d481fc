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
 * 3. the parents' watermark rows are marked closed, so they no longer hold the minimum back. The
 *    mark comes before the seed and is a fence: a re-drive batch's plan checks it (planFence in
 *    lib/aws/aws-backends.ts), and a plan that landed before it is found by reading the offset log
 *    again after it (the parent is then not finished until that batch commits).
 *
 * A finished parent runs nothing again: its keys belong to its children (`prepare` says so to
 * the scheduled function, which would otherwise run a no-data batch on it).
 */
import type { KinesisClient, Shard } from '@aws-sdk/client-kinesis';
import type { Checkpoint } from '../checkpoint/checkpoint.js';
import { seedFromParents } from '../checkpoint/reshard-seed.js';
import { parentsHoldingState, refuseStateLeftInParents } from '../checkpoint/stage-layout-check.js';
import { migrateToRepartitionStage, migrationDone, type OneStageParent, type StageTwoPartition } from '../checkpoint/stage-migration.js';
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
  /**
   * The other stages' streams and partitions, so that a query that ran in one stage and now has a
   * repartition stage moves its state to stage 2 (lib/checkpoint/stage-migration.ts) instead of
   * refusing the split children. Stage 2's guard moves it (its function may write state), once
   * the one-stage shards are finished (`sourceFinished`); stage 1's children wait until it has.
   * Absent: such children are refused (RESHARD_STAGE_CHANGED).
   */
  readonly layout?: StageLayoutAccess;
}

export interface StageLayoutAccess {
  streamOf(stage: QueryStage): string;
  checkpointOf(stage: QueryStage, shardId: string): Checkpoint;
  /** Stage 2's guard: whether a source shard is closed and fully committed (the source stage's guard). */
  readonly sourceFinished?: (shardId: string, shards: readonly Shard[]) => Promise<boolean>;
}

/**
 * The stage a one-stage query's state moves to when it gains a repartition stage: stage 2, when it
 * holds every stateful operator of the query (one stream, one hop). Null: no migration applies.
 */
export function migrationStageOf(query: CompiledQuery): QueryStage | null {
  if (query.repartition === null || query.hops.length !== 1 || query.sourceStages.length !== 1) return null;
  const stage = query.stateStage;
  return stage && stage.index === 1 && stage.reads === 'internal-stream' && stage.writes === 'sink' ? stage : null;
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
  /** Source shards that ran in one stage and whose state moved to stage 2 (or not: false). */
  private readonly moved = new Map<string, boolean>();
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
    if (parentIds.length === 0 && this.isMigrationTarget()) {
      const waiting = await this.recordingRefusal(shardId, () => this.migrateIntoStageTwo());
      if (waiting !== null) return { state: 'waiting', reason: waiting };
    }
    this.ready.add(shardId);
    return { state: 'ready' };
  }

  /** A child's first run: refused when its parents' state cannot follow it, else seeded from them. */
  private async seed(shardId: string, shard: Shard, checkpoint: Checkpoint, parents: { partitionId: string; checkpoint: Checkpoint; range: HashKeyRange }[]): Promise<void> {
    if (!this.options.stage.isStateful) {
      const holding = await parentsHoldingState(parents);
      const target = this.options.layout ? migrationStageOf(this.options.query) : null;
      if (holding.length > 0 && target !== null && this.options.stage === this.options.query.sourceStage) {
        // The state moves to stage 2 (its function writes state; this one may not): wait until it has.
        const request = await this.migrationRequest(target, holding.map((p) => p.partitionId));
        if (!(await migrationDone(request))) {
          throw pending(shardId, `its parent(s) ${holding.map((p) => p.partitionId).join(', ')} ran the query in one stage, and their state moves to the repartition stage first (the scheduled function or stage 2 moves it)`);
        }
        await this.forgetRefusedSeedMetadata(checkpoint);
        return;
      }
      await refuseStateLeftInParents(this.partition(shardId), parents);
    }
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

  /**
   * A child an older version refused (RESHARD_WITH_STATE) may hold its one-stage parent's metadata:
   * that version wrote it before the seed failed. The child never committed and its state moved to
   * stage 2 with the parent's, so it runs stage 1 now: its metadata becomes this stage's (no
   * stateful operator), under the same query id, instead of refusing it INCOMPATIBLE_CHECKPOINT.
   */
  private async forgetRefusedSeedMetadata(checkpoint: Checkpoint): Promise<void> {
    const stored = await checkpoint.readQueryMetadata();
    if (!stored || stored.fingerprint.statefulOperators.length === 0 || !checkpoint.replaceQueryMetadata) return;
    const fingerprint = { ...stored.fingerprint, outputMode: this.options.stage.outputMode, statefulOperators: [] };
    // Lost to a concurrent replacement: that one wrote the same.
    await checkpoint.replaceQueryMetadata(stored, { ...stored, fingerprint });
  }

  /** A refusal (not retryable) is recorded for `sluice status`; a child that passes clears it. */
  private async recordingRefusal<T>(shardId: string, run: () => Promise<T>): Promise<T> {
    const log = this.options.refusals;
    let out: T;
    try {
      out = await run();
    } catch (error) {
      // The refusal is what the caller must see: a failed write of its record does not replace it.
      if (log && error instanceof SluiceError && !error.retryable) await log.refused(this.partition(shardId), shardId, error).catch(() => undefined);
      throw error;
    }
    await log?.passed(this.partition(shardId));
    return out;
  }

  private isMigrationTarget(): boolean {
    return this.options.layout?.sourceFinished !== undefined && migrationStageOf(this.options.query) === this.options.stage;
  }

  /** The parents' partitions and stage 2's partitions on the internal stream's open shards. */
  private async migrationRequest(target: QueryStage, parentShardIds: readonly string[]): Promise<{ parents: OneStageParent[]; targets: StageTwoPartition[]; sourceName: string }> {
    const layout = this.options.layout!;
    const source = this.options.query.sourceStage;
    const internal = await listStreamShards(this.options.kinesis, layout.streamOf(target));
    const targets = internal.filter((s) => s.SequenceNumberRange?.EndingSequenceNumber === undefined).map((s) => ({
      shardId: s.ShardId!, partitionId: target.checkpointPartition(s.ShardId!), checkpoint: layout.checkpointOf(target, s.ShardId!), range: rangeOf(s),
    }));
    const parents = parentShardIds.map((id) => ({ partitionId: source.checkpointPartition(id), checkpoint: layout.checkpointOf(source, id), sourcePartition: source.partitionId(id) }));
    return { parents, targets, sourceName: target.sourceId };
  }

  /**
   * Stage 2's first run: when source shards ran the query in one stage, their final state moves here
   * first (every open internal shard's partition at once); a reason to wait while one is not finished.
   */
  private async migrateIntoStageTwo(): Promise<string | null> {
    const layout = this.options.layout!;
    const source = this.options.query.sourceStage;
    const shards = await listStreamShards(this.options.kinesis, layout.streamOf(source));
    const holding: string[] = [];
    for (const shard of shards) {
      // A child refused before a redeploy has no commit (and no metadata, reshard-seed.ts): it holds nothing.
      const checkpoint = layout.checkpointOf(source, shard.ShardId!);
      const stored = await checkpoint.readQueryMetadata();
      if ((stored?.fingerprint.statefulOperators ?? []).length > 0 && await checkpoint.commitLog.getLatest()) holding.push(shard.ShardId!);
    }
    if (holding.length === 0) return null;
    for (const shardId of holding) {
      if (!(await layout.sourceFinished!(shardId, shards))) return `source shard ${shardId} ran the query in one stage and has records not committed yet; its state moves here once they are`;
    }
    const request = await this.migrationRequest(this.options.stage, holding);
    await migrateToRepartitionStage({ ...request, stores: this.stores, delayMs: this.options.stage.inputHop?.eventTime?.delayMs ?? 0 });
    return null;
  }

  /**
   * Whether `shardId` ran the query in one stage and its state has moved to stage 2: it is finished
   * (the move waits for that), so a delivery of its records (a mapping re-delivering what the
   * scheduled function committed) holds nothing to run, and the new plan must not start on it.
   */
  async movedToStageTwo(shardId: string): Promise<boolean> {
    const known = this.moved.get(shardId);
    if (known !== undefined) return known;
    const target = this.options.layout ? migrationStageOf(this.options.query) : null;
    if (target === null || this.options.stage !== this.options.query.sourceStage || this.options.stage.isStateful) return this.remember(shardId, false);
    const stored = await this.options.checkpointOf(shardId).readQueryMetadata();
    if ((stored?.fingerprint.statefulOperators ?? []).length === 0) return this.remember(shardId, false);
    const done = await migrationDone(await this.migrationRequest(target, [shardId]));
    // Not moved yet: asked again next time (the move comes once the shard is finished).
    return done ? this.remember(shardId, true) : false;
  }

  /**
   * Whether `shardId` still runs the query in one stage under functions compiled with a repartition
   * stage: its partition committed batches of the one-stage plan (its metadata lists stateful
   * operators) and its state has not moved to stage 2 yet, because records after its committed
   * position remain (the mapping was behind at the deploy). Those records run through the one-stage
   * plan, on this partition, until the shard is closed and committed: the scheduled function does
   * it (its role writes state and sink; the stage-1 function's does not), and the move follows.
   */
  async runsOneStage(shardId: string): Promise<boolean> {
    if (this.moved.has(shardId) || this.finished.has(shardId)) return false;
    // Remembers a moved shard and one that never ran in one stage: asked once per container, as the moves are.
    if (await this.movedToStageTwo(shardId) || this.moved.has(shardId)) return false;
    // A child refused before a redeploy has no commit: it runs stage 1 once the state has moved.
    return (await this.options.checkpointOf(shardId).commitLog.getLatest()) !== undefined;
  }

  private remember(shardId: string, moved: boolean): boolean {
    this.moved.set(shardId, moved);
    return moved;
  }

  /** Whether `shardId` of this guard's stream is closed and fully committed. */
  async finishedShard(shardId: string, shards: readonly Shard[]): Promise<boolean> {
    const shard = shards.find((s) => s.ShardId === shardId);
    return shard !== undefined && this.isFinished(shard);
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
    // The fence: once the row is closed no re-drive batch can be planned here (its plan checks the
    // row, lib/aws/redrive-batch.ts). One planned before it is seen now, and the children wait for
    // its commit (the seed then carries it); without this read it would land in a state nobody reads.
    if (this.options.markClosed) {
      await this.options.markClosed(shardId);
      const [plannedAfter, commitAfter] = await Promise.all([checkpoint.offsetLog.getLatest(), checkpoint.commitLog.getLatest()]);
      if (plannedAfter && plannedAfter[0] !== commitAfter?.[0]) return false;
    }
    this.finished.add(shardId);
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
