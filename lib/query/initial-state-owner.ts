import { AnalysisError } from '../errors/sluice-error.js';
import { collectNodes, type LogicalPlan, type StatefulProcessingNode } from '../plan/logical-plan.js';
import { inHashKeyRange, kinesisHashKey, repartitionStateRouting, sourceStreamStateRouting } from '../state/state-routing.js';
import type { CompiledQuery } from './compiled-query.js';
import type { PartitionBackends } from './partition-backends.js';
import type { QueryStage } from './query-stage.js';

export type StateKeyOwner = (operatorId: number, keyValues: readonly unknown[]) => boolean;

function hasInitialState(plan: LogicalPlan): boolean {
  return collectNodes(plan, (n): n is StatefulProcessingNode => n.kind === 'StatefulProcessing' && n.initialState !== null).length > 0;
}

/**
 * Which grouping keys a shard's state partition owns, for a stage whose transformWithState has an
 * initial state: a key belongs to the shard whose hash-key range holds the MD5 of its routing
 * value, as its rows do (the source stream's partition key, or the repartition stage's routing
 * columns) and as a reshard routes its state (lib/state/state-routing.ts). Undefined when the
 * stage has no initial state, or its backends do not know the shard's range (one partition).
 */
export async function initialStateOwner(query: CompiledQuery, stage: QueryStage, backends: PartitionBackends): Promise<StateKeyOwner | undefined> {
  if (!stage.isStateful || !backends.stateKeyRange || !hasInitialState(stage.plan)) return undefined;
  const routing = stage.reads === 'internal-stream'
    ? repartitionStateRouting(stage.plan, stage.inputHop?.routingKeyPositions ?? [], stage.inputHop?.stateUnroutable, stage.inputHop?.stateKeyPositions)
    : sourceStreamStateRouting(stage.plan, query.definition.source?.partitionKey);
  const range = await backends.stateKeyRange();
  return (operatorId, keyValues) => {
    const store = routing.find((r) => r.id.operatorId === operatorId && r.id.storeName === 'default');
    if (!store?.routingKey) {
      throw new AnalysisError(`transformWithState's initial state cannot be split among shards: ${store?.unroutable ?? 'its state is not routable'}.`, {
        code: 'INITIAL_STATE_NOT_PARTITIONED',
        hint: "group by the stream's partition key (or let the query repartition by the grouping key), or run on one shard.",
      });
    }
    // A key with no routing value (null) has no rows on any shard; the range holding hash('') takes it, so it is applied once.
    return inHashKeyRange(kinesisHashKey(store.routingKey('', [keyValues]) ?? ''), range);
  };
}
