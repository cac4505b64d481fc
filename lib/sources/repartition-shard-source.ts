/**
 * One shard of the internal repartition stream as a micro-batch source for stage 2. Like
 * KinesisShardSource, its offsets name the shard position; they also carry, per source shard, what
 * has been applied, so duplicates (PutRecords retries, stage-1 re-runs) are skipped exactly and the
 * source shards' event times give the watermark.
 */
import type { StructField } from '../plan/data-types.js';
import { SEED_SEQUENCE_NUMBER, trimmedPrefixOf, type ExpiredRecords, type KinesisOffset, type ShardRecord } from './kinesis-shard-source.js';
import {
  applyRepartitionRecord, asRangeProgress, decodeRepartitionRecord, redriveProgressKey, mergeSourceProgress, sourcesWatermarkMs, type RepartitionRecord, type SourceProgress, type SourceProgressMap, type SourceShard,
} from './repartition-records.js';
import type { DeadLetterRecord } from './dead-letter.js';
import { heldOutRowDeadLetter, heldOutRowId } from './held-out-rows.js';
import type { MicroBatchStream, Offset } from './source.js';
import { missingBatches, type HashRange, type MissingBatches } from './hash-range-progress.js';

export interface RepartitionOffset extends KinesisOffset {
  readonly sources: SourceProgressMap;
}

/**
 * What a stage-2 batch lost with its expired internal records: per sending partition (`src`, a
 * stage-1 partition), the batches whose rows for this shard's hash ranges it will never apply.
 */
export interface LostSourceBatches extends MissingBatches {
  readonly src: string;
  /** The hop input (source stream) the rows belonged to, when the stage reads several. */
  readonly input?: string;
}

/** Internal records a planned stage-2 batch lost to retention, and what they carried. */
export interface ExpiredInternalRecords extends ExpiredRecords {
  readonly lostSources: readonly LostSourceBatches[];
}

interface Buffered {
  readonly record: ShardRecord;
  readonly seq: bigint;
  readonly decoded: RepartitionRecord | null;
}

const asOffset = (o: Offset | null): RepartitionOffset | null => (o === null ? null : (o as unknown as RepartitionOffset));

/** Per progress key, the batches some records bring whole (every part). */
function heldBatches(records: readonly RepartitionRecord[]): Map<string, Set<number>> {
  const parts = new Map<string, { parts: Set<number>; of: number }>();
  for (const r of records) {
    const key = `${redriveProgressKey(r)}\u0000${r.batch}`;
    const entry = parts.get(key) ?? { parts: new Set(), of: r.parts };
    entry.parts.add(r.part);
    parts.set(key, entry);
  }
  const held = new Map<string, Set<number>>();
  for (const [key, { parts: got, of }] of parts) {
    if (got.size < of) continue;
    const [src, batch] = key.split('\u0000') as [string, string];
    held.set(src, (held.get(src) ?? new Set()).add(Number(batch)));
  }
  return held;
}

/** `missing`'s batches less those held, as runs of consecutive batches. */
function withoutBatches(missing: MissingBatches, held: ReadonlySet<number>): MissingBatches[] {
  const out: MissingBatches[] = [];
  for (let b = missing.fromBatch; b <= missing.toBatch; b++) {
    if (held.has(b)) continue;
    const last = out[out.length - 1];
    if (last && last.toBatch === b - 1) out[out.length - 1] = { ...last, toBatch: b };
    else out.push({ ...missing, fromBatch: b, toBatch: b });
  }
  return out;
}

export class RepartitionShardSource implements MicroBatchStream {
  private buffer: Buffered[] = [];
  private committed: RepartitionOffset | null = null;
  /** Rows held out of their batch (held-out-rows.ts ids), with the reason: a data error they raise in this stage. */
  private withheld: ReadonlyMap<string, string> = new Map();

  constructor(
    readonly name: string, readonly schema: readonly StructField[], private readonly shardId: string,
    /** The receiving aggregate takes partial aggregates: a record of plain rows is turned into them. */
    private readonly toPartialRows?: (rows: readonly (readonly unknown[])[]) => unknown[][],
    /** Read only the records of this hop input (several inputs share a shard); none: the untagged ones. */
    private readonly input?: string,
    /**
     * A row's routing hash, as stage 1 routed it (`partial`: a partial-aggregate row): tells which
     * rows of a batch re-sent after a reshard of this stream were applied before.
     */
    private readonly hashOf?: (row: readonly unknown[], partial: boolean) => bigint,
    /** Apply only the records of this namespace (a replay's, sharing the stream); none: the query's own. */
    private readonly namespace?: string,
    /** The query the dead letters of held-out rows name. */
    private readonly queryName = '',
  ) {}

