import type { Sink, SinkBatch } from './sink.js';
import { ANY_OUTPUT_MODE } from './sink-output-modes.js';
import { showValue, truncateCell } from './show-string.js';

export interface ShowOptions {
  /** Rows printed per batch (Spark's console sink option `numRows`, default 20). */
  readonly numRows?: number;
  /** Cells longer than this are cut (`truncate`, default 20 as in Spark; 0 = never). */
  readonly truncate?: number;
}

/**
 * Formats a batch like Spark's console sink: a header line and an ASCII table, cells as
 * Spark's showString prints them (from the batch's schema), right-aligned, at least 3 wide.
 * `formatters` replace the per-column formatting (the `sluice dev` report keeps whole cells).
 */
export function formatBatchTable(batch: SinkBatch, formatters: readonly ((v: unknown) => string)[] = [], options: ShowOptions = {}): string {
  const numRows = options.numRows ?? Number.POSITIVE_INFINITY;
  const truncate = options.truncate ?? 0;
  const header = [...batch.columns].map((h) => truncateCell(h, truncate));
  const format = (v: unknown, i: number): string => (formatters[i] ?? ((x: unknown) => showValue(x, batch.schema[i]?.type)))(v);
  const body = batch.rows.slice(0, numRows).map((r) => r.map((v, i) => truncateCell(format(v, i), truncate)));
  const widths = header.map((h, i) => Math.max(3, h.length, ...body.map((r) => r[i]!.length)));
  const line = `+${widths.map((w) => '-'.repeat(w)).join('+')}+`;
  const fmt = (cells: readonly string[]): string => `|${cells.map((c, i) => c.padStart(widths[i]!)).join('|')}|`;
  const more = batch.rows.length > numRows ? [`only showing top ${numRows} row${numRows === 1 ? '' : 's'}`] : [];
  return [
    '-------------------------------------------',
    `Batch: ${batch.batchId}`,
    '-------------------------------------------',
    line,
    fmt(header),
    line,
    ...body.map(fmt),
    line,
    ...more,
  ].join('\n');
}

/** Spark's console sink: prints each batch (for demos and local runs), 20 rows, cells cut at 20. */
export class ConsoleSink implements Sink {
  readonly description = 'ConsoleSink';
  readonly supportedOutputModes = ANY_OUTPUT_MODE;
  constructor(
    private readonly print: (text: string) => void = (t) => process.stdout.write(`${t}\n`),
    private readonly formatters: readonly ((v: unknown) => string)[] = [],
    private readonly options: ShowOptions = { numRows: 20, truncate: 20 },
  ) {}
  async addBatch(batch: SinkBatch): Promise<void> {
    this.print(formatBatchTable(batch, this.formatters, this.options));
  }
}
