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
  /**
   * The watermark (ms) of the batch's output, which a repartition hop carries to the next stage:
   * the one the batch ran with, propagated through its operators (a time-interval join delays it).
   */
  readonly watermarkMs?: number;
  /**
   * Which run of the batch this is, when runs differ (absent: 0, the batch as planned). A planned
   * batch whose oldest records expired from the stream re-runs over the rest, as revision n = the
   * number of records it lost; the record of that loss only grows and the commit freezes it, so
   * the committed run has the highest revision that ran. A sink keeps a write of a higher revision
   * of a batch over a lower one (a stale run of the same batch must not replace the committed answer).
   */
  readonly revision?: number;
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
   * The sink's limits on one row (key length, item size, encodable values), checked before any
   * write of a batch; absent when the sink takes any row.
   */
  readonly rowLimits?: SinkRowLimits;
  /**
   * Batch `batchId` of `partitionId` is committed in the checkpoint. Called after the commit and,
   * at start, for the last committed batch (the run that committed it may have stopped before
   * calling this): a sink that stages its output until the commit makes it visible here,
   * idempotently.
   */
  onCommitted?(partitionId: string, batchId: number): Promise<void>;
  /**
   * Evaluates what `addBatch` computes from one row alone (a partial aggregation's inputs), raising
   * what it would raise for that row; writes nothing. Lets row screening blame the row.
   */
  screenRow?(row: readonly unknown[]): void;
}

/** A refusal that every retry would repeat. */
export type RowRefusalCode =
  | 'SINK_KEY_TOO_LONG'
  | 'SINK_ITEM_TOO_LARGE'
  | 'SINK_VALUE_NOT_ENCODABLE'
  | 'SINK_ROW_REFUSED';

export interface RowRefusal {
  readonly code: RowRefusalCode;
  /** Which limit and the sizes involved; never a data value (reasons reach logs and dead letters). */
  readonly reason: string;
}

/** A sink's limits on one output row. */
export interface SinkRowLimits {
  /**
   * The row's identity in the sink (the DynamoDB item key, say): two runs of one batch that output
   * the same key produce the same result row. Kept in memory only; never logged.
   */
  rowKey(batch: SinkBatch, rowIndex: number): string;
  /** Why the sink cannot store the row, or null when it can. Pure: same answer on every call. */
  check(batch: SinkBatch, rowIndex: number): RowRefusal | null;
}
