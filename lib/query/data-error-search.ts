/**
 * Records whose values fail their batch under ANSI rules (a long sum past int64, a division by
 * zero, a malformed cast): Spark fails the query; Sluice dead-letters the record and runs the
 * batch without it, so one bad value does not block the shard.
 *
 *   1. The per-record screen (lib/execution/row-screening.ts) finds, in one pass, every record
 *      whose own values raise.
 *   2. An error that needs several records or state (a sum that overflows only with the records
 *      before it, an expression above a stateful operator, a stream-stream join condition on both
 *      sides) is pinned on the record that ends the shortest failing prefix of the batch (records
 *      apply in shard order): a binary search over prefixes, one culprit at a time, each search
 *      starting after the previous culprit (the prefix before it passes, and stays passing once
 *      the culprit is withheld).
 *   3. The searches of one batch are bounded by the invocation's remaining time, not by a count:
 *      before the deadline the search stops (SearchPausedError), the batch stays uncommitted and
 *      how far it got goes to the checkpoint's BatchBlameLog, keyed by the planned batch (its id
 *      and end offsets). The retry of that batch starts from there: the records withheld so far
 *      (already dead-lettered) and the known passing prefix. So a batch with any number of
 *      culprits commits after a bounded number of invocations.
 *
 * Resuming is exact: a culprit depends only on the planned records, the state version and the
 * records withheld before it, which the entry holds; a search from scratch finds the same ones.
 * A record is dead-lettered before the entry naming it is written, so an entry never withholds
 * a record whose dead letter is missing.
 */
import { AnsiDataError } from '../core/ansi-errors.js';
import { blameIsFor, BATCH_BLAME_FORMAT_VERSION } from '../checkpoint/batch-blame-log.js';
import { runProbe, type ProbeTarget, type WithholdingSource } from './batch-probe.js';

/** How often a running search records its progress (what a crash, not a deadline stop, loses at most). */
const SAVE_EVERY_MS = 1_000;

/** The data error an error is or wraps, or null. */
export function recordDataErrorIn(error: unknown): AnsiDataError | null {
  for (let e: unknown = error, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof AnsiDataError) return e;
  }
  return null;
}

export const dataErrorReason = (error: AnsiDataError): string => `${error.code}: ${error.message}`;

/**
 * The records withheld from one planned batch and how far its search got, loaded from and saved
 * to the checkpoint's BatchBlameLog.
 */
export class BatchBlameProgress {
  /** Every record held out of the batch: the undecodable ones, and those found to fail it. */
  readonly withheld: Map<string, string>;
  /** Those found to fail it (the ones the entry records; undecodable records are found again). */
  private readonly found = new Map<string, string>();
  /** The batch's records before this one (not withheld) pass as a prefix. */
  passingThrough: string | null = null;
  /** The shortest prefix known to fail with `withheld` held out ends with this record. */
  failingThrough: string | null = null;
  screened = false;
  private batchId: number | null = null;
  private loaded = false;
  private dirty = false;
  private saved = false;
  private lastSaveMs = Date.now();

  constructor(private readonly target: ProbeTarget, private readonly source: WithholdingSource) {
    this.withheld = new Map(source.deadLetters().map((l) => [l.sequenceNumber, l.reason]));
  }

  /**
   * Loads what earlier invocations found for the pending batch (once): true when that withholds
   * records, so the batch should run again before any search.
   */
  async resume(): Promise<boolean> {
    // (Also called before a recovered batch's first run, so a resumed search does not pay a run
    // of the batch without the records it already withheld.)
    const pending = this.target.execution.pendingBatch;
    if (this.loaded || !pending || !this.target.blameLog) return false;
    this.loaded = true;
    this.batchId = pending.batchId;
    const entry = await this.target.blameLog.get(pending.batchId);
    if (!entry || !blameIsFor(entry, pending.batchId, pending.offsets)) return false;
    this.saved = true;
    for (const [seq, reason] of entry.withheld) {
      this.withheld.set(seq, reason);
      this.found.set(seq, reason);
    }
    this.passingThrough = entry.passingThrough;
    this.failingThrough = entry.failingThrough ?? null;
    this.screened = entry.screened;
    this.source.withhold(this.withheld);
    return entry.withheld.length > 0;
  }

  /** Withholds `records` (already dead-lettered). `resetsPassing`: they may lie inside the passing prefix. */
  add(records: ReadonlyMap<string, string>, options: { passingThrough?: string; resetsPassing?: boolean } = {}): void {
    for (const [seq, reason] of records) {
      this.withheld.set(seq, reason);
      this.found.set(seq, reason);
    }
    if (options.resetsPassing) this.passingThrough = null;
    if (options.passingThrough !== undefined) this.passingThrough = options.passingThrough;
    // A failing prefix may pass without the records just withheld.
    this.failingThrough = null;
    this.dirty = true;
    this.source.withhold(this.withheld);
  }

