/**
 * A child shard's state partition starts where its parents' ended. After a split each child takes
 * its parent's final committed state restricted to the entries whose routing key hashes into the
 * child's range; after a merge the child takes the union of both parents' states. The seed is the
 * child's batch 0, written through the same protocol as any batch (docs/state-layout.md):
 *
 *   1. state version 1 of every store (the filtered or merged entries, sorted: identical bytes when
 *      written again; a stream-stream join side's two stores are merged as one multimap, so rows
 *      under a NULL join key, which never match and sit where their row was routed, are all kept);
 *   2. `offset#0` (put if absent): the source's starting offset (stage 2 carries what its parents
 *      applied per source shard) and the parents' watermarks;
 *   3. `commit#0` (conditional, as every commit): from here on the child runs as usual, batch 1
 *      opening state version 1.
 *
 * A crash anywhere before step 3 leaves the child uncommitted, and the next attempt writes the same
 * items again: the parents are finished (their shards closed and fully committed) before a child is
 * seeded, so their final state no longer changes. Two seeders racing write the same bytes; exactly
 * one commit succeeds.
 */
import { CheckpointError } from '../errors/sluice-error.js';
import { unionJoinSide } from '../execution/join/join-state-manager.js';
import type { Offset } from '../sources/source.js';
import { inHashKeyRange, kinesisHashKey, type HashKeyRange, type StoreRouting } from '../state/state-routing.js';
import { CHECKPOINT_FORMAT_VERSION, type Checkpoint, type OffsetSeq } from './checkpoint.js';

export interface SeedParent {
  readonly partitionId: string;
  readonly checkpoint: Checkpoint;
  readonly range: HashKeyRange;
}

export interface SeedRequest {
  readonly childPartitionId: string;
  readonly child: Checkpoint;
  readonly childRange: HashKeyRange;
  readonly parents: readonly SeedParent[];
  /** Every state store of the stage and how its entries route. */
  readonly stores: readonly StoreRouting[];
  /** The stage's source; the other sources its parents' offsets name are carried too (a join's stage 2 reads one per input). */
  readonly sourceName: string;
  /**
   * The child's starting offset of a source from its parents' last committed ones, in the order
   * of `parents` (null: read from the start).
   */
  readonly startOffset: (parentOffsets: readonly (Offset | null)[]) => Offset | null;
}

export type SeedOutcome = 'committed-before' | 'nothing-to-carry' | 'seeded';

interface ParentEnd {
  readonly parent: SeedParent;
  readonly stateVersion: number;
  readonly offsets: OffsetSeq;
  readonly nextBatchWatermarkMs: number;
}

/**
 * A partition's last commit and the offset entry it committed: where a finished parent's state
 * stands (null before its first commit). `purpose` ends the error of a damaged checkpoint.
 */
export async function lastCommittedBatch(
  checkpoint: Checkpoint, partitionId: string, purpose: string,
): Promise<{ batchId: number; offsets: OffsetSeq; nextBatchWatermarkMs: number } | null> {
  const commit = await checkpoint.commitLog.getLatest();
  if (!commit) return null;
  const [batchId, entry] = commit;
  const offsets = await checkpoint.offsetLog.get(batchId);
  if (!offsets) {
    throw new CheckpointError(`Offset log entry ${batchId} of ${partitionId} is missing; ${purpose}.`, {
      code: 'OFFSET_LOG_GAP', hint: 'the checkpoint is damaged; start the query with a new checkpoint.',
    });
  }
  return { batchId, offsets, nextBatchWatermarkMs: entry.nextBatchWatermarkMs };
}

async function endOf(parent: SeedParent): Promise<ParentEnd | null> {
  const end = await lastCommittedBatch(parent.checkpoint, parent.partitionId, 'its state cannot be carried to its child shards');
  return end && { parent, stateVersion: end.batchId + 1, offsets: end.offsets, nextBatchWatermarkMs: end.nextBatchWatermarkMs };
}

const contains = (outer: HashKeyRange, inner: HashKeyRange): boolean => inner.start >= outer.start && inner.end <= outer.end;

/** One parent's entries of one store, filtered to the child's range when it split. */
async function parentEntries(request: SeedRequest, end: ParentEnd, store: StoreRouting): Promise<Map<string, unknown>> {
  const state = await end.parent.checkpoint.stateStore.open(store.id, end.stateVersion);
  const whole = contains(request.childRange, end.parent.range);
  const kept = new Map<string, unknown>();
  for (const [key, value] of state.entries()) {
    if (!whole) {
      const routingKey = store.routingKey?.(key, value) ?? null;
      if (routingKey === null) throw unsplittable(request, end.parent, store);
      if (!inHashKeyRange(kinesisHashKey(routingKey), request.childRange)) continue;
    }
    kept.set(key, value);
  }
  state.abort();
  return kept;
}

function conflict(request: SeedRequest, store: StoreRouting): CheckpointError {
  return new CheckpointError(
    `State key ${store.id.operatorId}/${store.id.storeName} of ${request.childPartitionId} is held by both of its merged parents; `
    + 'a merge can only union states whose keys are disjoint.',
    { code: 'RESHARD_STATE_CONFLICT', context: { child: request.childPartitionId, parents: request.parents.map((p) => p.partitionId) } },
  );
}

/** The child's entries of one store: the union of its parents' (a key held twice is refused). */
async function carriedEntries(request: SeedRequest, ends: readonly ParentEnd[], store: StoreRouting): Promise<Map<string, unknown>> {
  const carried = new Map<string, unknown>();
  for (const end of ends) {
    for (const [key, value] of await parentEntries(request, end, store)) {
      if (carried.has(key)) throw conflict(request, store);
      carried.set(key, value);
    }
  }
  return carried;
}

