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

  /**
   * The stored rows themselves, not copies: `addData` already copied them away from the caller,
   * and no operator writes into its input rows (projections build new rows, sinks get them
   * read-only and the memory sink copies), so a replay from an old offset sees the same values.
   */
  getBatch(start: Offset | null, end: Offset): unknown[][] {
    const from = start === null ? 0 : (start as number);
    const to = end as number;
    if (to - from === 1) return this.blocks[from]!.slice();
    const rows: unknown[][] = [];
    for (let b = from; b < to; b++) {
      const block = this.blocks[b]!;
      for (let i = 0; i < block.length; i++) rows.push(block[i]!);
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
