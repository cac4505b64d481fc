/**
 * The `onUnwritableRow: 'dead-letter'` policy: a batch whose result holds a row the sink cannot
 * store (key too long, item too large, a value it cannot encode) does not block its shard.
 *
 *   1. The sink's row limits are checked on every output row before the sink writes anything
 *      (`GuardedSink`); a refusal fails the run with UnwritableRowsError and the state is aborted.
 *   2. The records that produce each refused row are found by re-running the batch from the same
 *      loaded state on parts of its records, writing nothing (`probe`): a part whose output row
 *      for the refused row's key differs from the run on no record at all holds a record that
 *      changes that row; halving finds each such record. (Comparing with the run on no record,
 *      not only looking for the key, is what makes complete mode work: it outputs every group.)
 *   3. Those records are written to the dead-letter location with the refusal's code and limit (no
 *      data values), withheld from the batch, and the batch runs again: the group keeps its last
 *      storable value, and state and sink stay consistent.
 *
 * Everything is a pure function of the planned records, the state version and the sink's limits,
 * so a crash anywhere re-derives the same dead letters (written idempotently) and the same output.
 */
import { createHash } from 'node:crypto';
import type { StreamExecution } from '../runtime/stream-execution.js';
import { describeRefusal, findUnwritableRows, unwritableRowsIn, UnwritableRowsError, type RowRefusal, type SinkRowLimits, type UnwritableRow } from '../sinks/row-limits.js';
import type { Sink, SinkBatch } from '../sinks/sink.js';
import type { DeadLetterRecord, DeadLetterWriter } from '../sources/dead-letter.js';

/** A probe's output: each row's key and a digest of its values. Thrown to stop before any write. */
class ProbeOutput extends Error {
  constructor(readonly rows: ReadonlyMap<string, string>) {
    super('probe run: nothing is written');
  }
}

function rowDigest(row: readonly unknown[]): string {
  const text = JSON.stringify(row, (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
  return createHash('sha256').update(text).digest('base64');
}

/** The partition's sink behind the row check; in probe mode it writes nothing. */
export class GuardedSink implements Sink {
  probing = false;
  readonly description: string;
  readonly supportedOutputModes: Sink['supportedOutputModes'];

  constructor(private readonly inner: Sink, readonly limits: SinkRowLimits) {
    this.description = inner.description;
    this.supportedOutputModes = inner.supportedOutputModes;
  }

  async addBatch(batch: SinkBatch): Promise<void> {
    if (this.probing) throw new ProbeOutput(new Map(batch.rows.map((row, i) => [this.limits.rowKey(batch, i), rowDigest(row)])));
    const unwritable = findUnwritableRows(this.limits, batch);
    if (unwritable.length > 0) throw new UnwritableRowsError(this.description, batch.batchId, unwritable);
    await this.inner.addBatch(batch);
  }
}

/** A source that can hold records out of their batch (the Kinesis shard source). */
export interface WithholdingSource {
  withhold(reasons: ReadonlyMap<string, string>): void;
  deadLetters(): DeadLetterRecord[];
}

export interface UnwritableRowResolver {
  readonly execution: StreamExecution;
  readonly sink: GuardedSink;
  readonly source: WithholdingSource;
  /** The planned batch's records that became rows, in shard order. */
  readonly batchSequenceNumbers: () => readonly string[];
  readonly deadLetters: DeadLetterWriter;
}

/** Rounds of withholding per batch: each round removes every record a refused row came from. */
const MAX_ROUNDS = 4;

/**
 * Runs one trigger; when its batch holds unwritable rows, dead-letters their records and runs the
 * batch again without them. Other failures, and rows no record of the batch produced, are thrown.
 */
export async function runTriggerWithholdingUnwritable(resolver: UnwritableRowResolver): Promise<boolean> {
  const withheld = new Map<string, string>(resolver.source.deadLetters().map((l) => [l.sequenceNumber, l.reason]));
  for (let round = 0; ; round++) {
    try {
      return await resolver.execution.runOneTrigger();
    } catch (error) {
      const unwritable = unwritableRowsIn(error);
      if (!unwritable || round >= MAX_ROUNDS) throw error;
      const blamed = await blameRecords(resolver, unwritable.rows, withheld);
      if (blamed.size === 0) throw error;
      for (const [seq, reason] of blamed) withheld.set(seq, reason);
      resolver.source.withhold(withheld);
      const letters = resolver.source.deadLetters().filter((l) => blamed.has(l.sequenceNumber));
      await resolver.deadLetters.write(letters);
    }
  }
}

/** The batch's records that produce the refused rows, each with the refusal as its reason. */
async function blameRecords(
  resolver: UnwritableRowResolver, rows: readonly UnwritableRow[], withheld: ReadonlyMap<string, string>,
): Promise<Map<string, string>> {
  const refusals = new Map<string, RowRefusal>(rows.map((r) => [r.rowKey, r.refusal]));
  const candidates = resolver.batchSequenceNumbers().filter((seq) => !withheld.has(seq));
  const probe = async (included: readonly string[]): Promise<ReadonlyMap<string, string>> => {
    const inSet = new Set(included);
    const out = new Map(withheld);
    for (const seq of candidates) if (!inSet.has(seq)) out.set(seq, 'probe');
    return runProbe(resolver, out);
  };
  const blamed = new Map<string, string>();
  let baseline: ReadonlyMap<string, string>;
  try {
    baseline = await probe([]);
  } finally {
    resolver.source.withhold(withheld);
  }
  const targets = [...refusals.keys()];
  const search = async (part: readonly string[], known: boolean): Promise<void> => {
    const output = known ? null : await probe(part);
    const hits = output ? targets.filter((k) => output.get(k) !== baseline.get(k)) : targets;
    if (hits.length === 0 || part.length === 0) return;
    if (part.length === 1) {
      blamed.set(part[0]!, describeRefusal(refusals.get(hits[0]!)!));
      return;
    }
    const half = Math.ceil(part.length / 2);
    await search(part.slice(0, half), false);
    await search(part.slice(half), false);
  };
  try {
    // The failed run was the probe of all candidates: every target was in its output.
    await search(candidates, true);
  } finally {
    resolver.source.withhold(withheld);
  }
  return blamed;
}

async function runProbe(resolver: UnwritableRowResolver, withheld: ReadonlyMap<string, string>): Promise<ReadonlyMap<string, string>> {
  resolver.source.withhold(withheld);
  resolver.sink.probing = true;
  try {
    await resolver.execution.runOneTrigger();
  } catch (error) {
    for (let e: unknown = error, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
      if (e instanceof ProbeOutput) return e.rows;
    }
    throw error;
  } finally {
    resolver.sink.probing = false;
  }
  throw new Error('a probe run reached the commit: the guarded sink must stop it');
}
