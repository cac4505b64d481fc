/**
 * The `onUnwritableRow: 'dead-letter'` policy: a batch whose result holds a row the sink cannot
 * store (key too long, item too large, a value it cannot encode) does not block its shard. (With
 * 'spill' the DynamoDB sink stores an oversized item itself, so only its other refusals get here.)
 *
 *   1. The sink's row limits are checked on every output row before the sink writes anything
 *      (`GuardedSink`); a refusal fails the run with UnwritableRowsError and the state is aborted.
 *   2. The records the refused rows cannot take are found by re-running the batch from the same
 *      loaded state on parts of its records, writing nothing (`probe`): in shard order, each part
 *      (halving) that, added to what was kept before it, leaves no row refused that the run on no
 *      record at all does not refuse already, stays in the batch. So a record is blamed only when
 *      a row is unstorable with it (a 300 KB note), never for sharing a batch and group with one
 *      that is, and the cost grows with the number of blamed records, not with the group's size.
 *   3. Those records are written to the dead-letter location with the refusal's code and limit (no
 *      data values), withheld from the batch, and the batch runs again: the group keeps the
 *      largest storable value in record order, and state and sink stay consistent.
 *   4. A refused row no record of the batch changes (it comes from the state alone), or one of a
 *      stage whose source cannot withhold records, is itself dead-lettered (its values as JSON)
 *      and left out of the batch's output.
 *
 * Everything is a pure function of the planned records, the state version and the sink's limits,
 * so a crash anywhere re-derives the same dead letters (written idempotently) and the same output.
 * Each search's runs go through the invocation's RunTimer (lib/query/batch-probe.ts): none starts
 * that may not finish before the deadline.
 */
import { createHash } from 'node:crypto';
import { describeRefusal, findUnwritableRows, unwritableRowsIn, UnwritableRowsError, type RowRefusal, type SinkRowLimits, type UnwritableRow } from '../sinks/row-limits.js';
import type { Sink, SinkBatch } from '../sinks/sink.js';
import { toExternalRow } from '../sinks/external-row.js';
import { resultRowLetterSequenceNumber, type DeadLetterWriter } from '../sources/dead-letter.js';
import type { Row } from '../execution/evaluate.js';
import type { StructField } from '../plan/data-types.js';
import { ProbeOutput, runProbe, SearchPausedError, type ProbeTarget, type WithholdingSource } from './batch-probe.js';
import { BatchBlameProgress, blameFirstFailingRecord, dataErrorReason, recordDataErrorIn, screenRecords } from './data-error-search.js';

