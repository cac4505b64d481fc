/** Per-batch values expressions may read; one object per running query, updated before each batch. */
export interface EvalContext {
  /** `current_timestamp()`: the batch timestamp, fixed for the whole batch and kept on re-execution. */
  batchTimestampMs: number;
  /** Partition-local counter for `monotonically_increasing_id()`. */
  nextRowId: number;
}

export function newEvalContext(): EvalContext {
  return { batchTimestampMs: 0, nextRowId: 0 };
}
