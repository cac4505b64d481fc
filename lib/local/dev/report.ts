/**
 * How `sluice dev` shows a run: one progress line per batch (shard, batch id, input rows,
 * watermark, state rows, late rows dropped, dead letters, cost), the batch's output as a Spark
 * console-sink table with readable timestamps, and the final summary.
 */
import { stringifyWithLongs } from '../../core/long.js';
import { formatTimestamp } from '../../core/timestamps.js';
import type { DataType } from '../../plan/data-types.js';
import type { StreamingQueryProgress } from '../../runtime/progress.js';
import { formatBatchTable } from '../../sinks/console-sink.js';
import type { Sink, SinkBatch } from '../../sinks/sink.js';

export function formatWatermark(ms: number): string {
  return ms > 0 ? formatTimestamp(ms * 1000) : 'none';
}

function formatValue(type: DataType): (v: unknown) => string {
  return (v) => {
    if (v === null || v === undefined) return 'null';
    if (type === 'timestamp' && typeof v === 'number') return formatTimestamp(v);
    if (typeof type === 'object' && type.kind === 'struct' && typeof v === 'object') {
      const struct = v as Record<string, unknown>;
      return `{${type.fields.map((f) => formatValue(f.type)(struct[f.name])).join(', ')}}`;
    }
    if (typeof v === 'object') return stringifyWithLongs(v);
    return String(v);
  };
}

/** The batch as Spark's console sink prints it, timestamps (also inside windows) readable. */
export function formatOutputTable(batch: SinkBatch): string {
  return formatBatchTable(batch, batch.schema.map((f) => formatValue(f.type)));
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
  private readonly tables = new Map<string, string>();

  constructor(private readonly inner: Sink) {}

  get description(): string { return this.inner.description; }
  get supportedOutputModes(): Sink['supportedOutputModes'] { return this.inner.supportedOutputModes; }

  async addBatch(batch: SinkBatch): Promise<void> {
    await this.inner.addBatch(batch);
    this.tables.set(`${batch.partitionId}#${batch.batchId}`, formatOutputTable(batch));
  }

  async onCommitted(partitionId: string, batchId: number): Promise<void> {
    await this.inner.onCommitted?.(partitionId, batchId);
  }

  take(partitionId: string, batchId: number): string | undefined {
    const key = `${partitionId}#${batchId}`;
    const table = this.tables.get(key);
    this.tables.delete(key);
    return table;
  }
}
