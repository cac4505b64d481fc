import { newEvalContext } from '../execution/eval-context.js';
import { planQuery } from '../execution/incremental-planner.js';
import { isStreaming, type LogicalPlan } from '../plan/logical-plan.js';
import type { BatchContext } from '../execution/physical.js';
import { AnalysisError } from '../errors/sluice-error.js';

/**
 * Runs a static (batch) query once over its whole input: `df.collect()`. Takes the plan (or a
 * DataFrame, which has one), so the runtime needs nothing from the API layer above it.
 */
export function runBatchQuery(query: LogicalPlan | { readonly plan: LogicalPlan }): unknown[][] {
  const plan = 'kind' in query ? query : query.plan;
  if (isStreaming(plan)) {
    throw new AnalysisError('Queries with streaming sources must be executed with writeStream.start()', {
      code: 'STREAMING_QUERY_COLLECTED', errorClass: '_LEGACY_ERROR_TEMP_1160', hint: 'use df.writeStream...start() for a streaming DataFrame.',
    });
  }
  const evalContext = newEvalContext();
  evalContext.batchTimestampMs = Date.now();
  const physical = planQuery(plan, evalContext);
  const ctx: BatchContext = {
    batchId: 0,
    sourceRows: new Map(),
    eval: evalContext,
    outputMode: 'append',
    hasWatermark: false,
    lateEventsWatermarkMs: () => 0,
    evictionWatermarkMs: () => 0,
    store: () => {
      throw new Error('a batch query has no state');
    },
  };
  return physical.root.execute(ctx);
}