function rowDigest(row: readonly unknown[]): string {
  const text = JSON.stringify(row, (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
  return createHash('sha256').update(text).digest('base64');
}

/** Writes the result rows left out of a batch to the dead-letter location (before the batch is written). */
export type ResultDeadLetterWriter = (batch: SinkBatch, rows: readonly { row: readonly unknown[]; refusal: RowRefusal; rowKey: string }[]) => Promise<void>;

/** A row above a stateful operator whose evaluation raised, left out of its batch (RaisingRowPolicy). */
export interface RaisingRow {
  readonly row: Row;
  readonly schema: readonly StructField[];
  readonly reason: string;
}

/** Writes the rows raising above state left out of a batch to the dead-letter location (before the batch is written). */
export type RaisingRowDeadLetterWriter = (batchId: number, rows: readonly RaisingRow[]) => Promise<void>;

/** The partition's sink behind the row check; in probe mode it writes nothing. */
export class GuardedSink implements Sink {
  probing = false;
  readonly description: string;
  readonly supportedOutputModes: Sink['supportedOutputModes'];
  /** Result rows of one batch to leave out, by row key: no record of the batch makes them storable. */
  private skipped: { batchId: number; rows: Map<string, RowRefusal> } | null = null;
  /** Rows above state one batch's run left out because they raised (filled while the batch runs). */
  private raising: { batchId: number; rows: ReadonlyMap<string, RaisingRow> } | null = null;
  private revision: { batchId: number; revision: number } | null = null;
  /** Runs before any of a batch's output (its letters, its rows) is written (an attempt at risk keeps its records first: lib/query/kept-records.ts). */
  beforeWrite: ((batchId: number) => Promise<void>) | null = null;

  constructor(
    private readonly inner: Sink, readonly limits: SinkRowLimits, private readonly writeResultDeadLetters: ResultDeadLetterWriter,
    private readonly writeRaisingRows: RaisingRowDeadLetterWriter,
  ) {
    this.description = inner.description;
    this.supportedOutputModes = inner.supportedOutputModes;
  }

  /** Batch `batchId` runs as this revision (SinkBatch.revision): its planned records less `revision` expired ones. */
  revise(batchId: number, revision: number): void {
    this.revision = { batchId, revision };
  }

  /** Dead-letters what batch `batchId`'s run leaves in `rows` before the batch is written. */
  leaveOutRaising(batchId: number, rows: ReadonlyMap<string, RaisingRow>): void {
    this.raising = { batchId, rows };
  }

  /** Leaves these rows out of batch `batchId` (and dead-letters them) from now on. */
  skip(batchId: number, rows: readonly UnwritableRow[]): void {
    if (this.skipped?.batchId !== batchId) this.skipped = { batchId, rows: new Map() };
    for (const r of rows) this.skipped.rows.set(r.rowKey, r.refusal);
  }

  async addBatch(batch: SinkBatch): Promise<void> {
    if (this.probing) throw new ProbeOutput(new Map(findUnwritableRows(this.limits, batch).map((r) => [r.rowKey, r.refusal])));
    // Before the batch's result-row letters too: they are its output as much as the sink's rows.
    await this.beforeWrite?.(batch.batchId);
    const raising = this.raising?.batchId === batch.batchId ? this.raising.rows : null;
    if (raising && raising.size > 0) await this.writeRaisingRows(batch.batchId, [...raising.values()]);
    const skipped = this.skipped?.batchId === batch.batchId ? this.skipped.rows : null;
    let written = batch;
    if (skipped && skipped.size > 0) {
      const keys = batch.rows.map((_, i) => this.limits.rowKey(batch, i));
      const left = batch.rows.flatMap((row, i) => (skipped.has(keys[i]!) ? [{ row, refusal: skipped.get(keys[i]!)!, rowKey: keys[i]! }] : []));
      await this.writeResultDeadLetters(batch, left);
      written = { ...batch, rows: batch.rows.filter((_, i) => !skipped.has(keys[i]!)) };
    }
    const unwritable = findUnwritableRows(this.limits, written);
    if (unwritable.length > 0) throw new UnwritableRowsError(this.description, batch.batchId, unwritable);
    if (this.revision?.batchId === batch.batchId && this.revision.revision > 0) written = { ...written, revision: this.revision.revision };
    await this.inner.addBatch(written);
  }

  screenRow(row: readonly unknown[]): void {
    this.inner.screenRow?.(row);
  }

  // A staging sink (s3-files) reveals a batch only here: the guard must pass it on.
  async onCommitted(partitionId: string, batchId: number): Promise<void> {
    await this.inner.onCommitted?.(partitionId, batchId);
  }
}

/** The limits of a sink that takes any row: the guard then only serves probes for failing records. */
export const ANY_ROW: SinkRowLimits = { rowKey: (_batch, rowIndex) => String(rowIndex), check: () => null };

export interface UnwritableRowResolver extends ProbeTarget {
  readonly sink: GuardedSink;
}

/** Rounds of withholding per batch: each round removes every record a refused row came from. */
const MAX_ROUNDS = 4;

/**
 * Runs one trigger; when its batch holds unwritable rows, dead-letters their records and runs the
 * batch again without them. A refused row no record of the batch changes (append mode emitting a
 * group whose state grew in earlier batches, say) is itself dead-lettered and left out of the batch.
 * A data error is handled the same way (lib/query/data-error-search.ts). When the invocation's
 * time runs short before the batch can run clean, throws SearchPausedError with the batch left
 * uncommitted and the progress saved for its retry. Other failures are thrown.
 */
export async function runTriggerWithholdingUnwritable(resolver: UnwritableRowResolver): Promise<boolean> {
  const { source, timer } = resolver;
  // Stage 2 holds out rows of its internal records for data errors (a partial aggregate whose merge raises).
  const errorSource = source ?? resolver.rowSource ?? null;
  const blame = errorSource ? new BatchBlameProgress(resolver, errorSource) : null;
  let withholdingRounds = 0;
  let run = (): Promise<boolean> => timer.measured(() => resolver.execution.runOneTrigger());
  // A planned batch re-running (after a failure, or a search the deadline stopped): the records
  // earlier runs withheld are held out from its first run on.
  if (resolver.execution.pendingBatch) await blame?.resume();
  for (;;) {
    try {
      const ran = await run();
      if (ran) await blame?.committed();
      return ran;
    } catch (error) {
      if (error instanceof SearchPausedError) {
        await blame?.save();
        throw error;
      }
      const batchId = resolver.execution.pendingBatch?.batchId;
      const dataError = recordDataErrorIn(error);
      // Every later run of the batch is one the deadline must leave time for.
      run = () => timer.checked(batchId, () => resolver.execution.runOneTrigger());
      try {
        if (dataError && batchId !== undefined) {
          if (errorSource && blame && await withholdFailingRecords(resolver, errorSource, blame, dataErrorReason(dataError))) continue;
          // No record of the batch can be blamed: the error comes from state alone (or the stage
          // cannot withhold records). Rows raising above state are left out and dead-lettered.
          if (resolver.execution.raisingRowPolicy?.batchId === batchId) throw error;
          leaveOutRowsRaisingAboveState(resolver, batchId);
          continue;
        }
        const unwritable = unwritableRowsIn(error);
        if (!unwritable || batchId === undefined || withholdingRounds++ >= MAX_ROUNDS) throw error;
        const blamed = source && blame ? await blameRecords(resolver, source, unwritable.rows, blame.withheld) : new Map<string, string>();
        if (blamed.size === 0) {
          resolver.sink.skip(batchId, unwritable.rows);
          continue;
        }
        source!.withhold(new Map([...blame!.withheld, ...blamed]));
        // Dead letters first: an entry never names a record whose dead letter is missing.
        await resolver.deadLetters.write(source!.deadLetters().filter((l) => blamed.has(l.sequenceNumber)));
        blame!.add(blamed, { resetsPassing: true });
        await blame!.saveIfDue();
      } catch (searchError) {
        if (searchError instanceof SearchPausedError) await blame?.save();
        throw searchError;
      }
    }
  }
}

/**
 * One step against a data error: resume what earlier invocations found for this batch, else
 * screen every record once, else find the next record that ends a failing prefix. Each step
 * withholds (and dead-letters) at least one more record; false when no record can be blamed.
 */
async function withholdFailingRecords(
  resolver: UnwritableRowResolver, source: WithholdingSource, blame: BatchBlameProgress, reason: string,
): Promise<boolean> {
  if (await blame.resume()) return true;
  if (!blame.screened) {
    // Every record whose own values raise, in one pass; withholding them changes no other
    // record's evaluation, so once is enough per batch.
    const raising = await screenRecords(resolver, source);
    blame.markScreened();
    if (raising.size > 0) {
      source.withhold(new Map([...blame.withheld, ...raising]));
      await resolver.deadLetters.write(source.deadLetters().filter((l) => raising.has(l.sequenceNumber)));
      blame.add(raising, { resetsPassing: true });
      await blame.saveIfDue();
      return true;
    }
  }
  const culprit = await blameFirstFailingRecord(resolver, source, blame);
  if (culprit === null) return false;
  source.withhold(new Map([...blame.withheld, [culprit, reason]]));
  await resolver.deadLetters.write(source.deadLetters().filter((l) => l.sequenceNumber === culprit));
  blame.add(new Map([[culprit, reason]]), { passingThrough: culprit });
  await blame.saveIfDue();
  return true;
}

/**
 * From now on, batch `batchId`'s rows whose evaluation above a stateful operator raises a data
 * error are left out of it and dead-lettered (the same rows on every run: they come from state).
 */
function leaveOutRowsRaisingAboveState(resolver: UnwritableRowResolver, batchId: number): void {
  const rows = new Map<string, RaisingRow>();
  resolver.execution.raisingRowPolicy = {
    batchId,
    drop: (row, schema, error) => {
      const dataError = recordDataErrorIn(error);
      if (!dataError) return false;
      rows.set(rowDigest(row), { row, schema, reason: dataErrorReason(dataError) });
      return true;
    },
    startRun: () => rows.clear(),
  };
  resolver.sink.leaveOutRaising(batchId, rows);
}

/**
 * The batch's records the refused rows cannot take, each with the refusal as its reason: in shard
 * order, each part of the records (halving) that, added to those kept before it, leaves no row
 * refused that the run on no record does not refuse already, is kept. A record is blamed only when
 * a row is unstorable with it. About 2·log2(n) probes per blamed record, whatever the size of its
 * group (a search for every record that changes the row took about 2 per record of the group).
 */
async function blameRecords(
  resolver: UnwritableRowResolver, source: WithholdingSource, rows: readonly UnwritableRow[], withheld: ReadonlyMap<string, string>,
): Promise<Map<string, string>> {
  const candidates = resolver.batchSequenceNumbers().filter((seq) => !withheld.has(seq));
  const probe = async (included: readonly string[]): Promise<ReadonlyMap<string, RowRefusal>> => {
    const inSet = new Set(included);
    const out = new Map(withheld);
    for (const seq of candidates) if (!inSet.has(seq)) out.set(seq, 'probe');
    return runProbe(resolver, source, out);
  };
  const blamed = new Map<string, string>();
  const kept: string[] = [];
  try {
    // Refused with no record at all: the state alone makes them (the caller leaves such rows out).
    const refusedWithoutRecords = await probe([]);
    const newRefusal = (refused: ReadonlyMap<string, RowRefusal>): RowRefusal | null =>
      [...refused].find(([key]) => !refusedWithoutRecords.has(key))?.[1] ?? null;
    const admit = async (part: readonly string[], knownRefusal: RowRefusal | null): Promise<void> => {
      if (part.length === 0) return;
      const refusal = knownRefusal ?? newRefusal(await probe([...kept, ...part]));
      if (refusal === null) {
        kept.push(...part);
        return;
      }
      if (part.length === 1) {
        blamed.set(part[0]!, describeRefusal(refusal));
        return;
      }
      const half = Math.ceil(part.length / 2);
      await admit(part.slice(0, half), null);
      await admit(part.slice(half), null);
    };
    // The failed run was the probe of all candidates.
    await admit(candidates, newRefusal(new Map(rows.map((r) => [r.rowKey, r.refusal]))));
  } finally {
    source.withhold(withheld);
  }
  return blamed;
}

/**
 * Rows raising a data error above state, left out of a batch, as dead letters: one object per
 * (batch, row values), so a re-run rewrites the same objects. The record fields name the batch.
 */
export function raisingRowDeadLetters(queryName: string, shardId: string, writer: DeadLetterWriter): RaisingRowDeadLetterWriter {
  return async (batchId, rows) => {
    await writer.write(rows.map(({ row, schema, reason }) => {
      const data = JSON.stringify(toExternalRow(row, schema), (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
      return {
        queryName,
        shardId,
        sequenceNumber: resultRowLetterSequenceNumber(batchId, createHash('sha256').update(data).digest('hex').slice(0, 24)),
        partitionKey: '',
        approximateArrivalTimestampMs: 0,
        dataBase64: Buffer.from(data).toString('base64'),
        reason: `${reason} (a row above a stateful operator, left out of batch ${batchId}: it raises with no record of the batch, `
          + 'its values come from the state; the row shown is the input of the expression that raised)',
      };
    }));
  };
}

/**
 * Result rows left out of a batch as dead letters, one object per (batch, row key): a re-run
 * rewrites the same objects. The record fields name the batch instead of a Kinesis record.
 */
export function resultDeadLetters(queryName: string, shardId: string, writer: DeadLetterWriter, canWithhold: boolean): ResultDeadLetterWriter {
  // Why the row itself, not its records: say which of the two cases it is.
  const cause = canWithhold
    ? 'no record of the batch changes it, its value comes from the state'
    : 'this stage cannot withhold records (the repartition stream): the group\'s state keeps the value, so its sink item stays at its '
      + 'last storable value and each later change of the group is dead-lettered the same way; the DynamoDB sink\'s onUnwritableRow: \'spill\' stores it instead';
  return async (batch, rows) => {
    await writer.write(rows.map(({ row, refusal, rowKey }) => ({
      queryName,
      shardId,
      sequenceNumber: resultRowLetterSequenceNumber(batch.batchId, createHash('sha256').update(rowKey).digest('hex').slice(0, 24)),
      partitionKey: '',
      approximateArrivalTimestampMs: 0,
      dataBase64: Buffer.from(JSON.stringify(toExternalRow(row, batch.schema), (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).toString('base64'),
      reason: `${describeRefusal(refusal)} (result row of batch ${batch.batchId} left out of the sink: ${cause})`,
    })));
  };
}
