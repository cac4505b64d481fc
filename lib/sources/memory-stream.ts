import type { StructField } from '../plan/data-types.js';
import type { MicroBatchStream, Offset } from './source.js';

let memoryStreamCount = 0;

/**
 * Spark's MemoryStream: each `addData` call is one offset, so an empty `addData` still makes a
 * batch. Rows are positional arrays in schema order (timestamps in microseconds).
 */
export class MemoryStream implements MicroBatchStream {
  readonly name: string;
  private readonly blocks: unknown[][][] = [];

  constructor(readonly schema: readonly StructField[], name?: string) {
    this.name = name ?? `MemoryStream[${memoryStreamCount++}]`;
  }

  addData(rows: readonly (readonly unknown[])[]): number {
    this.blocks.push(rows.map((r) => [...r]));
    return this.blocks.length;
  }

  initialOffset(): Offset | null {
    return null;
  }

  latestOffset(): Offset | null {
    return this.blocks.length === 0 ? null : this.blocks.length;
  }

  getBatch(start: Offset | null, end: Offset): unknown[][] {
    const from = start === null ? 0 : (start as number);
    return this.blocks.slice(from, end as number).flat().map((r) => [...r]);
  }

  commit(): void {
    // Tests replay from any offset after a restart, so nothing is dropped.
  }

  /** Forget all data (Spark's `MemoryStream.reset()` used by some tests). */
  reset(): void {
    this.blocks.length = 0;
  }
}
