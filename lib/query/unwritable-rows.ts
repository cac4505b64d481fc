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
 */
import { createHash } from 'node:crypto';
import { AnsiDataError } from '../core/ansi-errors.js';
import type { StreamExecution } from '../runtime/stream-execution.js';
import { describeRefusal, findUnwritableRows, unwritableRowsIn, UnwritableRowsError, type RowRefusal, type SinkRowLimits, type UnwritableRow } from '../sinks/row-limits.js';
import type { Sink, SinkBatch } from '../sinks/sink.js';
import { toExternalRow } from '../sinks/external-row.js';
import type { DeadLetterRecord, DeadLetterWriter } from '../sources/dead-letter.js';
import type { Offset } from '../sources/source.js';

/** A probe's output: the rows the sink would refuse, by row key. Thrown to stop before any write. */
class ProbeOutput extends Error {
  constructor(readonly refused: ReadonlyMap<string, RowRefusal>) {
    super('probe run: nothing is written');
  }
}

/** Writes the result rows left out of a batch to the dead-letter location (before the batch is written). */
export type ResultDeadLetterWriter = (batch: SinkBatch, rows: readonly { row: readonly unknown[]; refusal: RowRefusal; rowKey: string }[]) => Promise<void>;

/** The partition's sink behind the row check; in probe mode it writes nothing. */
export class GuardedSink implements Sink {
  probing = false;
  readonly description: string;
  readonly supportedOutputModes: Sink['supportedOutputModes'];
  /** Result rows of one batch to leave out, by row key: no record of the batch makes them storable. */
  private skipped: { batchId: number; rows: Map<string, RowRefusal> } | null = null;

  constructor(private readonly inner: Sink, readonly limits: SinkRowLimits, private readonly writeResultDeadLetters: ResultDeadLetterWriter) {
    this.description = inner.description;
    this.supportedOutputModes = inner.supportedOutputModes;
  }

  /** Leaves these rows out of batch `batchId` (and dead-letters them) from now on. */
  skip(batchId: number, rows: readonly UnwritableRow[]): void {
    if (this.skipped?.batchId !== batchId) this.skipped = { batchId, rows: new Map() };
    for (const r of rows) this.skipped.rows.set(r.rowKey, r.refusal);
  }

