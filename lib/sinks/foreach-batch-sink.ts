import type { Sink, SinkBatch } from './sink.js';
import { ANY_OUTPUT_MODE } from './sink-output-modes.js';

export type ForeachBatchFunction = (rows: readonly (readonly unknown[])[], batchId: number, columns: readonly string[]) => void | Promise<void>;

/** `foreachBatch(fn)`: the user's function sees each batch once per attempt; it should be idempotent by batch id. */
export class ForeachBatchSink implements Sink {
  readonly description = 'ForeachBatchSink';
  readonly supportedOutputModes = ANY_OUTPUT_MODE;
  constructor(private readonly fn: ForeachBatchFunction) {}
  async addBatch(batch: SinkBatch): Promise<void> {
    await this.fn(batch.rows, batch.batchId, batch.columns);
  }
}
