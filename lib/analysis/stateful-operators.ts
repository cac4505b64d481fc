import { isStreaming, type LogicalPlan } from '../plan/logical-plan.js';

/**
 * Whether a plan node keeps state across micro-batches: a streaming aggregation, a streaming
 * deduplication, a join of two streams, or arbitrary stateful processing (Spark plans these as
 * StateStoreSave, StreamingDeduplicate, StreamingSymmetricHashJoin, TransformWithState and
 * FlatMapGroupsWithState). The one definition the checker, explain,
 * the repartition stages, co-partitioning and the planner (operator ids) share.
 */
export function isStatefulOperator(n: LogicalPlan): boolean {
  switch (n.kind) {
    case 'Aggregate':
    case 'Deduplicate':
    case 'StatefulProcessing':
      return isStreaming(n);
    case 'Join':
      return isStreaming(n.left) && isStreaming(n.right);
    default:
      return false;
  }
}
