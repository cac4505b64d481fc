import type { Sink, SinkBatch } from './sink.js';
import { ANY_OUTPUT_MODE } from './sink-output-modes.js';
import { toExternalRow } from './external-row.js';

/**
 * Spark's MemorySink: keeps every batch by id and ignores a batch id it already holds, so a
 * re-executed batch is not written twice. In complete mode the result is the last batch.
 */
export class MemorySink implements Sink {
  readonly description = 'MemorySink';
  readonly supportedOutputModes = ANY_OUTPUT_MODE;
  private readonly batches = new Map<number, SinkBatch>();
  private order: number[] = [];
  columns: readonly string[] = [];

  async addBatch(batch: SinkBatch): Promise<void> {
    if (this.batches.has(batch.batchId)) return;
    this.batches.set(batch.batchId, { ...batch, rows: batch.rows.map((r) => [...r]) });
    this.order.push(batch.batchId);
    this.columns = batch.columns;
  }

  /** Rows of every batch in write order (append/update), or the last batch (complete). */
  allRows(): unknown[][] {
    const last = this.lastBatch();
    if (last?.outputMode === 'complete') return last.rows.map((r) => [...r]);
    return this.order.flatMap((id) => this.batches.get(id)!.rows.map((r) => [...r]));
  }

  /**
   * The rows as objects keyed by column name (Spark's `collect()` of the memory table, as
   * `Row.asDict`), values as the deployed sinks write them: timestamps ISO-8601 UTC strings with
   * microseconds, windows `{ start, end }`, longs beyond 2^53 as bigint. `allRows()` keeps arrays.
   */
  collect(): Record<string, unknown>[] {
    const schema = this.lastBatch()?.schema ?? [];
    return this.allRows().map((row) => toExternalRow(row, schema));
  }

  /** `collect()` of the batches with id > `afterBatchId`. */
  collectAfter(afterBatchId: number): Record<string, unknown>[] {
    const schema = this.lastBatch()?.schema ?? [];
    return this.rowsAfter(afterBatchId).map((row) => toExternalRow(row, schema));
  }

  /** Rows of batches with id > `afterBatchId`. */
  rowsAfter(afterBatchId: number): unknown[][] {
    return this.order.filter((id) => id > afterBatchId).flatMap((id) => this.batches.get(id)!.rows.map((r) => [...r]));
  }

  lastBatch(): SinkBatch | undefined {
    const id = this.order[this.order.length - 1];
    return id === undefined ? undefined : this.batches.get(id);
  }

  get latestBatchId(): number {
    return this.order.length === 0 ? -1 : this.order[this.order.length - 1]!;
  }

  clear(): void {
    this.batches.clear();
    this.order = [];
  }
}