  setCommitted(offset: Offset | null): void {
    this.committed = asOffset(offset);
    if (this.committed) {
      const last = BigInt(this.committed.sequenceNumber);
      this.buffer = this.buffer.filter((b) => b.seq > last);
    }
  }

  offer(records: readonly ShardRecord[]): void {
    const after = this.committed ? BigInt(this.committed.sequenceNumber) : -1n;
    const known = new Set(this.buffer.map((b) => b.record.sequenceNumber));
    for (const record of records) {
      const seq = BigInt(record.sequenceNumber);
      if (seq <= after || known.has(record.sequenceNumber)) continue;
      known.add(record.sequenceNumber);
      let decoded: RepartitionRecord | null = null;
      try {
        decoded = decodeRepartitionRecord(Buffer.from(record.dataBase64, 'base64'));
      } catch {
        decoded = null; // Not ours: only Sluice writes this stream; counted as dead-lettered.
      }
      this.buffer.push({ record, seq, decoded });
    }
    this.buffer.sort((a, b) => (a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0));
  }

  /** The watermark from what is committed: batch N runs with what batches before N applied. */
  committedWatermarkMs(delayMs: number, knownSources: readonly (string | SourceShard)[] = []): number {
    return sourcesWatermarkMs(this.committed?.sources ?? {}, delayMs, knownSources);
  }

  get committedSources(): SourceProgressMap {
    return this.committed?.sources ?? {};
  }

  initialOffset(): Offset | null {
    return null;
  }

  /**
   * A planned batch that runs without its expired records: its last sequence number, the last
   * record it lost (those up to it are left out, even ones a delivery holds) and how many it has.
   */
  private expiredPrefix: { end: bigint; lastLost: bigint; held: number } | null = null;

  private recordsIn(start: RepartitionOffset | null, end: bigint): Buffered[] {
    let from = start ? BigInt(start.sequenceNumber) : -1n;
    const expired = this.expiredPrefix;
    if (expired && expired.end === end && expired.lastLost > from) from = expired.lastLost;
    return this.buffer.filter((b) => b.seq > from && b.seq <= end);
  }

  /**
   * Applies the records after `start` up to `end`; `rows` receives what is new (when given), without
   * the rows held out, and `ids` the id of every new row, held out or not, in order.
   */
  private apply(start: RepartitionOffset | null, end: bigint, rows?: unknown[][], ids?: string[]): { sources: Record<string, SourceProgress>; records: Buffered[] } {
    const sources: Record<string, SourceProgress> = { ...(start?.sources ?? {}) };
    const records = this.recordsIn(start, end);
    for (const b of records) {
      if (!b.decoded || !this.isForThisShard(b.decoded)) continue;
      const record = b.decoded;
      const applied = applyRepartitionRecord(sources, record, this.hashOf && ((row) => this.hashOf!(row, record.partial === true)));
      if (!applied || (!rows && !ids)) continue;
      // A row's id is its place in the record, whichever of the record's rows are new here.
      const place = applied === record.rows ? null : new Map(record.rows.map((r, i) => [r, i]));
      const kept: (readonly unknown[])[] = [];
      applied.forEach((row, i) => {
        const id = heldOutRowId(b.record.sequenceNumber, place ? place.get(row)! : i);
        ids?.push(id);
        if (!this.withheld.has(id)) kept.push(row);
      });
      if (!rows) continue;
      const converted = this.toPartialRows && !record.partial ? this.toPartialRows(kept) : kept;
      for (const r of converted) rows.push([...r]);
    }
    return { sources, records };
  }

  private isForThisShard(record: RepartitionRecord): boolean {
    return (record.to === undefined || record.to === this.shardId) && record.in === this.input && record.ns === this.namespace;
  }

  latestOffset(): Offset | null {
    if (this.buffer.length === 0) return this.committed as Offset | null;
    const last = this.buffer[this.buffer.length - 1]!;
    const { sources, records } = this.apply(this.committed, last.seq);
    const offset: RepartitionOffset = {
      shardId: this.shardId,
      sequenceNumber: last.record.sequenceNumber,
      firstSequenceNumber: records[0]!.record.sequenceNumber,
      recordCount: records.length,
      sources,
    };
    return offset as unknown as Offset;
  }

