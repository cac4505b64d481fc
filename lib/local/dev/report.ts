/**
 * How `sluice dev` shows a run: one progress line per batch (shard, batch id, input rows,
 * watermark, state rows, late rows dropped, dead letters, cost), the batch's output as a Spark
 * console-sink table with readable timestamps, and the final summary.
 */
import { formatTimestamp } from '../../core/timestamps.js';
import type { DataType } from '../../plan/data-types.js';
import type { StreamingQueryProgress } from '../../runtime/progress.js';
import { formatBatchTable } from '../../sinks/console-sink.js';
import { showValue } from '../../sinks/show-string.js';
import type { Sink, SinkBatch } from '../../sinks/sink.js';

export function formatWatermark(ms: number): string {
  return ms > 0 ? formatTimestamp(ms * 1000) : 'none';
}

function formatValue(type: DataType): (v: unknown) => string {
  return (v) => showValue(v, type);
}

/** The batch as Spark's console sink prints it, timestamps (also inside windows) readable. */
export function formatOutputTable(batch: SinkBatch): string {
  return formatBatchTable(batch, batch.schema.map((f) => formatValue(f.type)));
}

/** The batch's cells as the table prints them (for the --ui page). */
export function formatOutputCells(batch: SinkBatch): CapturedOutput['output'] {
  const formatters = batch.schema.map((f) => formatValue(f.type));
  return { columns: [...batch.columns], rows: batch.rows.map((r) => r.map((v, i) => (formatters[i] ?? String)(v))) };
}

export interface CapturedOutput {
  readonly table: string;
  readonly output: { readonly columns: readonly string[]; readonly rows: readonly (readonly string[])[] };
}

const round = (n: number): string => (Number.isInteger(n) ? String(n) : n.toFixed(1));

export function formatCost(cost: Readonly<Record<string, number>>): string {
  return `${round(cost.dynamoDbWriteUnits ?? 0)} WCU, ${round(cost.dynamoDbReadUnits ?? 0)} RCU, ${cost.s3Puts ?? 0} S3 PUTs`;
}

export function formatProgressLine(shardId: string, p: StreamingQueryProgress): string {
  const stateRows = p.stateOperators.reduce((n, op) => n + op.numRowsTotal, 0);
  const late = p.stateOperators.reduce((n, op) => n + op.numRowsDroppedByWatermark, 0);
  return [
    `[${shardId}] batch ${p.batchId}:`,
    `${p.numInputRows} input rows,`,
    `watermark ${formatWatermark(p.batchWatermarkMs)},`,
    `${stateRows} state rows,`,
    `${late} late rows dropped,`,
    ...(p.numRowsNullEventTime > 0 ? [`${p.numRowsNullEventTime} with a NULL event time,`] : []),
    `${p.numDeadLetteredRows} dead-lettered,`,
    `cost ${formatCost(p.cost)},`,
    `${p.sink.numOutputRows} output rows`,
  ].join(' ');
}

/**
 * Wraps the sink so that each batch's output is kept (as a table) until its progress line is
 * printed: `take` returns the table of the last write of (partition, batch).
 */
export class CapturingSink implements Sink {
  private readonly tables = new Map<string, CapturedOutput>();

  constructor(private readonly inner: Sink) {}

  get description(): string { return this.inner.description; }
  get supportedOutputModes(): Sink['supportedOutputModes'] { return this.inner.supportedOutputModes; }

  async addBatch(batch: SinkBatch): Promise<void> {
    await this.inner.addBatch(batch);
    this.tables.set(`${batch.partitionId}#${batch.batchId}`, { table: formatOutputTable(batch), output: formatOutputCells(batch) });
  }

  async onCommitted(partitionId: string, batchId: number): Promise<void> {
    await this.inner.onCommitted?.(partitionId, batchId);
  }

  screenRow(row: readonly unknown[]): void {
    this.inner.screenRow?.(row);
  }

  take(partitionId: string, batchId: number): CapturedOutput | undefined {
    const key = `${partitionId}#${batchId}`;
    const table = this.tables.get(key);
    this.tables.delete(key);
    return table;
  }
}