/**
 * The child's entries of a join side's two stores, merged as one multimap: rows under a key that
 * never matches (a NULL key) may sit in both parents, and the child holds all of them.
 */
async function carriedJoinSide(
  request: SeedRequest, ends: readonly ParentEnd[], counts: StoreRouting, rows: StoreRouting,
): Promise<[Map<string, unknown>, Map<string, unknown>]> {
  const parents = [];
  for (const end of ends) parents.push({ counts: await parentEntries(request, end, counts), rows: await parentEntries(request, end, rows) });
  const union = unionJoinSide(parents, counts.joinSide!.neverMatches);
  if ('conflict' in union) throw conflict(request, counts);
  return [union.counts, union.rows];
}

/** Writes every store's carried entries as the child's version 1, a join side's two stores together (one store's entries in memory at a time otherwise). */
async function seedStores(request: SeedRequest, ends: readonly ParentEnd[]): Promise<void> {
  const written = new Set<StoreRouting>();
  const write = async (store: StoreRouting, entries: Map<string, unknown>): Promise<void> => {
    const seeded = await request.child.stateStore.open(store.id, 0);
    for (const key of [...entries.keys()].sort()) seeded.put(key, entries.get(key));
    await seeded.commit();
    written.add(store);
  };
  for (const store of request.stores) {
    if (written.has(store)) continue;
    const side = store.joinSide;
    const partner = side && request.stores.find((s) => s !== store && s.id.operatorId === store.id.operatorId
      && s.joinSide?.side === side.side && s.joinSide.part !== side.part);
    if (!side || !partner) {
      await write(store, await carriedEntries(request, ends, store));
      continue;
    }
    const [countStore, rowStore] = side.part === 'counts' ? [store, partner] : [partner, store];
    const [counts, rows] = await carriedJoinSide(request, ends, countStore, rowStore);
    // In the stage's store order, as before.
    for (const s of request.stores.filter((x) => x === countStore || x === rowStore)) await write(s, s === countStore ? counts : rows);
  }
}

function unsplittable(request: SeedRequest, parent: SeedParent, store: StoreRouting): CheckpointError {
  return new CheckpointError(
    `Shard ${parent.partitionId} was split, and the state of stateful operator ${store.id.operatorId} cannot be divided between `
    + `its children: ${store.unroutable ?? 'an entry has no routing key'}. Running ${request.childPartitionId} with part of it would give wrong results.`,
    {
      code: 'RESHARD_WITH_STATE',
      hint: 'a state that is not keyed by the stream\'s partition key must live in one partition of a repartition stage: deploy the query '
        + 'again for more shards (shardCount above 1, or expectedShardCount unset; repartitionShardCount: 1 for a global aggregation): '
        + 'when all its state then runs in stage 2 (one internal stream), '
        + 'the parent\'s state moves there and the children run (their records wait in the stream meanwhile, until its retention); '
        + 'otherwise only a new query name (empty state) runs the new layout. Merging the children back does not help: they stay in the lineage.',
      context: { child: request.childPartitionId, parent: parent.partitionId, operatorId: store.id.operatorId },
    },
  );
}

function sourceNamesOf(request: SeedRequest, ends: readonly ParentEnd[]): string[] {
  return [...new Set([request.sourceName, ...ends.flatMap((e) => Object.keys(e.offsets.offsets))])];
}

/** Seeds the child from its finished parents, unless it has committed already. */
export async function seedFromParents(request: SeedRequest): Promise<SeedOutcome> {
  const { child } = request;
  if (await child.commitLog.getLatest()) return 'committed-before';
  const ends = (await Promise.all(request.parents.map(endOf))).filter((e): e is ParentEnd => e !== null);
  if (ends.length === 0) return 'nothing-to-carry';

  await seedStores(request, ends);
  // After the state is known to divide (seedStores throws first): a refused child keeps no metadata, so a
  // redeploy that moves the state to a repartition stage (stage-migration.ts) can run it as its stateless stage 1.
  const metadata = await ends[0]!.parent.checkpoint.readQueryMetadata();
  if (metadata && !(await child.readQueryMetadata())) await child.writeQueryMetadata(metadata);

  const startOffsetOf = (sourceName: string): Offset | null => request.startOffset(
    request.parents.map((p) => ends.find((e) => e.parent === p)?.offsets.offsets[sourceName] ?? null),
  );
  const first = ends[0]!.offsets;
  // The child resumes as after a batch that ran with the lowest parent watermark, and runs the next
  // with the highest: windows a parent had not closed yet close in the child's next batch, once.
  await child.offsetLog.add(0, {
    formatVersion: CHECKPOINT_FORMAT_VERSION,
    batchId: 0,
    offsets: Object.fromEntries(sourceNamesOf(request, ends).map((name) => [name, startOffsetOf(name)])),
    batchWatermarkMs: Math.min(...ends.map((e) => e.offsets.batchWatermarkMs)),
    batchTimestampMs: Math.max(...ends.map((e) => e.offsets.batchTimestampMs)),
    conf: first.conf,
  });
  await child.commitLog.add(0, {
    formatVersion: CHECKPOINT_FORMAT_VERSION, batchId: 0, nextBatchWatermarkMs: Math.max(...ends.map((e) => e.nextBatchWatermarkMs)),
  });
  return 'seeded';
}
