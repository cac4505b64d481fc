/**
 * One Kinesis shard as a micro-batch source, for one invocation. The runtime offers it the
 * records the invocation received (and, to re-run a planned batch exactly, the ones it fetched);
 * the engine plans `(committed, latest]` and reads it back.
 *
 * The offset of a batch names its shard, its first and last sequence numbers and its record
 * count, so a re-run can check that it has exactly the planned records before reading them.
 * Sequence numbers are decimal strings beyond 2^53: compared as BigInt.
 *
 * Column pruning (Spark's, as the JSON memory stream): given the columns the query reads through
 * `pruneColumns` (the engine calls it before the first batch), records are
 * decoded and checked on those columns only, plus the declared partition-key column, which is
 * always checked; the other columns are NULL.
 */
import type { StructField } from '../plan/data-types.js';
import { eventTimeSkewReason, type EventTimeLimit } from '../execution/event-time-skew.js';
import type { DeadLetterRecord } from './dead-letter.js';
import type { RecordDecoder } from './record-decoder.js';
import type { MicroBatchStream, Offset } from './source.js';

export interface ShardRecord {
  readonly sequenceNumber: string;
  readonly partitionKey: string;
  readonly dataBase64: string;
  readonly approximateArrivalTimestampMs: number;
}

export interface KinesisOffset {
  readonly shardId: string;
  /** The last sequence number read (inclusive). */
  readonly sequenceNumber: string;
  /** The batch's first sequence number and record count: what a re-run must find again. */
  readonly firstSequenceNumber?: string;
  readonly recordCount?: number;
  /**
   * A re-drive batch (lib/aws/redrive-batch.ts): its records are a re-drive run's, not the shard's,
   * and `sequenceNumber` stays the shard's committed position, so the next batch reads on from it.
   */
  readonly redrive?: RedriveMark;
}

/** Which re-drive run a batch holds and how many records it has (the run's id names its ledger item). */
export interface RedriveMark {
  readonly run: string;
  readonly count: number;
}

/**
 * A sequence number no Kinesis record has: a seeded child's offset names no record of its own
 * shard yet (it reads from the start), while carrying what its parents applied (stage 2) or a
 * re-drive batch run before its first record (a source shard).
 */
export const SEED_SEQUENCE_NUMBER = '0';

/** The re-drive run that batch `(start, end]` holds, or null for a batch of the shard's own records. */
export function redriveRunOf(start: Offset | null, end: Offset | null): RedriveMark | null {
  const mark = asKinesisOffset(end)?.redrive;
  if (!mark) return null;
  return asKinesisOffset(start)?.redrive?.run === mark.run ? null : mark;
}

interface Buffered {
  readonly record: ShardRecord;
  readonly seq: bigint;
  /** The decoded row, or null when the record went to the dead-letter location. */
  readonly row: unknown[] | null;
  readonly reason: string | null;
}

/** Planned records the shard no longer holds (retention): the first ones of their batch. */
export interface ExpiredRecords {
  readonly firstSequenceNumber: string;
  readonly lastSequenceNumber: string;
  readonly count: number;
}

export interface KinesisShardSourceOptions {
  readonly name: string;
  readonly queryName: string;
  readonly shardId: string;
  readonly schema: readonly StructField[];
  readonly decode: RecordDecoder;
  /** The declared partition-key column: a record whose key disagrees with it is dead-lettered. */
  readonly partitionKeyColumn?: string;
  /** A record whose event time is this far ahead of its arrival is dead-lettered (see event-time-skew.ts). */
  readonly eventTimeLimit?: EventTimeLimit;
}

export function asKinesisOffset(offset: Offset | null): KinesisOffset | null {
  return offset === null ? null : (offset as unknown as KinesisOffset);
}

export class KinesisShardSource implements MicroBatchStream {
  readonly name: string;
  readonly schema: readonly StructField[];
  private buffer: Buffered[] = [];
  private committed: KinesisOffset | null = null;
  private readonly partitionKeyIndex: number;
  private readonly eventTimeIndex: number;
  private decoder: RecordDecoder;
  /** The columns decoded (undefined: all), partition key excluded. */
  private columns: readonly string[] | undefined;
  /**
   * A re-drive run's records offered for a batch of their own (not committed yet), by the run's id;
   * `seeded`: the partition has committed although its offset names no record (a child seeded from
   * its parents after a reshard, which has read nothing of its own shard yet).
   */
  private redrive: { readonly mark: RedriveMark; entries: Buffered[]; readonly seeded: boolean } | null = null;
  /** Records held out of their batch, by sequence number, with the reason (see `withhold`). */
  private withheld: ReadonlyMap<string, string> = new Map();
  /**
   * A planned batch that runs without its expired records: its last sequence number, the last
   * record it lost (the records up to it are left out, even those a delivery still holds) and how
   * many it still has.
   */
  private expiredPrefix: { end: string; lastLost: bigint; held: number } | null = null;