  async addBatch(batch: SinkBatch): Promise<void> {
    if (this.probing) throw new ProbeOutput(new Map(findUnwritableRows(this.limits, batch).map((r) => [r.rowKey, r.refusal])));
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

/** A source that can hold records out of their batch (the Kinesis shard source). */
export interface WithholdingSource {
  readonly name: string;
  withhold(reasons: ReadonlyMap<string, string>): void;
  deadLetters(): DeadLetterRecord[];
  /** The record of each row the batch `(start, end]` reads, in row order. */
  rowSequenceNumbers(start: Offset | null, end: Offset): string[];
}

export interface UnwritableRowResolver {
  readonly execution: StreamExecution;
  readonly sink: GuardedSink;
  /** Null when the stage's source cannot withhold records (stage 2): refused rows are then left out. */
  readonly source: WithholdingSource | null;
  /** The planned batch's records that became rows, in shard order. */
  readonly batchSequenceNumbers: () => readonly string[];
  readonly deadLetters: DeadLetterWriter;
}

/** Rounds of withholding per batch: each round removes every record a refused row came from. */
const MAX_ROUNDS = 4;
/**
 * Records one batch may lose to data errors that row screening cannot pin on one record (a sum
 * that overflows only with the records before it) before the batch fails as Spark's would. Each
 * costs one failed run and a binary search over the records after the previous one: about 11 runs
 * per record in a batch of 1,000. Errors of one record's own values (a zero divisor, a malformed
 * cast) are all found by one screening pass, whatever their number.
 */
const MAX_DATA_ERROR_ROUNDS = 64;

/**
 * An error raised by a record's values under ANSI rules (a long sum past int64, a cast that
 * overflows, a division by zero, a malformed string cast to a number): every retry of the batch
 * would raise it again. Spark fails the query; Sluice dead-letters the record that raised it, so
 * one bad value does not block the shard.
 */
export function recordDataErrorIn(error: unknown): AnsiDataError | null {
  for (let e: unknown = error, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof AnsiDataError) return e;
  }
  return null;
}

/**
 * The record whose inclusion makes the batch fail: the batch's records in shard order, the
 * shortest prefix that fails ends with it (binary search over prefixes, probes write nothing).
 * Null when the batch fails with no record at all (nothing to blame). `passing`: the sequence
 * numbers already known to pass as a prefix (those before the previous culprit: records are
 * applied in order, so a prefix that passed passes again without a later record).
 */
async function blameFirstFailingRecord(
  resolver: UnwritableRowResolver, source: WithholdingSource, withheld: ReadonlyMap<string, string>, passing: ReadonlySet<string>,
): Promise<string | null> {
  const candidates = resolver.batchSequenceNumbers().filter((seq) => !withheld.has(seq));
  const failsWithPrefix = async (length: number): Promise<boolean> => {
    const out = new Map(withheld);
    for (const seq of candidates.slice(length)) out.set(seq, 'probe');
    try {
      await runProbe(resolver, source, out);
      return false;
    } catch (error) {
      if (recordDataErrorIn(error)) return true;
      throw error;
    }
  };
  try {
    let passes = 0;
    while (passes < candidates.length && passing.has(candidates[passes]!)) passes++;
    if (passes >= candidates.length || (passes === 0 && await failsWithPrefix(0))) return null;
    // The failed run was the probe of the whole batch.
    let fails = candidates.length;
    while (fails - passes > 1) {
      const mid = (passes + fails) >> 1;
      if (await failsWithPrefix(mid)) fails = mid;
      else passes = mid;
    }
    return candidates[fails - 1]!;
  } finally {
    source.withhold(withheld);
  }
}

/**
 * Runs one trigger; when its batch holds unwritable rows, dead-letters their records and runs the
 * batch again without them. A refused row no record of the batch changes (append mode emitting a
 * group whose state grew in earlier batches, say) is itself dead-lettered and left out of the batch.
 * Other failures are thrown.
 */
export async function runTriggerWithholdingUnwritable(resolver: UnwritableRowResolver): Promise<boolean> {
  const { source } = resolver;
  const withheld = new Map<string, string>(source?.deadLetters().map((l) => [l.sequenceNumber, l.reason]) ?? []);
  const passing = new Set<string>();
  let screenedBatch: number | null = null;
  let searches = 0;
  let withholdingRounds = 0;
  for (;;) {
    try {
      return await resolver.execution.runOneTrigger();
    } catch (error) {
      const batchId = resolver.execution.pendingBatch?.batchId;
      const dataError = recordDataErrorIn(error);
      if (dataError && source && batchId !== undefined && screenedBatch !== batchId) {
        // First, every record whose own values raise, in one pass; withholding them changes no
        // other record's evaluation, so once is enough per batch.
        screenedBatch = batchId;
        const raising = await screenRecords(resolver, source);
        if (raising.size > 0) {
          for (const [seq, reason] of raising) withheld.set(seq, reason);
          source.withhold(withheld);
          await resolver.deadLetters.write(source.deadLetters().filter((l) => raising.has(l.sequenceNumber)));
          continue;
        }
      }
      if (dataError && source && batchId !== undefined && searches++ < MAX_DATA_ERROR_ROUNDS) {
        const culprit = await blameFirstFailingRecord(resolver, source, withheld, passing);
        if (culprit === null) throw error;
        const order = resolver.batchSequenceNumbers();
        for (const seq of order.slice(0, order.indexOf(culprit))) if (!withheld.has(seq)) passing.add(seq);
        withheld.set(culprit, `${dataError.code}: ${dataError.message}`);
        source.withhold(withheld);
        await resolver.deadLetters.write(source.deadLetters().filter((l) => l.sequenceNumber === culprit));
        continue;
      }
      const unwritable = unwritableRowsIn(error);
      if (!unwritable || batchId === undefined || withholdingRounds++ >= MAX_ROUNDS) throw error;
      const blamed = source ? await blameRecords(resolver, source, unwritable.rows, withheld) : new Map<string, string>();
      if (blamed.size === 0) {
        resolver.sink.skip(batchId, unwritable.rows);
        continue;
      }
      for (const [seq, reason] of blamed) withheld.set(seq, reason);
      source!.withhold(withheld);
      const letters = source!.deadLetters().filter((l) => blamed.has(l.sequenceNumber));
      await resolver.deadLetters.write(letters);
    }
  }
}

/** The planned batch's records whose own values raise a data error, each with the error as its reason. */
async function screenRecords(resolver: UnwritableRowResolver, source: WithholdingSource): Promise<Map<string, string>> {
  const { execution } = resolver;
  const end = execution.pendingBatch?.offsets.get(source.name) ?? null;
  if (end === null) return new Map();
  const sequenceNumbers = source.rowSequenceNumbers(execution.committedSourceOffsets.get(source.name) ?? null, end);
  const raised = await execution.screenPendingBatch(source.name, (error) => recordDataErrorIn(error) !== null);
  const reasons = new Map<string, string>();
  for (const [row, error] of raised) {
    const dataError = recordDataErrorIn(error)!;
    reasons.set(sequenceNumbers[row]!, `${dataError.code}: ${dataError.message}`);
  }
  return reasons;
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
    return (await runProbe(resolver, source, out)).refused;
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

async function runProbe(
  resolver: UnwritableRowResolver, source: WithholdingSource, withheld: ReadonlyMap<string, string>,
): Promise<ProbeOutput> {
  source.withhold(withheld);
  resolver.sink.probing = true;
  try {
    await resolver.execution.runOneTrigger();
  } catch (error) {
    for (let e: unknown = error, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
      if (e instanceof ProbeOutput) return e;
    }
    throw error;
  } finally {
    resolver.sink.probing = false;
  }
  throw new Error('a probe run reached the commit: the guarded sink must stop it');
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
      sequenceNumber: `result-batch-${batch.batchId}-${createHash('sha256').update(rowKey).digest('hex').slice(0, 24)}`,
      partitionKey: '',
      approximateArrivalTimestampMs: 0,
      dataBase64: Buffer.from(JSON.stringify(toExternalRow(row, batch.schema), (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).toString('base64'),
      reason: `${describeRefusal(refusal)} (result row of batch ${batch.batchId} left out of the sink: ${cause})`,
    })));
  };
}
