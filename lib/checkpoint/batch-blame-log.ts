import type { Offset } from '../sources/source.js';

/**
 * How far the search for a planned batch's failing records got: the records withheld from it so
 * far (each already dead-lettered, with its reason) and where the search resumes. Written by the
 * invocation that runs out of time, read by the next run of the same planned batch, so a batch
 * holding more failing records than one invocation can find still commits after a bounded number
 * of invocations instead of starting the search over on every retry.
 */
export interface BatchBlame {
  readonly formatVersion: number;
  readonly batchId: number;
  /** The planned batch's end offsets: an entry written for another plan of this batch id is ignored. */
  readonly offsets: Readonly<Record<string, Offset | null>>;
  /** Sequence number and reason of each withheld record, in the order they were found. */
  readonly withheld: readonly (readonly [string, string])[];
  /**
   * The batch's records before this one (those not withheld) pass when run alone, as a prefix:
   * the search for the next failing record starts here. Null: nothing known.
   */
  readonly passingThrough: string | null;
  /**
   * The shortest prefix known to fail (with `withheld` held out) ends with this record: the
   * culprit is in between. Null: nothing known (the whole batch fails).
   */
  readonly failingThrough?: string | null;
  /** Whether the per-record screen ran on this batch (what it found is in `withheld`). */
  readonly screened: boolean;
}

export const BATCH_BLAME_FORMAT_VERSION = 1;

/** One entry per partition and planned batch id, beside the checkpoint's logs. */
export interface BatchBlameLog {
  get(batchId: number): Promise<BatchBlame | undefined>;
  /** Replaces the batch's entry (the search only grows it). */
  put(blame: BatchBlame): Promise<void>;
  /** Once the batch committed, its entry is of no use. */
  remove(batchId: number): Promise<void>;
}

/** Whether `blame` was written for the batch planned with these end offsets. */
export function blameIsFor(blame: BatchBlame, batchId: number, offsets: ReadonlyMap<string, Offset | null>): boolean {
  return blame.batchId === batchId && canonical(blame.offsets) === canonical(Object.fromEntries(offsets));
}

/** JSON with object keys sorted: the same offsets give the same text whatever their key order. */
function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
}

/** The in-memory twin (tests, `sluice dev` without DynamoDB). */
export class MemoryBatchBlameLog implements BatchBlameLog {
  private readonly entries = new Map<number, string>();

  async get(batchId: number): Promise<BatchBlame | undefined> {
    const text = this.entries.get(batchId);
    return text === undefined ? undefined : JSON.parse(text) as BatchBlame;
  }

  async put(blame: BatchBlame): Promise<void> {
    this.entries.set(blame.batchId, JSON.stringify(blame));
  }

  async remove(batchId: number): Promise<void> {
    this.entries.delete(batchId);
  }

  get size(): number {
    return this.entries.size;
  }
}