  constructor(private readonly options: KinesisShardSourceOptions) {
    this.name = options.name;
    this.schema = options.schema;
    const key = options.partitionKeyColumn?.toLowerCase();
    this.partitionKeyIndex = key === undefined ? -1 : options.schema.findIndex((f) => f.name.toLowerCase() === key);
    this.decoder = options.decode;
    const eventTime = options.eventTimeLimit?.column.toLowerCase();
    this.eventTimeIndex = eventTime === undefined ? -1 : options.schema.findIndex((f) => f.name.toLowerCase() === eventTime);
  }

  /**
   * Decodes only `columns` from now on (with those of earlier calls); records already buffered are
   * decoded again, so a record is judged the same whenever the engine names the columns.
   */
  pruneColumns(columns: readonly string[]): void {
    const union = new Set([...(this.columns ?? []), ...columns].map((c) => c.toLowerCase()));
    if (this.columns !== undefined && union.size === this.columns.length) return;
    if (this.options.decode.forColumns === undefined) return;
    this.columns = [...union];
    const decoded = this.partitionKeyIndex >= 0 ? [...this.columns, this.schema[this.partitionKeyIndex]!.name] : this.columns;
    this.decoder = this.options.decode.forColumns(decoded);
    this.buffer = this.buffer.map((b) => this.decode(b.record, b.seq));
    if (this.redrive) this.redrive.entries = this.redrive.entries.map((b) => this.decode(b.record, b.seq));
  }

  /** Everything up to `offset` is committed: such records are dropped (Lambda redelivers). */
  setCommitted(offset: KinesisOffset | Offset | null): void {
    this.committed = asKinesisOffset(offset as Offset | null);
    if (this.committed?.redrive && this.committed.redrive.run === this.redrive?.mark.run) this.redrive = null;
    if (this.committed) {
      const last = BigInt(this.committed.sequenceNumber);
      this.buffer = this.buffer.filter((b) => b.seq > last);
    }
  }

  /** Adds records (any order, duplicates ignored); returns how many were new. */
  offer(records: readonly ShardRecord[]): number {
    const committed = this.committed ? BigInt(this.committed.sequenceNumber) : -1n;
    const known = new Set(this.buffer.map((b) => b.record.sequenceNumber));
    let added = 0;
    for (const record of records) {
      const seq = BigInt(record.sequenceNumber);
      if (seq <= committed || known.has(record.sequenceNumber)) continue;
      known.add(record.sequenceNumber);
      this.buffer.push(this.decode(record, seq));
      added++;
    }
    this.buffer.sort((a, b) => (a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0));
    return added;
  }

  /**
   * Offers a re-drive run's records (their sequence numbers are their places in the run, 1..n):
   * with no planned batch pending, the next batch is theirs alone, at the shard's committed
   * position (which must exist: a committed batch, or `seeded`). A run already committed here is ignored.
   */
  offerRedrive(run: string, records: readonly ShardRecord[], seeded = false): void {
    if (this.committed?.redrive?.run === run) return;
    this.redrive = { mark: { run, count: records.length }, entries: records.map((r) => this.decode(r, BigInt(r.sequenceNumber))), seeded };
  }

  private decode(record: ShardRecord, seq: bigint): Buffered {
    const result = this.decoder(Buffer.from(record.dataBase64, 'base64'));
    if (!result.ok) return { record, seq, row: null, reason: result.reason };
    if (this.partitionKeyIndex >= 0) {
      const value = result.row[this.partitionKeyIndex];
      if (value === null || String(value) !== record.partitionKey) {
        const column = this.schema[this.partitionKeyIndex]!.name;
        return {
          record, seq, row: null,
          reason: `partition key '${record.partitionKey}' does not match the declared partition-key column ${column}=${JSON.stringify(value)}; `
            + 'counting it on this shard could split its group across shards',
        };
      }
    }
    if (this.eventTimeIndex >= 0) {
      const eventMicros = result.row[this.eventTimeIndex];
      const reason = typeof eventMicros === 'number' ? eventTimeSkewReason(this.options.eventTimeLimit!, eventMicros, record.approximateArrivalTimestampMs) : null;
      if (reason !== null) return { record, seq, row: null, reason };
    }
    return { record, seq, row: result.row, reason: null };
  }

