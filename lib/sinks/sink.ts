import type { OutputMode } from '../core/output-mode.js';
import type { StructField } from '../plan/data-types.js';

/** One batch handed to a sink, with its column names. */
export interface SinkBatch {
  readonly batchId: number;
  readonly columns: readonly string[];
  readonly rows: readonly (readonly unknown[])[];
  readonly outputMode: OutputMode;
  /** Column types, for sinks that write typed values (timestamps are epoch micros in rows). */
  readonly schema: readonly StructField[];
  /** The state partition (Kinesis shard) that produced the batch: batch ids count per partition. */
  readonly partitionId: string;
}

/**
 * A streaming sink. `addBatch` must be idempotent per batch id: after a crash the same batch is
 * written again with the same rows, and must not show twice.
 */
export interface Sink {
  readonly description: string;
  /** Which output modes this sink can honour, checked before the query starts. */
  readonly supportedOutputModes: readonly OutputMode[];
  addBatch(batch: SinkBatch): Promise<void>;
  /**
   * Batch `batchId` of `partitionId` is committed in the checkpoint. Called after the commit and,
   * at start, for the last committed batch (the run that committed it may have stopped before
   * calling this): a sink that stages its output until the commit makes it visible here,
   * idempotently.
   */
  onCommitted?(partitionId: string, batchId: number): Promise<void>;
}
