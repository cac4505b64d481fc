/**
 * Probes: re-runs of a planned batch from the same loaded state on part of its records, writing
 * nothing (the guarded sink throws the output back as a ProbeOutput before any write). The searches
 * for the records that fail a batch (a data error, lib/query/data-error-search.ts) or produce a
 * row the sink refuses (lib/query/unwritable-rows.ts) are made of them. Every run of a search goes
 * through a RunTimer, so a search never starts a run that may not finish before the invocation's
 * deadline: it stops with SearchPausedError instead, the batch is left uncommitted and retried.
 */
import type { StreamExecution } from '../runtime/stream-execution.js';
import type { DeadLetterRecord, DeadLetterWriter } from '../sources/dead-letter.js';
import type { Offset } from '../sources/source.js';
import type { BatchBlameLog } from '../checkpoint/batch-blame-log.js';
import type { RowRefusal } from '../sinks/row-limits.js';

/** A probe's output: the rows the sink would refuse, by row key. Thrown to stop before any write. */
export class ProbeOutput extends Error {
  constructor(readonly refused: ReadonlyMap<string, RowRefusal>) {
    super('probe run: nothing is written');
  }
}

/**
 * A search for a batch's failing records stopped because the invocation's deadline is too close
 * for another run of the batch: nothing was committed; what the search found so far is recorded
 * (BatchBlameLog) and the next invocation resumes from there.
 */
export class SearchPausedError extends Error {
  constructor(readonly batchId: number | undefined) {
    super(`batch ${batchId ?? '?'}: the search for its failing records stopped before the deadline; the retry resumes it`);
    this.name = 'SearchPausedError';
  }
}

/** Times a search's runs and refuses one that may not finish in the invocation's time. */
export class RunTimer {
  private longestRunMs = 0;

  /** `hasTimeFor(longestRunMs)`: whether a run as long as the longest so far can still finish in time. */
  constructor(private readonly hasTimeFor: (longestRunMs: number) => boolean = () => true) {}

  /** A run the invocation's loop already decided to start. */
  async measured<T>(run: () => Promise<T>): Promise<T> {
    const startedMs = Date.now();
    try {
      return await run();
    } finally {
      this.longestRunMs = Math.max(this.longestRunMs, Date.now() - startedMs);
    }
  }

  /** A further run of the search: SearchPausedError when it may not finish in time. */
  async checked<T>(batchId: number | undefined, run: () => Promise<T>): Promise<T> {
    if (!this.hasTimeFor(this.longestRunMs)) throw new SearchPausedError(batchId);
    return this.measured(run);
  }
}

/** A source that can hold records out of their batch (the Kinesis shard source). */
export interface WithholdingSource {
  readonly name: string;
  withhold(reasons: ReadonlyMap<string, string>): void;
  deadLetters(): DeadLetterRecord[];
  /**
   * The record of each row the batch `(start, end]` reads, in row order. Absent when a row is not
   * one record's own values (stage 2's partial aggregates): there is nothing to screen per record.
   */
  rowSequenceNumbers?(start: Offset | null, end: Offset): string[];
}

/** What a search runs: the partition's execution over its guarded sink and withholding source. */
export interface ProbeTarget {
  readonly execution: StreamExecution;
  readonly sink: { probing: boolean };
  /** Null when the stage's source cannot withhold records (stage 2): refused rows are then left out. */
  readonly source: WithholdingSource | null;
  /**
   * Stage 2: its internal stream's rows, which the data-error search holds out one by one (a row
   * raising in the stage's stateful operator). Not for refused rows: those are left out as above.
   */
  readonly rowSource?: WithholdingSource;
  /** The planned batch's records that became rows, in shard order. */
  readonly batchSequenceNumbers: () => readonly string[];
  readonly deadLetters: DeadLetterWriter;
  /** Where a search paused by the deadline records how far it got (absent: each retry starts over). */
  readonly blameLog?: BatchBlameLog;
  readonly timer: RunTimer;
}

/** Runs the pending batch with `withheld` held out, writing nothing: the rows the sink would refuse, by key. */
export async function runProbe(
  target: ProbeTarget, source: WithholdingSource, withheld: ReadonlyMap<string, string>,
): Promise<ReadonlyMap<string, RowRefusal>> {
  const { execution } = target;
  return target.timer.checked(execution.pendingBatch?.batchId, async () => {
    source.withhold(withheld);
    target.sink.probing = true;
    try {
      await execution.runOneTrigger();
    } catch (error) {
      for (let e: unknown = error, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
        if (e instanceof ProbeOutput) return e.refused;
      }
      throw error;
    } finally {
      target.sink.probing = false;
    }
    throw new Error('a probe run reached the commit: the guarded sink must stop it');
  });
}
