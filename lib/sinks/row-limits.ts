/**
 * What a sink cannot store, decided before it writes anything. A row whose key is too long, whose
 * item is too large, or whose values the sink cannot encode fails on every retry: left to the
 * write, it blocks its shard until the records expire, and a batch that fails half-way leaves rows
 * that no committed batch holds. A sink that has such limits declares them here, as a pure check
 * per output row (no IO), and the shard invocation applies the query's `onUnwritableRow` policy.
 */
import { StreamingQueryError } from '../errors/sluice-error.js';
import type { RowRefusal, SinkBatch, SinkRowLimits } from './sink.js';

export type { RowRefusal, RowRefusalCode, SinkRowLimits } from './sink.js';

/**
 * What happens to a result row the sink cannot store (the sink option `onUnwritableRow`):
 * 'dead-letter' its input records; 'spill' (DynamoDB sink) moves an oversized item's large values
 * to S3 with pointers in the item, and dead-letters only what spilling cannot fix (a key too long).
 */
export type UnwritableRowPolicy = 'dead-letter' | 'spill';
export const UNWRITABLE_ROW_POLICIES = ['dead-letter', 'spill'] as const satisfies readonly UnwritableRowPolicy[];

export interface UnwritableRow {
  readonly rowIndex: number;
  readonly rowKey: string;
  readonly refusal: RowRefusal;
}

/** Every row of `batch` the sink would refuse, in row order. */
export function findUnwritableRows(limits: SinkRowLimits, batch: SinkBatch): UnwritableRow[] {
  const found: UnwritableRow[] = [];
  for (let i = 0; i < batch.rows.length; i++) {
    const refusal = limits.check(batch, i);
    if (refusal) found.push({ rowIndex: i, rowKey: limits.rowKey(batch, i), refusal });
  }
  return found;
}

/** How a refusal reads in a dead letter and a log line: the code first, then the limit. */
export function describeRefusal(refusal: RowRefusal): string {
  return `${refusal.code}: ${refusal.reason}`;
}

/**
 * A batch holds rows the sink cannot store; thrown before any of its rows is written. Not
 * retryable: the same batch gives the same rows.
 */
export class UnwritableRowsError extends StreamingQueryError {
  constructor(sink: string, batchId: number, readonly rows: readonly UnwritableRow[]) {
    const codes = [...new Set(rows.map((r) => r.refusal.code))].join(', ');
    super(`${sink}: batch ${batchId} has ${rows.length} row(s) the sink cannot store (${codes}): ${describeRefusal(rows[0]!.refusal)}`, {
      code: 'SINK_ROWS_UNWRITABLE', retryable: false, context: { batchId, codes },
      hint: "the query's sink option onUnwritableRow decides what happens (default 'dead-letter': the rows' input records are dead-lettered with this reason).",
    });
  }
}

/** The first UnwritableRowsError in an error's cause chain (the engine wraps sink errors). */
export function unwritableRowsIn(error: unknown): UnwritableRowsError | null {
  for (let e = error, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof UnwritableRowsError) return e;
  }
  return null;
}
