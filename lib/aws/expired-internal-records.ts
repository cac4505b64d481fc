/**
 * What a stage-2 batch lost when its oldest internal records expired (issue 11): the engine knows
 * the sending partitions' batches whose rows it will never apply (LostSourceBatches); this names
 * the sender's own records those batches read, from the sender's offset log, so an operator can
 * find them in the stream before it (a source stream: the raw records, while it still holds them).
 *
 * Why no recovery: the internal records were written after the records they came from, so with
 * equal retention (the construct's default, 24 hours each) those have expired first; and a later
 * hop's sender is itself stateful, so its output cannot be computed again from its input alone.
 */
import type { Checkpoint } from '../checkpoint/checkpoint.js';
import { asKinesisOffset } from '../sources/kinesis-shard-source.js';
import type { LostSourceBatches } from '../sources/repartition-shard-source.js';

/** A lost sender batch range with the records it read, where the sender's offset log still has them. */
export interface LostSenderRecords extends LostSourceBatches {
  /** The stream the sender read (a source stream, or the hop before). */
  readonly senderStream?: string;
  readonly senderShardId?: string;
  /** The sender's records after this sequence number (null: from the shard's start)... */
  readonly afterSequenceNumber?: string | null;
  /** ...up to this one (inclusive). */
  readonly lastSequenceNumber?: string;
}

export interface SenderLog {
  readonly streamName: string;
  readonly sourceName: string;
  readonly checkpoint: Checkpoint;
}

/** Each lost range with its sender's records; a range whose sender or offsets are unknown stays as it is. */
export async function withSenderRecords(
  lost: readonly LostSourceBatches[], senderOf: (lost: LostSourceBatches) => SenderLog | null,
): Promise<LostSenderRecords[]> {
  const out: LostSenderRecords[] = [];
  for (const l of lost) {
    const sender = senderOf(l);
    if (!sender) { out.push(l); continue; }
    const endOf = async (batchId: number) => asKinesisOffset((await sender.checkpoint.offsetLog.get(batchId))?.offsets[sender.sourceName] ?? null);
    const last = await endOf(l.toBatch);
    if (!last) { out.push({ ...l, senderStream: sender.streamName }); continue; }
    const before = l.fromBatch > 0 ? await endOf(l.fromBatch - 1) : null;
    out.push({
      ...l, senderStream: sender.streamName, senderShardId: last.shardId,
      ...(l.fromBatch > 0 && !before ? {} : { afterSequenceNumber: before?.sequenceNumber ?? null }),
      lastSequenceNumber: last.sequenceNumber,
    });
  }
  return out;
}

/** One line per lost range, for status and logs. */
export function describeLostSenderRecords(l: LostSenderRecords): string {
  const batches = l.fromBatch === l.toBatch ? `batch ${l.fromBatch}` : `batches ${l.fromBatch}..${l.toBatch}`;
  const records = l.lastSequenceNumber === undefined ? ''
    : `, records of ${l.senderStream} ${l.senderShardId} ${l.afterSequenceNumber === undefined ? '?' : l.afterSequenceNumber === null ? 'start' : `after ${l.afterSequenceNumber}`}..${l.lastSequenceNumber}`;
  return `${l.input === undefined ? '' : `${l.input} `}${l.src} ${batches} (hash keys ${l.lo}..${l.hi}${records})`;
}
