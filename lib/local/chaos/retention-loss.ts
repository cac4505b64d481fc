/**
 * The records a query lost to retention, as the oracle counts them ('planned-then-expired',
 * 'skipped-then-expired').
 *
 * Retention is stream-wide: one query's planned-then-expired fault trims the stream under every
 * query reading it, so a query with no fault of its own may find its planned batch's oldest records
 * gone, run over the rest and record the loss (`<query>#skipped`, `#expired-planned` items). Its
 * expected answer leaves out exactly the records of those recorded ranges, each checked here to
 * have really expired: a recorded loss of a record the stream still held is data loss, and a
 * range whose count is not its records' is a wrong report. A record dropped but not recorded is
 * not left out of the expected answer, so the comparison reports it lost.
 *
 * Records are named by their stream, shard and sequence number in the run, and by their place in
 * their stream's put order, which is the same in every run (run 0's expected answer is rebuilt
 * without the records at those places).
 */
import { isExpiredPlanned, type SkippedRange } from '../../aws/skipped-batches.js';
import type { DeadLetterRecord } from '../../sources/dead-letter.js';
import { emptyDiff, type Diff } from './compare.js';
import type { PlacedRecord } from './memory-reference.js';

/** A record put in a run: which source of the query reads its stream, and its place in that stream's put order. */
export interface RunRecord {
  readonly source: string;
  readonly index: number;
  readonly streamName: string;
  readonly shardId: string;
  readonly sequenceNumber: string;
  readonly data: string;
}

export const recordKey = (r: { readonly streamName: string; readonly shardId: string; readonly sequenceNumber: string }): string =>
  `${r.streamName}#${r.shardId}#${r.sequenceNumber}`;

/** A batch whose sink attempts may differ (its planned records expired between them): `<partition>#<batch id>`. */
export type LossyBatch = string;

export interface RecordedLoss {
  /** The records the query's expired-planned ranges hold, each checked to have expired. */
  readonly lost: readonly RunRecord[];
  /** Of them, the records of the engine's expired-planned ranges. */
  readonly recorded: number;
  /** The batches that recorded a loss (their attempts before and after the trim may differ). */
  readonly lossyBatches: ReadonlySet<LossyBatch>;
  /** Wrong reports: a recorded loss of a record that never expired (lost), a count that is not the range's. */
  readonly diff: Diff;
}

/**
 * Checks a query's recorded expired-planned ranges against the run's records and what expired.
 * @param recorded every skipped range the query recorded (the others are ignored)
 * @param records every record put in the run on the query's source streams
 * @param expired whether the run's simulated retention trimmed a record
 */
export function recordedExpiredPlannedLoss(
  recorded: readonly SkippedRange[], records: readonly RunRecord[], expired: (streamName: string, shardId: string, sequenceNumber: string) => boolean,
): RecordedLoss {
  const diff = emptyDiff();
  const fail = (text: string, lost: number): void => { diff.lost += lost; if (diff.examples.length < 6) diff.examples.push(text); };
  const lost = new Map<string, RunRecord>();
  const lossyBatches = new Set<LossyBatch>();
  for (const range of recorded.filter(isExpiredPlanned)) {
    const name = `${range.partitionId} ${range.firstSequenceNumber}..${range.lastSequenceNumber}`;
    const batchId = /\(batch (\d+)\)/.exec(range.reason)?.[1];
    if (batchId === undefined) fail(`the expired-planned range ${name} does not name its batch: ${range.reason}`, 0);
    else lossyBatches.add(`${range.partitionId}#${batchId}`);
    const first = BigInt(range.firstSequenceNumber);
    const last = BigInt(range.lastSequenceNumber);
    const inRange = records.filter((r) => r.streamName === range.streamName && r.shardId === range.shardId
      && first <= BigInt(r.sequenceNumber) && BigInt(r.sequenceNumber) <= last);
    const held = inRange.filter((r) => !expired(r.streamName, r.shardId, r.sequenceNumber));
    // The engine dropped records the stream still had: silent loss dressed as retention.
    if (held.length > 0) fail(`the expired-planned range ${name} holds ${held.length} record(s) that never expired (first ${held[0]!.sequenceNumber})`, held.length);
    if (range.batchSize !== inRange.length) {
      fail(`the expired-planned range ${name} says ${range.batchSize} records, it holds ${inRange.length}`, Math.abs(range.batchSize - inRange.length));
    }
    for (const r of inRange) if (!held.includes(r)) lost.set(recordKey(r), r);
  }
  return { lost: [...lost.values()], recorded: lost.size, lossyBatches, diff };
}

/** Records lost in any of the ways given, each once. */
export function unionOfLost(...lists: readonly (readonly RunRecord[])[]): RunRecord[] {
  const out = new Map<string, RunRecord>();
  for (const list of lists) for (const r of list) out.set(recordKey(r), r);
  return [...out.values()];
}

