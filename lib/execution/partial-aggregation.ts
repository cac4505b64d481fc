/**
 * Partial aggregation before a repartition hop (Spark's partial/final aggregation split): the
 * sending stage folds a batch's rows into one row per group, `[max event time (micros, null
 * without), ...key values, ...buffers]`, and the receiving aggregate merges those buffers into its
 * state instead of folding rows in. A batch where grouping saves little (keys that rarely repeat)
 * ships its rows; the receiver turns them into the same form, so its aggregate sees one format.
 */
import type { PartialAggregation } from '../analysis/stages.js';
import { compileAggregation, type CompiledAggregation } from './aggregation.js';
import { newEvalContext } from './eval-context.js';

export interface PartialAggregator {
  readonly aggregation: CompiledAggregation;
  /** One row per group of `rows`, in first-seen order (a re-run batch gives the same rows). */
  toPartialRows(rows: readonly (readonly unknown[])[]): unknown[][];
}

export function compilePartialAggregator(partial: PartialAggregation, eventTimeOrdinal: number | null): PartialAggregator {
  const aggregation = compileAggregation(partial.groupingExprs, partial.aggregateExprs, partial.input, newEvalContext());
  return {
    aggregation,
    toPartialRows(rows) {
      const groups = new Map<string, { keyValues: unknown[]; buffers: unknown[]; maxEventTime: number | null }>();
      for (const row of rows) {
        const t = eventTimeOrdinal === null ? null : row[eventTimeOrdinal];
        aggregation.forEachKey(row as unknown[], (keyValues, encoded) => {
          let group = groups.get(encoded);
          if (!group) groups.set(encoded, group = { keyValues, buffers: aggregation.initialBuffers(), maxEventTime: null });
          aggregation.updateBuffers(group.buffers, row as unknown[]);
          if (typeof t === 'number' && (group.maxEventTime === null || t > group.maxEventTime)) group.maxEventTime = t;
        });
      }
      return [...groups.values()].map((g) => [g.maxEventTime, ...g.keyValues, ...g.buffers]);
    },
  };
}
