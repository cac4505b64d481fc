import type { Sink, SinkBatch } from './sink.js';
import { ANY_OUTPUT_MODE } from './sink-output-modes.js';

/** The sink's function: the batch's rows, id and columns, and the whole batch (its schema). */
export type ForeachBatchFunction = (rows: readonly (readonly unknown[])[], batchId: number, columns: readonly string[], batch: SinkBatch) => void | Promise<void>;

/**
 * The sink behind `foreachBatch(fn)` (which hands `fn` a DataFrame; this raw form hands rows, for
 * benchmarks and tools). The function sees each batch once per attempt; it should be idempotent by batch id.
 */
export class ForeachBatchSink implements Sink {
  readonly description = 'ForeachBatchSink';
  readonly supportedOutputModes = ANY_OUTPUT_MODE;
  constructor(private readonly fn: ForeachBatchFunction) {}
  async addBatch(batch: SinkBatch): Promise<void> {
    await this.fn(batch.rows, batch.batchId, batch.columns, batch);
  }
}
