/**
 * Spark's triggers as a deployed query runs them on Lambda. A Kinesis event source mapping
 * invokes the function per shard as records arrive; its batching window
 * (MaximumBatchingWindowInSeconds, at most 300 s) is how long it gathers records before an
 * invocation, which is what `processingTime(interval)` asks for. `availableNow` (and the deprecated
 * `once`) process what is in the stream and stop: on Lambda, the scheduled function's drain mode
 * reads every shard up to its end and runs batches until caught up, on the schedule's rate, with no
 * mapping invoking the function in between.
 */
import { IllegalArgumentError } from '../errors/sluice-error.js';
import type { Trigger } from '../runtime/trigger.js';

/** Lambda's largest batching window for a Kinesis event source mapping. */
export const MAX_BATCHING_WINDOW_SECONDS = 300;

export interface DeployedTrigger {
  /** The source mapping's batching window in seconds; null: the construct's default (1 s). */
  readonly batchingWindowSeconds: number | null;
  /** No source mapping runs: the schedule drains the stream (availableNow). */
  readonly drain: boolean;
  /** What the trigger means on Lambda, for explain. */
  readonly description: string;
}

export function deployedTrigger(trigger: Trigger | undefined): DeployedTrigger {
  if (!trigger) {
    return { batchingWindowSeconds: null, drain: false, description: 'default (Spark: as fast as possible): each shard\'s records invoke the function as they arrive (batching window 1 s).' };
  }
  if (trigger.kind === 'processingTime') {
    const seconds = Math.ceil(trigger.intervalMs / 1000);
    if (seconds > MAX_BATCHING_WINDOW_SECONDS) {
      throw new IllegalArgumentError(
        `trigger processingTime(${trigger.intervalMs / 1000} seconds) cannot be deployed: a Kinesis event source mapping gathers records for at most ${MAX_BATCHING_WINDOW_SECONDS} seconds `
        + '(MaximumBatchingWindowInSeconds) before it invokes the function.',
        { code: 'INVALID_TRIGGER', hint: `use processingTime of at most ${MAX_BATCHING_WINDOW_SECONDS} seconds, or trigger availableNow with the construct's scheduleRate set to the interval (the scheduled function drains the stream at that rate).` },
      );
    }
    return {
      batchingWindowSeconds: seconds,
      drain: false,
      description: `processingTime(${seconds} s): each shard's mapping gathers records for up to ${seconds} s (MaximumBatchingWindowInSeconds; sooner when a batch fills) and then invokes the function, which runs the batches due.`,
    };
  }
  return {
    batchingWindowSeconds: null,
    drain: true,
    description: `${trigger.kind}: no mapping invokes the function on arrival; the scheduled function, at its rate, drains every shard to its end and runs batches until caught up (Spark's availableNow), then stops until the next run.`,
  };
}
