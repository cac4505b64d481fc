/**
 * What the data-error tests share: counting the trigger runs a search makes and the writes of each
 * dead letter, a deadline that allows a fixed number of looks at the remaining time, and the
 * in-memory engine's answer the sink must equal.
 */
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { MemoryDeadLetterWriter, type DeadLetterRecord } from '../../lib/sources/dead-letter.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import { StreamExecution } from '../../lib/runtime/stream-execution.js';
import type { InvocationLimits } from '../../lib/query/invocation-limits.js';

/** Counts trigger runs (failed runs and probes included) while `body` runs. */
export async function countingRuns<T>(body: () => Promise<T>): Promise<{ value: T; runs: number }> {
  const original = StreamExecution.prototype.runOneTrigger;
  let runs = 0;
  StreamExecution.prototype.runOneTrigger = function runCounted(this: StreamExecution) { runs++; return original.call(this); };
  try {
    return { value: await body(), runs };
  } finally {
    StreamExecution.prototype.runOneTrigger = original;
  }
}

/** Dead letters written, counting every write of each record (a redone search writes one again). */
export class CountingDeadLetters extends MemoryDeadLetterWriter {
  readonly writes = new Map<string, number>();
  override async write(records: readonly DeadLetterRecord[]): Promise<void> {
    for (const r of records) this.writes.set(r.sequenceNumber, (this.writes.get(r.sequenceNumber) ?? 0) + 1);
    await super.write(records);
  }
}

/**
 * An invocation's deadline that allows `checks` looks at the remaining time: the loop looks once
 * per batch, the search once per run, so this many runs fit before it stops.
 */
export const deadlineAfter = (checks: number): InvocationLimits => {
  let left = checks;
  return { remainingTimeMs: () => (left-- > 0 ? 600_000 : 0) };
};

/** The engine in memory over `rows` (complete mode), as external rows: what the sink must hold. */
export async function answerInMemory(schema: string, transform: (df: DataFrame) => DataFrame, rows: readonly (readonly unknown[])[]): Promise<Record<string, unknown>[]> {
  const { stream, df } = new SluiceSession().memoryStream(schema);
  const result = transform(df);
  const sink = new MemorySink();
  const q = await result.writeStream.outputMode('complete').sink(sink).start();
  stream.addData(rows);
  await q.processAllAvailable();
  await q.stop();
  const fields = result.plan.output.map((a) => ({ name: a.name, type: a.type }));
  return sink.allRows().map((r) => toExternalRow(r, fields));
}