  initialOffset(): Offset | null {
    return null;
  }

  latestOffset(): Offset | null {
    if (this.redrive) {
      if (!this.committed && !this.redrive.seeded) {
        throw new Error(`shard ${this.options.shardId} has no committed batch yet: a re-drive batch starts at a committed position`);
      }
      // A seeded child that read nothing yet: the position before its first record (read from the start).
      const offset: KinesisOffset = { shardId: this.options.shardId, sequenceNumber: this.committed?.sequenceNumber ?? SEED_SEQUENCE_NUMBER, redrive: this.redrive.mark };
      return offset as unknown as Offset;
    }
    if (this.buffer.length === 0) return this.committed as Offset | null;
    const first = this.buffer[0]!;
    const last = this.buffer[this.buffer.length - 1]!;
    const offset: KinesisOffset = {
      shardId: this.options.shardId,
      sequenceNumber: last.record.sequenceNumber,
      firstSequenceNumber: first.record.sequenceNumber,
      recordCount: this.buffer.length,
    };
    return offset as unknown as Offset;
  }

  private range(start: Offset | null, end: Offset): Buffered[] {
    const run = redriveRunOf(start, end);
    if (run) return this.redrive?.mark.run === run.run ? this.redrive.entries : [];
    let from = start === null ? -1n : BigInt(asKinesisOffset(start)!.sequenceNumber);
    const to = BigInt(asKinesisOffset(end)!.sequenceNumber);
    const expired = this.expiredPrefix;
    if (expired && expired.end === asKinesisOffset(end)!.sequenceNumber && expired.lastLost > from) from = expired.lastLost;
    return this.buffer.filter((b) => b.seq > from && b.seq <= to);
  }

  /** Whether the buffer holds exactly the records the batch `(start, end]` was planned with. */
  covers(start: Offset | null, end: Offset): boolean {
    const planned = asKinesisOffset(end)!;
    const found = this.range(start, end);
    const run = redriveRunOf(start, end);
    if (run) return this.redrive?.mark.run === run.run && found.length === run.count;
    const expired = this.expiredPrefix;
    if (expired && expired.end === planned.sequenceNumber && found.length === expired.held) return true;
    if (planned.recordCount === undefined) return found.length > 0 && found[found.length - 1]!.record.sequenceNumber === planned.sequenceNumber;
    return found.length === planned.recordCount
      && found[0]?.record.sequenceNumber === planned.firstSequenceNumber
      && found[found.length - 1]!.record.sequenceNumber === planned.sequenceNumber;
  }

  /**
   * The batch `(start, end]` lost the oldest of its planned records to retention (Kinesis trims a
   * shard from its oldest record). Decided from `read`, the shard's answer for the batch's range,
   * alone: a delivery may still hold records the shard no longer does, and a set mixing both could
   * hide a gap. When the read is a suffix of the batch ending at its planned last record (or
   * empty), this returns the missing prefix: the planned records before the read's first, even
   * those a delivery holds. Null (the batch still needs them all) when the read lacks the planned
   * last record, or a buffered record after its first: records missing elsewhere are no trim.
   * The batch runs over the read's records once `runWithoutExpired` says what was recorded.
   */
  expiredPrefixOf(start: Offset | null, end: Offset, read: readonly ShardRecord[]): ExpiredRecords | null {
    if (redriveRunOf(start, end)) return null;
    return trimmedPrefixOf(asKinesisOffset(start), asKinesisOffset(end)!, read, this.buffer.map((b) => b.seq));
  }

  /**
   * The batch `(start, end]` runs without the expired prefix `recorded` (what the loss record holds:
   * at least what `expiredPrefixOf` found, more when another attempt saw a later trim). False, and
   * nothing changes, when the buffer does not hold exactly the planned records after it.
   */
  runWithoutExpired(start: Offset | null, end: Offset, recorded: ExpiredRecords): boolean {
    const planned = asKinesisOffset(end)!;
    if (planned.recordCount === undefined || planned.firstSequenceNumber !== recorded.firstSequenceNumber) return false;
    const lastLost = BigInt(recorded.lastSequenceNumber);
    const from = start === null ? -1n : BigInt(asKinesisOffset(start)!.sequenceNumber);
    const held = this.buffer.filter((b) => b.seq > from && b.seq > lastLost && b.seq <= BigInt(planned.sequenceNumber));
    const expected = planned.recordCount - recorded.count;
    if (held.length !== expected || (expected > 0 && held[held.length - 1]!.record.sequenceNumber !== planned.sequenceNumber)) return false;
    this.expiredPrefix = { end: planned.sequenceNumber, lastLost, held: expected };
    return true;
  }

