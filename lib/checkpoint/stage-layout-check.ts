/**
 * A reshard must not hide a changed stage layout. A query that ran in one stage on a one-shard
 * stream keeps its state (a global aggregation, say) in the source shard's partition. Deployed
 * again for more shards, it runs with a repartition stage: stage 1 on the source shards is
 * stateless and stage 2's partitions start empty. The old shard's own partition refuses the new
 * plan (its fingerprint lists the stateful operators), but its split children have no metadata, so
 * nothing would compare them with it: they would start fresh, and stage 2 would count from zero,
 * silently. When all the state runs in stage 2 of the new layout, it moves there first
 * (stage-migration.ts); otherwise this check refuses such a child loudly.
 */
import { CheckpointError } from '../errors/sluice-error.js';
import type { Checkpoint } from './checkpoint.js';

export interface LayoutParent {
  readonly partitionId: string;
  readonly checkpoint: Checkpoint;
}

/** The parents that ran stateful operators (their state is left behind by a stateless child). */
export async function parentsHoldingState<P extends LayoutParent>(parents: readonly P[]): Promise<P[]> {
  const holding: P[] = [];
  for (const parent of parents) {
    const stored = await parent.checkpoint.readQueryMetadata();
    if ((stored?.fingerprint.statefulOperators ?? []).length > 0) holding.push(parent);
  }
  return holding;
}

/** Throws RESHARD_STAGE_CHANGED when a stateless child's parent ran stateful operators. */
export async function refuseStateLeftInParents(childPartitionId: string, parents: readonly LayoutParent[]): Promise<void> {
  for (const parent of parents) {
    const stored = await parent.checkpoint.readQueryMetadata();
    const operators = stored?.fingerprint.statefulOperators ?? [];
    if (operators.length === 0) continue;
    throw new CheckpointError(
      `Shard ${childPartitionId} would run the query without state, but its parent ${parent.partitionId} ran it with stateful `
      + `operator(s) ${operators.map((op) => `${op.operatorId} (${op.kind})`).join(', ')}: the query now has a repartition stage `
      + '(its state lives in the internal stream\'s partitions), and the state the parent holds would be left behind. '
      + 'Running the child would restart the state from empty and give wrong results.',
      {
        code: 'RESHARD_STAGE_CHANGED',
        errorClass: 'STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA',
        hint: 'the state moves to the repartition stage only when all of it runs in stage 2 (one internal stream, one source stream); '
          + 'this layout spreads it over more stages, so it needs a new query name, whose state starts empty (docs/deploy.md, Shard count). '
          + 'Resharding back does not help: the children stay in the lineage.',
        context: { child: childPartitionId, parent: parent.partitionId },
      },
    );
  }
}