  covers(start: Offset | null, end: Offset): boolean {
    const planned = asOffset(end)!;
    const found = this.recordsIn(asOffset(start), BigInt(planned.sequenceNumber));
    const expired = this.expiredPrefix;
    if (expired && expired.end === BigInt(planned.sequenceNumber)) return found.length === expired.held;
    return found.length === planned.recordCount
      && found[0]?.record.sequenceNumber === planned.firstSequenceNumber
      && found[found.length - 1]?.record.sequenceNumber === planned.sequenceNumber;
  }

  /**
   * The batch `(start, end]` lost its oldest internal records to retention, decided from `read`
   * alone as for a source shard (`trimmedPrefixOf`): the missing prefix, with what it carried (see
   * `lostSourcesAfter`); null when the read is no trimmed suffix. Nothing changes until
   * `runWithoutExpired`.
   */
  expiredPrefixOf(start: Offset | null, end: Offset, read: readonly ShardRecord[]): ExpiredInternalRecords | null {
    const planned = asOffset(end)!;
    const expired = trimmedPrefixOf(asOffset(start), planned, read, this.buffer.map((b) => b.seq));
    return expired && { ...expired, lostSources: this.lostSourcesAfter(asOffset(start), planned, BigInt(expired.lastSequenceNumber)) };
  }

  /**
   * The batch `(start, end]` runs without the expired prefix `recorded` (the loss record's, at least
   * what `expiredPrefixOf` found) from now on, keeping its planned end, and so its planned progress:
   * what the lost records carried counts as applied, and a late copy of them is a duplicate. False,
   * and nothing changes, when the buffer does not hold exactly the planned records after it.
   */
  runWithoutExpired(start: Offset | null, end: Offset, recorded: ExpiredRecords): boolean {
    const planned = asOffset(end)!;
    if (planned.recordCount === undefined || planned.firstSequenceNumber !== recorded.firstSequenceNumber) return false;
    const lastLost = BigInt(recorded.lastSequenceNumber);
    const last = BigInt(planned.sequenceNumber);
    const held = this.recordsIn(asOffset(start), last).filter((b) => b.seq > lastLost);
    const expected = planned.recordCount - recorded.count;
    if (held.length !== expected || (expected > 0 && held[held.length - 1]!.seq !== last)) return false;
    this.expiredPrefix = { end: last, lastLost, held: expected };
    return true;
  }

  /** What the records up to `lastLost` of the batch `(start, planned]` carried, when the batch runs without them. */
  expiredLostSources(start: Offset | null, end: Offset): LostSourceBatches[] {
    const lastLost = this.expiredPrefix?.lastLost;
    return lastLost === undefined ? [] : this.lostSourcesAfter(asOffset(start), asOffset(end)!, lastLost);
  }

  /**
   * The senders' batches the batch `(start, planned]` was planned to apply (start's progress to the
   * planned one) that no record after `lastLost` brings whole. Stage 1 sends every batch to every
   * shard, so each such batch had a record among the lost ones (its rows for this shard may be none).
   */
  private lostSourcesAfter(start: RepartitionOffset | null, planned: RepartitionOffset, lastLost: bigint): LostSourceBatches[] {
    const from = start ? BigInt(start.sequenceNumber) : -1n;
    const kept = this.buffer.filter((b) => b.seq > from && b.seq > lastLost && b.seq <= BigInt(planned.sequenceNumber));
    const held = heldBatches(kept.flatMap((b) => (b.decoded && b.decoded.kind === 'rows' && this.isForThisShard(b.decoded) ? [b.decoded] : [])));
    const before = start?.sources ?? {};
    return Object.entries(planned.sources).flatMap(([src, progress]) => missingBatches(before[src] && asRangeProgress(before[src]), asRangeProgress(progress))
      .flatMap((m) => withoutBatches(m, held.get(src) ?? new Set()))
      .map((m) => ({ src, ...(this.input === undefined ? {} : { input: this.input }), ...m })));
  }

