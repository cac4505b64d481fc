import type { StateOperatorProgress } from '../execution/physical.js';

/** Spark's StreamingQueryProgress, plus Sluice's cost and bad-input counters. */
export interface StreamingQueryProgress {
  readonly id: string;
  readonly runId: string;
  readonly name: string | null;
  readonly timestamp: string;
  readonly batchId: number;
  readonly batchDuration: number;
  readonly numInputRows: number;
  /**
   * Rows ÷ seconds since the previous trigger started (on Lambda: the previous batch of the
   * partition, whichever invocation ran it); 0 without one; absent when that interval is zero
   * (Spark's NaN/∞, left out of its JSON). See progress-rates.ts.
   */
  readonly inputRowsPerSecond?: number;
  /** Rows ÷ seconds this trigger took (at least 1 ms). */
  readonly processedRowsPerSecond: number;
  readonly durationMs: Readonly<Record<string, number>>;
  /** `{}` without a watermark; otherwise `watermark` and, when rows arrived, min/max/avg. */
  readonly eventTime: Readonly<Record<string, string>>;
  /** The watermark (ms) this batch ran with. */
  readonly batchWatermarkMs: number;
  readonly stateOperators: readonly StateOperatorProgress[];
  /** Per source, Spark's SourceProgress: its rows, and its rates over the same intervals as the batch's. */
  readonly sources: readonly SourceProgress[];
  readonly sink: { description: string; numOutputRows: number };
  /** Records routed to the dead-letter location in this batch (Sluice). */
  readonly numDeadLetteredRows: number;
  /**
   * Rows whose event-time (watermark) column was NULL in this batch (Sluice): they never move the
   * watermark, and a `window()` over them drops them (Spark's window has none for a NULL time).
   * Records whose event time was too far ahead or outside the range held exactly are dead letters,
   * counted in `numDeadLetteredRows` with their reason.
   */
  readonly numRowsNullEventTime: number;
  /**
   * What this batch cost (Sluice): DynamoDB read/write units, S3 and Kinesis requests, state
   * bytes, as the adapters counted them (see CostMeter). Empty for in-memory runs.
   */
  readonly cost: Readonly<Record<string, number>>;
}

/** Spark's SourceProgress (rates absent as in StreamingQueryProgress when the interval is zero). */
export interface SourceProgress {
  readonly description: string;
  readonly startOffset: unknown;
  readonly endOffset: unknown;
  readonly numInputRows: number;
  readonly inputRowsPerSecond?: number;
  readonly processedRowsPerSecond?: number;
}