/**
 * Dead letters of records that are not lost. A lost record's dead letter may or may not have been
 * written (the invocation that planned its batch may have dead-lettered it before it died): it is
 * counted neither as missing nor as extra.
 */
export function deadLettersBesideLoss(deadLetters: readonly DeadLetterRecord[], lost: readonly { readonly shardId: string; readonly sequenceNumber: string }[])
  : DeadLetterRecord[] {
  const gone = new Set(lost.map((r) => `${r.shardId}#${r.sequenceNumber}`));
  return deadLetters.filter((d) => !gone.has(`${d.shardId}#${d.sequenceNumber}`));
}

/** A run's records in put order: the sales stream's (`placed`) and the payments stream's. */
export function runRecordsOf(streams: readonly { readonly source: string; readonly streamName: string; readonly placed: readonly PlacedRecord[] }[]): RunRecord[] {
  return streams.flatMap(({ source, streamName, placed }) => placed.map((r, index) => ({
    source, index, streamName, shardId: r.shardId, sequenceNumber: r.sequenceNumber, data: r.data,
  })));
}

/**
 * Everything a query lost to retention: the records of its recorded expired-planned ranges
 * (checked) and those its re-drive reported expired in skipped ranges (checked by expiry.ts).
 */
export function retentionLoss(options: {
  readonly recorded: readonly SkippedRange[];
  readonly records: readonly RunRecord[];
  readonly expired: (streamName: string, shardId: string, sequenceNumber: string) => boolean;
  readonly redriveLost: readonly { readonly streamName: string; readonly shardId: string; readonly sequenceNumber: string }[];
}): RecordedLoss {
  const recorded = recordedExpiredPlannedLoss(options.recorded, options.records, options.expired);
  const byKey = new Map(options.records.map((r) => [recordKey(r), r]));
  const diff = { ...recorded.diff, examples: [...recorded.diff.examples] };
  const redriven: RunRecord[] = [];
  for (const r of options.redriveLost) {
    const found = byKey.get(recordKey(r));
    if (found) redriven.push(found);
    else { diff.lost++; if (diff.examples.length < 6) diff.examples.push(`the re-drive reported ${recordKey(r)} expired, a record the run never put`); }
  }
  return { lost: unionOfLost(recorded.lost, redriven), recorded: recorded.recorded, lossyBatches: recorded.lossyBatches, diff };
}

/**
 * The kept-records contract, as the run showed it (retention-timeline.ts): every planned batch a
 * 'planned-then-expired' trim struck (`trimmed`, `<partition>#<batch id>`) has a kept copy or a
 * recorded loss, and no batch with a kept copy recorded a loss. A batch neither kept nor lossy
 * whose trimmed records are missing from the answer is already lost in the comparison; here it is
 * named, and counted once per batch.
 */
export function keptOrLost(options: {
  readonly trimmed: readonly LossyBatch[];
  readonly kept: ReadonlySet<LossyBatch>;
  readonly lossy: ReadonlySet<LossyBatch>;
}): Diff {
  const diff = emptyDiff();
  const note = (text: string): void => { if (diff.examples.length < 6) diff.examples.push(text); };
  for (const b of new Set(options.trimmed)) {
    if (options.kept.has(b) || options.lossy.has(b)) continue;
    diff.lost++;
    note(`planned batch ${b} lost records to a trim, and neither kept them nor recorded a loss`);
  }
  for (const b of options.lossy) {
    if (!options.kept.has(b)) continue;
    diff.mismatched++;
    note(`batch ${b} recorded a loss to retention although it had a kept copy of its records`);
  }
  return diff;
}

/** A planned end offset as the offset log stores it (a Kinesis or internal-stream shard position). */
interface PlannedEnd { readonly sequenceNumber?: string; readonly firstSequenceNumber?: string; readonly redrive?: unknown }

/**
 * Whether a trim struck a planned batch: some record of its planned range left the stream. The
 * fault trims its invocation's first records, which need not be the batch's: the event may start
 * with records an earlier batch committed (a redelivery), and a no-data batch (its offsets are the
 * previous batch's) or a re-drive batch (its records are the ledger's) has none on the shard. Such
 * a batch has nothing to keep or lose. A shard is trimmed oldest-first, so the range is struck when
 * its first record is.
 * @param planned the batch's planned end offsets (`offset#N`), by source name
 * @param before the previous batch's (`offset#N-1`; committed before N was planned), null for batch 0
 * @param expired whether the run's simulated retention trimmed the record `sequenceNumber` of the batch's shard
 */
export function plannedRangeTrimmed(
  planned: Readonly<Record<string, unknown>>, before: Readonly<Record<string, unknown>> | null, expired: (sequenceNumber: string) => boolean,
): boolean {
  return Object.entries(planned).some(([name, value]) => {
    const end = value as PlannedEnd | null;
    if (!end || end.redrive !== undefined || end.firstSequenceNumber === undefined) return false;
    if (JSON.stringify(before?.[name] ?? null) === JSON.stringify(end)) return false;
    return expired(end.firstSequenceNumber);
  });
}