  getBatch(start: Offset | null, end: Offset): unknown[][] {
    if (!this.covers(start, end)) {
      throw new Error(`records of ${this.options.shardId} in (${JSON.stringify(start)}, ${JSON.stringify(end)}] are not all available`);
    }
    const rows: unknown[][] = [];
    for (const b of this.range(start, end)) if (b.row && !this.withheld.has(b.record.sequenceNumber)) rows.push([...b.row]);
    return rows;
  }

  /** The sequence number of each row `getBatch(start, end)` returns, in the same order. */
  rowSequenceNumbers(start: Offset | null, end: Offset): string[] {
    return this.range(start, end).filter((b) => b.row && !this.withheld.has(b.record.sequenceNumber)).map((b) => b.record.sequenceNumber);
  }

  numInvalidRecords(start: Offset | null, end: Offset): number {
    return this.range(start, end).filter((b) => this.reasonOf(b) !== null).length;
  }

  /**
   * Holds these records out of every batch from now on (replacing the previous set): their
   * result is one the sink cannot store, so they are dead letters with the given reason. Records
   * that did not decode keep their own reason.
   */
  withhold(reasons: ReadonlyMap<string, string>): void {
    this.withheld = new Map(reasons);
  }

  private reasonOf(b: Buffered): string | null {
    return b.row === null ? b.reason : this.withheld.get(b.record.sequenceNumber) ?? null;
  }

  /** Records that cannot become rows or are withheld, with their reasons, for the dead-letter writer. */
  deadLetters(): DeadLetterRecord[] {
    const own = this.buffer.map((b) => ({ b, shardId: this.options.shardId }));
    // A re-driven record that fails again is named by its run and place (`<shard>@redrive:<run>`/<n>), which the ledger knows.
    const redriven = this.redrive?.entries.map((b) => ({ b, shardId: this.redrive!.mark.run })) ?? [];
    return [...redriven, ...own].filter(({ b }) => this.reasonOf(b) !== null).map(({ b, shardId }) => ({
      queryName: this.options.queryName,
      shardId,
      sequenceNumber: b.record.sequenceNumber,
      partitionKey: b.record.partitionKey,
      approximateArrivalTimestampMs: b.record.approximateArrivalTimestampMs,
      dataBase64: b.record.dataBase64,
      reason: this.reasonOf(b)!,
    }));
  }

  /** The sequence numbers of the records of batch `(start, end]`, in order (a re-drive batch: the run's places). */
  batchSequenceNumbers(start: Offset | null, end: Offset): string[] {
    return this.range(start, end).map((b) => b.record.sequenceNumber);
  }

  /** Sequence numbers buffered (uncommitted), in order. */
  pendingSequenceNumbers(): string[] {
    return this.buffer.map((b) => b.record.sequenceNumber);
  }

  commit(end: Offset): void {
    this.setCommitted(asKinesisOffset(end));
  }
}

/**
 * What retention took from the planned batch `(start, end]`, decided from `read` (the shard's
 * answer for its range) alone, `known` being every sequence number buffered: see
 * KinesisShardSource.expiredPrefixOf. Shared by the internal stream's shard source (stage 2).
 */
export function trimmedPrefixOf(start: KinesisOffset | null, planned: KinesisOffset, read: readonly ShardRecord[], known: readonly bigint[]): ExpiredRecords | null {
  if (planned.recordCount === undefined || planned.firstSequenceNumber === undefined) return null;
  const from = start === null ? -1n : BigInt(start.sequenceNumber);
  const first = BigInt(planned.firstSequenceNumber);
  const last = BigInt(planned.sequenceNumber);
  const held = [...new Set(read.map((r) => BigInt(r.sequenceNumber)).filter((seq) => seq > from && seq >= first && seq <= last))]
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (held.length >= planned.recordCount) return null;
  if (held.length > 0) {
    if (held[held.length - 1] !== last || held[0]! <= first) return null;
    // Contiguous: every record known after the read's first is in the read (sequence numbers have gaps, so only known records can be checked).
    const inRead = new Set(held);
    if (known.some((seq) => seq > held[0]! && seq <= last && !inRead.has(seq))) return null;
  }
  return {
    firstSequenceNumber: planned.firstSequenceNumber,
    lastSequenceNumber: held.length > 0 ? String(held[0]! - 1n) : planned.sequenceNumber,
    count: planned.recordCount - held.length,
  };
}
