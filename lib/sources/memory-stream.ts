import type { StructField } from '../plan/data-types.js';
import type { MicroBatchStream, Offset } from './source.js';

let memoryStreamCount = 0;

type Block =
  | { readonly count: number; readonly columns: readonly unknown[][]; readonly rows: null }
  | { readonly count: number; readonly columns: null; readonly rows: readonly unknown[][] };

/**
 * Spark's MemoryStream: each `addData` call is one offset, so an empty `addData` still makes a
 * batch. Rows are positional arrays in schema order (timestamps in microseconds).
 */
export class MemoryStream implements MicroBatchStream {
  readonly name: string;
  /**
   * One block per `addData` call. Rows of the schema's width are kept column by column: a column
   * of numbers is then one unboxed array instead of a boxed number per row, and every call keeps
   * a handful of objects alive rather than one or more per row (all data is retained for replay).
   */
  private readonly blocks: Block[] = [];

  constructor(readonly schema: readonly StructField[], name?: string) {
    this.name = name ?? `MemoryStream[${memoryStreamCount++}]`;
  }

  addData(rows: readonly (readonly unknown[])[]): number {
    const width = this.schema.length;
    if (rows.every((r) => r.length === width)) {
      const columns: unknown[][] = [];
      for (let c = 0; c < width; c++) {
        const column = new Array<unknown>(rows.length);
        for (let i = 0; i < rows.length; i++) column[i] = rows[i]![c];
        columns.push(column);
      }
      this.blocks.push({ count: rows.length, columns, rows: null });
    } else {
      this.blocks.push({ count: rows.length, columns: null, rows: rows.map((r) => [...r]) });
    }
    return this.blocks.length;
  }

  initialOffset(): Offset | null {
    return null;
  }

  latestOffset(): Offset | null {
    return this.blocks.length === 0 ? null : this.blocks.length;
  }

  /** Fresh row arrays (operators and sinks may keep them) of the blocks `(start, end]`. */
  getBatch(start: Offset | null, end: Offset): unknown[][] {
    const from = start === null ? 0 : (start as number);
    const rows: unknown[][] = [];
    for (let b = from; b < (end as number); b++) {
      const block = this.blocks[b]!;
      if (block.rows !== null) {
        for (const r of block.rows) rows.push([...r]);
        continue;
      }
      const { columns, count } = block;
      const width = columns.length;
      for (let i = 0; i < count; i++) {
        const row = new Array<unknown>(width);
        for (let c = 0; c < width; c++) row[c] = columns[c]![i];
        rows.push(row);
      }
    }
    return rows;
  }

  commit(): void {
    // Tests replay from any offset after a restart, so nothing is dropped.
  }

  /** Forget all data (Spark's `MemoryStream.reset()` used by some tests). */
  reset(): void {
    this.blocks.length = 0;
  }
}
