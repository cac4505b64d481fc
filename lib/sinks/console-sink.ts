import { formatTimestamp } from '../core/timestamps.js';
import type { Sink, SinkBatch } from './sink.js';
import { ANY_OUTPUT_MODE } from './sink-output-modes.js';

function render(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'object') {
    if ('start' in (v as object) && 'end' in (v as object)) {
      const w = v as { start: number; end: number };
      return `{${formatTimestamp(w.start)}, ${formatTimestamp(w.end)}}`;
    }
    return JSON.stringify(v);
  }
  return String(v);
}

/** Formats a batch like Spark's console sink: a header line and an ASCII table. */
export function formatBatchTable(batch: SinkBatch, formatters: readonly ((v: unknown) => string)[] = []): string {
  const header = [...batch.columns];
  const body = batch.rows.map((r) => r.map((v, i) => (formatters[i] ?? render)(v)));
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => r[i]!.length)));
  const line = `+${widths.map((w) => '-'.repeat(w)).join('+')}+`;
  const fmt = (cells: readonly string[]): string => `|${cells.map((c, i) => c.padStart(widths[i]!)).join('|')}|`;
  return [
    '-------------------------------------------',
    `Batch: ${batch.batchId}`,
    '-------------------------------------------',
    line,
    fmt(header),
    line,
    ...body.map(fmt),
    line,
  ].join('\n');
}

/** Spark's console sink: prints each batch (for demos and local runs). */
export class ConsoleSink implements Sink {
  readonly description = 'ConsoleSink';
  readonly supportedOutputModes = ANY_OUTPUT_MODE;
  constructor(private readonly print: (text: string) => void = (t) => process.stdout.write(`${t}\n`), private readonly formatters: readonly ((v: unknown) => string)[] = []) {}
  async addBatch(batch: SinkBatch): Promise<void> {
    this.print(formatBatchTable(batch, this.formatters));
  }
}
