import type { QueryFingerprint } from '../checkpoint/checkpoint.js';
import type { PhysicalQuery } from '../execution/incremental-planner.js';
import type { OutputMode } from '../core/output-mode.js';
import type { Sink } from '../sinks/sink.js';
import type { MicroBatchStream } from '../sources/source.js';
import { AnalysisError } from '../errors/sluice-error.js';

export function fingerprintOf(
  options: { outputMode: OutputMode; sink: Sink },
  physical: PhysicalQuery,
  sources: readonly MicroBatchStream[],
): QueryFingerprint {
  return {
    outputMode: options.outputMode,
    sink: options.sink.description,
    sources: sources.map((s) => s.name),
    statefulOperators: [...physical.statefulOperators]
      .sort((a, b) => a.operatorId - b.operatorId)
      .map((op) => ({ operatorId: op.operatorId, kind: op.nodeName, stateSchema: op.stateSchema })),
  };
}

/**
 * A restarted query must keep what its state and offsets mean: the output mode, the stateful
 * operators and their state layout. Stateless changes (a new filter, a projection) are fine.
 */
export function checkFingerprint(stored: QueryFingerprint, current: QueryFingerprint): void {
  const changes: string[] = [];
  if (stored.outputMode !== current.outputMode) changes.push(`output mode changed from ${stored.outputMode} to ${current.outputMode}`);
  if (stored.statefulOperators.length !== current.statefulOperators.length) {
    changes.push(`the number of stateful operators changed from ${stored.statefulOperators.length} to ${current.statefulOperators.length}`);
  } else {
    stored.statefulOperators.forEach((op, i) => {
      const now = current.statefulOperators[i]!;
      if (op.kind !== now.kind) changes.push(`stateful operator ${op.operatorId} changed from ${op.kind} to ${now.kind}`);
      else if (op.stateSchema !== now.stateSchema) changes.push(describeStateChange(op.operatorId, op.kind, op.stateSchema, now.stateSchema));
    });
  }
  const removed = stored.sources.filter((s) => !current.sources.includes(s));
  if (removed.length > 0) changes.push(`sources removed: ${removed.join(', ')}`);
  if (changes.length > 0) {
    throw new AnalysisError(`The query is not compatible with its checkpoint: ${changes.join('; ')}.`, {
      code: 'INCOMPATIBLE_CHECKPOINT',
      errorClass: 'STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA',
      hint: 'revert the change, or start the changed query fresh: a new checkpoint location in memory, or a new query name '
        + 'on AWS (the checkpoint and state tables are keyed by it); its state then starts empty.',
    });
  }
}

/** `aggregate(keys=[..], aggs=[..])` → "grouping keys changed from [a] to [b]", field by field. */
function describeStateChange(operatorId: number, kind: string, before: string, after: string): string {
  const fields = (schema: string): Map<string, string> => new Map([...schema.matchAll(/(\w+)=(\[[^\]]*\]|[^,)]+)/g)].map((m) => [m[1]!, m[2]!]));
  const was = fields(before);
  const now = fields(after);
  const names: Record<string, string> = { keys: 'state keys', aggs: 'aggregates', withinWatermark: 'withinWatermark', session: 'session column' };
  const diffs = [...new Set([...was.keys(), ...now.keys()])]
    .filter((f) => was.get(f) !== now.get(f))
    .map((f) => `${names[f] ?? f} changed from ${was.get(f) ?? '(none)'} to ${now.get(f) ?? '(none)'}`);
  return `operator ${operatorId} (${kind}): ${diffs.length > 0 ? diffs.join(', ') : `state changed from ${before} to ${after}`}`;
}