  /** The search learned that a longer prefix passes. */
  advancePassing(seq: string): void {
    this.passingThrough = seq;
    this.dirty = true;
  }

  /** The search learned that a shorter prefix fails. */
  narrowFailing(seq: string): void {
    this.failingThrough = seq;
    this.dirty = true;
  }

  markScreened(): void {
    this.screened = true;
    this.dirty = true;
  }

  /** Saves when the last save is a while ago: a crash loses at most that much of the search. */
  async saveIfDue(): Promise<void> {
    if (Date.now() - this.lastSaveMs >= SAVE_EVERY_MS) await this.save();
  }

  async save(): Promise<void> {
    const pending = this.target.execution.pendingBatch;
    const log = this.target.blameLog;
    if (!this.dirty || !pending || !log) return;
    await log.put({
      formatVersion: BATCH_BLAME_FORMAT_VERSION,
      batchId: pending.batchId,
      offsets: Object.fromEntries(pending.offsets),
      withheld: [...this.found],
      passingThrough: this.passingThrough,
      failingThrough: this.failingThrough,
      screened: this.screened,
    });
    this.batchId = pending.batchId;
    this.saved = true;
    this.dirty = false;
    this.lastSaveMs = Date.now();
  }

  /** After the batch committed: its entry is of no more use (best effort: a stale entry is never read again). */
  async committed(): Promise<void> {
    if (!this.saved || this.batchId === null) return;
    await this.target.blameLog?.remove(this.batchId).catch(() => undefined);
  }
}

/**
 * The record whose inclusion makes the batch fail: the batch's records in shard order, the
 * shortest prefix that fails ends with it (binary search over prefixes, probes write nothing).
 * Null when the batch fails with no record at all (nothing to blame). The search starts between
 * `progress.passingThrough` and `progress.failingThrough` and narrows them as probes pass or
 * fail, so a search stopped by the deadline resumes where it was.
 */
export async function blameFirstFailingRecord(target: ProbeTarget, source: WithholdingSource, progress: BatchBlameProgress): Promise<string | null> {
  const { withheld } = progress;
  const order = target.batchSequenceNumbers();
  const candidates = order.filter((seq) => !withheld.has(seq));
  const failsWithPrefix = async (length: number): Promise<boolean> => {
    const out = new Map(withheld);
    for (const seq of candidates.slice(length)) out.set(seq, 'probe');
    try {
      await runProbe(target, source, out);
      return false;
    } catch (error) {
      if (recordDataErrorIn(error)) return true;
      throw error;
    }
  };
  try {
    const through = progress.passingThrough === null ? -1 : order.indexOf(progress.passingThrough);
    const position = new Map(order.map((seq, i) => [seq, i]));
    let passes = 0;
    while (through > 0 && passes < candidates.length && position.get(candidates[passes]!)! < through) passes++;
    if (passes >= candidates.length || (passes === 0 && await failsWithPrefix(0))) return null;
    // The failed run was the probe of the whole batch, unless a shorter failing prefix is known.
    const failing = progress.failingThrough === null ? -1 : candidates.indexOf(progress.failingThrough);
    let fails = failing >= passes ? failing + 1 : candidates.length;
    while (fails - passes > 1) {
      const mid = (passes + fails) >> 1;
      if (await failsWithPrefix(mid)) {
        fails = mid;
        progress.narrowFailing(candidates[mid - 1]!);
      } else {
        passes = mid;
        progress.advancePassing(candidates[mid]!);
      }
    }
    return candidates[fails - 1]!;
  } finally {
    source.withhold(withheld);
  }
}

/** The planned batch's records whose own values raise a data error, each with the error as its reason. */
export async function screenRecords(target: ProbeTarget, source: WithholdingSource): Promise<Map<string, string>> {
  const { execution } = target;
  const end = execution.pendingBatch?.offsets.get(source.name) ?? null;
  if (end === null || !source.rowSequenceNumbers) return new Map();
  const sequenceNumbers = source.rowSequenceNumbers(execution.committedSourceOffsets.get(source.name) ?? null, end);
  const raised = await execution.screenPendingBatch(source.name, (error) => recordDataErrorIn(error) !== null);
  const reasons = new Map<string, string>();
  for (const [row, error] of raised) reasons.set(sequenceNumbers[row]!, dataErrorReason(recordDataErrorIn(error)!));
  return reasons;
}
