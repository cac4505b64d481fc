/**
 * A spark-diff case: the conformance scenarios' engine-neutral inputs and query ops (see
 * test/conformance/scenario-query.ts), with steps as data for each input. A step names the inputs
 * it feeds; `[]` adds an empty offset (one data batch without rows), an input absent from a step
 * gets no offset. Timestamps are seconds since the epoch (fractions allowed), so both sides read
 * the same number.
 */
export type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface DiffCase {
  readonly id: string;
  readonly shape: string;
  readonly inputs: readonly Json[];
  readonly query: readonly Json[];
  readonly outputMode: 'append' | 'update' | 'complete';
  readonly conf?: Record<string, string>;
  readonly steps: readonly Record<string, unknown[][]>[];
  /** Columns whose arrays have no order in Spark (collect_set): sorted before comparing. */
  readonly unorderedArrays?: readonly string[];
  readonly notes?: string;
}

export interface BatchProgress {
  readonly numInputRows: number;
  readonly watermarkMs: number | null;
  readonly stateRows: readonly number[];
  readonly droppedByWatermark: readonly number[];
}

export interface BatchRecord {
  readonly batchId: number;
  readonly rows: unknown[][];
  readonly progress: BatchProgress | null;
}

export interface Refusal {
  readonly phase: 'definition' | 'start' | 'runtime';
  readonly errorClass: string | null;
  readonly message: string;
  /** Spark's whole message: a batch failure arrives wrapped (e.g. in foreachBatch's error), the cause inside. */
  readonly detail?: string;
}

/** What one engine did with a case: per step, the batches it ran; or where it refused. */
export interface EngineResult {
  readonly id: string;
  readonly steps: BatchRecord[][];
  readonly refusal: Refusal | null;
  readonly harnessError?: string;
  readonly seconds?: number;
}