  getBatch(start: Offset | null, end: Offset): unknown[][] {
    if (!this.covers(start, end)) {
      throw new Error(`records of ${this.shardId} in (${JSON.stringify(start)}, ${JSON.stringify(end)}] are not all available`);
    }
    const rows: unknown[][] = [];
    this.apply(asOffset(start), BigInt(asOffset(end)!.sequenceNumber), rows);
    return rows;
  }

  numInvalidRecords(start: Offset | null, end: Offset): number {
    const undecoded = this.recordsIn(asOffset(start), BigInt(asOffset(end)!.sequenceNumber)).filter((b) => !b.decoded).length;
    if (this.withheld.size === 0) return undecoded;
    return undecoded + this.batchSequenceNumbers(start, end).filter((id) => this.withheld.has(id)).length;
  }

  /**
   * The id of every row batch `(start, end]` applies (held out or not), in the order the stage
   * applies them: what the search for a batch's failing rows (lib/query/data-error-search.ts) bisects.
   */
  batchSequenceNumbers(start: Offset | null, end: Offset): string[] {
    const ids: string[] = [];
    this.apply(asOffset(start), BigInt(asOffset(end)!.sequenceNumber), undefined, ids);
    return ids;
  }

  /**
   * Holds these rows out of every batch from now on (replacing the previous set), by id: each
   * raises a data error in this stage's stateful operator, so it is a dead letter with the reason.
   * The record stays applied (its progress and event time count): only its row is left out.
   */
  withhold(reasons: ReadonlyMap<string, string>): void {
    this.withheld = new Map(reasons);
  }

  /** The rows held out, as dead letters (each as an internal record of its own, with its provenance). */
  deadLetters(): DeadLetterRecord[] {
    const letters: DeadLetterRecord[] = [];
    for (const b of this.buffer) {
      // Several hop inputs' views share the shard: each letters only its own records' rows.
      if (!b.decoded || !this.isForThisShard(b.decoded)) continue;
      b.decoded.rows.forEach((row, i) => {
        const reason = this.withheld.get(heldOutRowId(b.record.sequenceNumber, i));
        if (reason !== undefined) letters.push(heldOutRowDeadLetter(this.queryName, this.shardId, b.record, b.decoded!, row, i, reason));
      });
    }
    return letters;
  }

  commit(end: Offset): void {
    this.setCommitted(end);
  }
}

export { SEED_SEQUENCE_NUMBER };

/** The starting offset of a child shard of the internal stream (hash range `range`), from its parents' last ones. */
export function seedRepartitionOffset(
  shardId: string, range: HashRange, parents: readonly { readonly offset: Offset | null; readonly range: HashRange }[],
): Offset {
  const offset: RepartitionOffset = {
    shardId,
    sequenceNumber: SEED_SEQUENCE_NUMBER,
    recordCount: 0,
    sources: mergeSourceProgress(parents.map((p) => ({ sources: asOffset(p.offset)?.sources ?? null, range: p.range })), range),
  };
  return offset as unknown as Offset;
}

/** Where to read a shard after `sequenceNumber`: null (from the start) for a seeded child's offset. */
export function readAfterPosition(sequenceNumber: string | null | undefined): string | null {
  return sequenceNumber === undefined || sequenceNumber === null || sequenceNumber === SEED_SEQUENCE_NUMBER ? null : sequenceNumber;
}

/**
 * The views of one internal shard (one per hop input of a join's stage 2) as one source the
 * data-error search holds rows out of: a row raising in a join may be on either side.
 */
export function heldOutRowsOfViews(views: readonly RepartitionShardSource[]): {
  readonly name: string; withhold(reasons: ReadonlyMap<string, string>): void; deadLetters(): DeadLetterRecord[];
} {
  return {
    name: views[0]!.name,
    withhold: (reasons) => { for (const v of views) v.withhold(reasons); },
    deadLetters: () => views.flatMap((v) => v.deadLetters()),
  };
}

/** Row ids (held-out-rows.ts) of several views in shard order: by record, then place in it. */
export function inShardOrder(ids: readonly string[]): string[] {
  const key = (id: string): [bigint, number] => {
    const dot = id.lastIndexOf('.');
    return [BigInt(id.slice(0, dot)), Number(id.slice(dot + 1))];
  };
  return [...ids].sort((a, b) => {
    const [sa, ra] = key(a);
    const [sb, rb] = key(b);
    return sa < sb ? -1 : sa > sb ? 1 : ra - rb;
  });
}
