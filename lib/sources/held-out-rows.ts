/**
 * Rows of the internal repartition stream that stage 2 holds out of a batch: a row (a partial
 * aggregate, or a plain row of the hop) whose application raises a data error in the stage's
 * stateful operator (a long sum past int64 while merging partials). Spark would fail the query;
 * Sluice dead-letters what raised and commits the rest, as it does with a source record in a
 * one-stage query (SEMANTICS.md, "Data errors").
 *
 * Stage 2 cannot hold back a source record (its records are stage 1's output), so what it holds
 * back is one row of an internal record: the smallest unit whose inclusion decides the error. A
 * partial aggregate stands for the records of one group in one stage-1 batch of one source shard;
 * its dead letter names them (source shard, stage-1 batch) and holds the row as an internal record
 * of its own, so a re-drive can put it back on the internal stream.
 */
import type { ShardRecord } from './kinesis-shard-source.js';
import type { DeadLetterRecord, DeadLetterWriter } from './dead-letter.js';
import { encodeRepartitionRecord, type RepartitionRecord } from './repartition-records.js';

/**
 * Marks the shard of every dead letter a stage reading an internal stream writes (a held-out row, a
 * result row the sink refuses, a row raising above state, a skipped internal record): an internal
 * stream's shard ids repeat the source stream's (`shardId-000000000000`), and a re-drive must never
 * put such a letter into the source stream, nor run it through stage 1 as a source record.
 */
export const INTERNAL_SHARD_MARK = '@internal';
export const isInternalStreamLetter = (letter: Pick<DeadLetterRecord, 'shardId'>): boolean => letter.shardId.endsWith(INTERNAL_SHARD_MARK);
export const internalStreamLetterShard = (shardId: string): string => (shardId.endsWith(INTERNAL_SHARD_MARK) ? shardId : `${shardId}${INTERNAL_SHARD_MARK}`);

/** The dead-letter writer of a stage reading an internal stream: whoever writes through it, its letters carry the mark. */
export function internalStreamLetters(writer: DeadLetterWriter): DeadLetterWriter {
  return {
    description: `${writer.description} (internal stream)`,
    write: (records) => writer.write(records.map((r) => ({ ...r, shardId: internalStreamLetterShard(r.shardId) }))),
  };
}

/** A row's id within its shard: the internal record's sequence number and the row's place in it. */
export const heldOutRowId = (sequenceNumber: string, row: number): string => `${sequenceNumber}.${row}`;

export function heldOutRowDeadLetter(
  queryName: string, shardId: string, record: ShardRecord, decoded: RepartitionRecord, row: readonly unknown[], place: number, reason: string,
): DeadLetterRecord {
  // The row alone, as the internal record it came in (no hash ranges: it is one row, not the batch's share).
  const alone: RepartitionRecord = {
    v: decoded.v, kind: 'rows', src: decoded.src, batch: decoded.batch, part: 0, parts: 1, maxEventTimeMs: decoded.maxEventTimeMs, rows: [row],
    ...(decoded.partial ? { partial: true } : {}),
    ...(decoded.in !== undefined ? { in: decoded.in } : {}),
    ...(decoded.ns !== undefined ? { ns: decoded.ns } : {}),
    // A re-driven row (held-out-row-redrive.ts) held out again keeps its tag: reported as failed again, not re-driven in a loop.
    ...(decoded.redrive !== undefined ? { redrive: decoded.redrive } : {}),
  };
  const what = decoded.partial
    ? `a partial aggregate of stage 1's batch ${decoded.batch} on source partition ${decoded.src} (that batch's records of one group)`
    : `a row of stage 1's batch ${decoded.batch} on source partition ${decoded.src}`;
  return {
    queryName,
    shardId: internalStreamLetterShard(shardId),
    sequenceNumber: heldOutRowId(record.sequenceNumber, place),
    partitionKey: record.partitionKey,
    approximateArrivalTimestampMs: record.approximateArrivalTimestampMs,
    dataBase64: Buffer.from(encodeRepartitionRecord(alone)).toString('base64'),
    reason: `${reason} (the stage reading the internal stream left out ${what}, row ${place} of internal record ${record.sequenceNumber}: applying it in the stage's stateful operator raises)`,
  };
}
