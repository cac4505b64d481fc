/**
 * Stage 1's sink: routes each row by its state key to a shard of the internal stream and sends,
 * for every shard, one record (or several, each holding one hash range's rows) per batch, empty
 * ones included, so each state partition hears of every source shard's progress. Idempotent by
 * construction: a re-run batch sends the same rows, and stage 2 applies each (source, batch, hash) once.
 */
import { stringifyWithLongs } from '../core/long.js';
import { jsonBytesBound } from './json-size-bound.js';
import type { CostMeter } from '../core/cost-meter.js';
import { encodeRepartitionRecord, REPARTITION_RECORD_VERSION, type RepartitionRecord } from '../sources/repartition-records.js';
import { hexRange, type HashRange } from '../sources/hash-range-progress.js';
import { StreamingQueryError } from '../errors/sluice-error.js';
import { kinesisHashKey, repartitionRoutingKey } from '../state/state-routing.js';
import { createHash } from 'node:crypto';
import type { RowRefusal, Sink, SinkBatch, SinkRowLimits } from './sink.js';
import type { Hop } from '../analysis/stages.js';
import { compilePartialAggregator, type PartialAggregator } from '../execution/partial-aggregation.js';

export interface RepartitionTarget {
  readonly shardId: string;
  readonly startingHashKey: bigint;
  readonly endingHashKey: bigint;
}

export interface RepartitionRecordOut {
  readonly data: Uint8Array;
  readonly partitionKey: string;
  /** Routes the record to exactly this shard (its starting hash key). */
  readonly explicitHashKey: string;
  /** The shard it is meant for. */
  readonly shardId?: string;
}

/** The internal stream, as stage 1 sees it (Kinesis on AWS). */
export interface RepartitionChannel {
  /** The open shards, ordered by hash range. */
  shards(): Promise<readonly RepartitionTarget[]>;
  /**
   * Writes every record (retrying rejected ones); resolves when all are written, with the shard
   * each record went to when the channel knows it.
   */
  put(records: readonly RepartitionRecordOut[]): Promise<readonly string[] | void>;
  /** Forgets a cached shard list (the stream was resharded). */
  refresh?(): void;
}

/** Stage 1 routed by a shard list the internal stream no longer has: the batch must be sent again. */
export class RepartitionResharded extends StreamingQueryError {
  constructor(misrouted: number) {
    super(`${misrouted} repartition record(s) landed on a shard other than the one they were built for: the internal stream was resharded.`, {
      code: 'REPARTITION_RESHARDED', retryable: true,
      hint: 'nothing to do: the batch is sent again by the new shard list, and the misrouted records are ignored by the shard that got them.',
    });
  }
}

export interface RepartitionSinkOptions {
  readonly channel: RepartitionChannel;
  /** Stage-1 output ordinals of the state key ([] = everything to one partition). */
  readonly routingOrdinals: readonly number[];
  /** Stage-1 output ordinal of the event-time column (epoch micros), or null. */
  readonly eventTimeOrdinal: number | null;
  /**
   * What each record tells the next stage of event time: the batch's maximum event time (after
   * stage 1, default), or the watermark the sending stateful stage ran the batch with (after a
   * later stage: the receiver then uses it with delay 0).
   */
  readonly carries?: 'max-event-time' | 'watermark';
  /**
   * Partial aggregation before the hop: rows are grouped per batch and one row per group crosses,
   * `[max event time, ...key values, ...buffers]`, routed by the key values at `routingKeyPositions`.
   */
  readonly partial?: { readonly aggregator: PartialAggregator; readonly routingKeyPositions: readonly number[] };
  /** Kinesis takes 1 MiB per record; parts stay below this many bytes of rows (UTF-8). */
  readonly maxRecordBytes?: number;
  readonly meter?: CostMeter;
  /** The hop input these rows are, when stage 2 reads several (tags every record). */
  readonly input?: string;
  /** The namespace sending (a replay's; tags every record so the live stage 2 ignores it). */
  readonly namespace?: string;
}

/** Kinesis's own routing: the MD5 of the partition key as a 128-bit number. */
export const hashKeyOf = kinesisHashKey;

/** Kinesis's limit on one record (data and partition key). */
export const KINESIS_RECORD_LIMIT_BYTES = 1024 * 1024;
/** Rows per record, in UTF-8 bytes: the rest of the 1 MiB is left to the record's envelope. */
export const DEFAULT_HOP_ROW_BYTES = 900_000;

/** A row's size in a hop record: its JSON in UTF-8 bytes, and the separating comma. */
function encodedRowBytes(row: readonly unknown[]): number {
  return Buffer.byteLength(stringifyWithLongs(row)) + 1;
}

/** Whether a row fits `limit`: by a bound of its size, converted to JSON only when the bound reaches the limit. */
function rowFits(row: readonly unknown[], limit: number): boolean {
  return jsonBytesBound(row) + 1 <= limit || encodedRowBytes(row) <= limit;
}

export function targetFor(targets: readonly RepartitionTarget[], hash: bigint): RepartitionTarget {
  const found = targets.find((t) => hash >= t.startingHashKey && hash <= t.endingHashKey);
  if (!found) throw new Error(`no open shard of the repartition stream covers hash key ${hash}`);
  return found;
}

export class RepartitionSink implements Sink {
  readonly description = 'RepartitionSink';
  readonly supportedOutputModes = ['append'] as const;

  constructor(private readonly options: RepartitionSinkOptions) {}

  private get rowBytesLimit(): number {
    return this.options.maxRecordBytes ?? DEFAULT_HOP_ROW_BYTES;
  }

  /**
   * A row that alone outgrows one record of the internal stream can never cross: Kinesis refuses
   * the whole PutRecords call on every retry, which blocked the source shard. Declared here, it is
   * found before anything is sent, and the query's onUnwritableRow policy dead-letters its records.
   */
  readonly rowLimits: SinkRowLimits = {
    // Rows crossing the hop have no key of their own: the row's content names it, as for appended files.
    rowKey: (batch, rowIndex) => `row:${createHash('sha256').update(stringifyWithLongs(batch.rows[rowIndex]!)).digest('base64')}`,
    check: (batch, rowIndex) => this.rowRefusal(batch.rows[rowIndex]!),
  };

  private rowRefusal(row: readonly unknown[]): RowRefusal | null {
    if (rowFits(row, this.rowBytesLimit)) return null;
    const bytes = encodedRowBytes(row);
    return {
      code: 'SINK_ITEM_TOO_LARGE',
      reason: `the row is ${bytes} bytes encoded; one record of the internal repartition stream holds at most ${this.rowBytesLimit} bytes `
        + `of rows (Kinesis takes ${KINESIS_RECORD_LIMIT_BYTES} bytes, 1 MiB, per record), so it cannot cross to the next stage`,
    };
  }

  /** The sink for `hop` over `channel`: its routing, what it carries, its partial aggregation; `input` tags a multi-input hop's rows. */
  static forHop(hop: Hop, channel: RepartitionChannel, meter?: CostMeter, input?: string, namespace?: string): RepartitionSink {
    return new RepartitionSink({
      channel, meter, ...(input === undefined ? {} : { input }), ...(namespace === undefined ? {} : { namespace }), routingOrdinals: hop.routingOrdinals, eventTimeOrdinal: hop.eventTime?.ordinal ?? null, carries: hop.carries,
      ...(hop.partial ? {
        partial: { aggregator: compilePartialAggregator(hop.partial, hop.eventTime?.ordinal ?? null), routingKeyPositions: hop.routingKeyPositions },
      } : {}),
    });
  }

  async addBatch(batch: SinkBatch): Promise<void> {
    const targets = await this.options.channel.shards();
    const byTarget = new Map<string, Routed[]>(targets.map((t) => [t.shardId, []]));
    const { routingOrdinals, eventTimeOrdinal } = this.options;
    // Partial aggregates cross when they are at most half the rows; else the rows do (late rows
    // need no filter either way: a group's rows share its key, so the final aggregate drops a late
    // group whole, exactly as it would drop each of its rows).
    // A partial aggregate that outgrows one record (collect_list of one key's many rows) cannot
    // cross; its rows can (each was checked against the limit), so the batch sends rows.
    const partialRows = this.options.partial?.aggregator.toPartialRows(batch.rows) ?? null;
    const partial = partialRows !== null && partialRows.length * 2 <= batch.rows.length
      && partialRows.every((row) => rowFits(row, this.rowBytesLimit)) ? this.options.partial! : null;
    if (partial) {
      for (const row of partialRows!) {
        const hash = hashKeyOf(repartitionRoutingKey(partial.routingKeyPositions.map((p) => row[1 + p])));
        byTarget.get(targetFor(targets, hash).shardId)!.push({ row, hash });
      }
    }
    let maxEventTimeMicros: number | null = null;
    for (const row of batch.rows) {
      if (!partial) {
        const hash = hashKeyOf(repartitionRoutingKey(routingOrdinals.map((i) => row[i])));
        byTarget.get(targetFor(targets, hash).shardId)!.push({ row, hash });
      }
      if (eventTimeOrdinal !== null) {
        const t = row[eventTimeOrdinal];
        if (typeof t === 'number' && (maxEventTimeMicros === null || t > maxEventTimeMicros)) maxEventTimeMicros = t;
      }
    }
    const maxEventTimeMs = this.options.carries === 'watermark'
      ? batch.watermarkMs ?? null
      : maxEventTimeMicros === null ? null : Math.floor(maxEventTimeMicros / 1000);
    const out: RepartitionRecordOut[] = [];
    for (const target of targets) {
      const span = hexRange({ start: target.startingHashKey, end: target.endingHashKey });
      for (const piece of this.split(byTarget.get(target.shardId)!, target)) {
        const hr = hexRange(piece.range);
        out.push(this.record(target, {
          v: REPARTITION_RECORD_VERSION, kind: 'rows', src: batch.partitionId, batch: batch.batchId,
          part: piece.part, parts: piece.parts, maxEventTimeMs, rows: piece.rows, ...(partial ? { partial: true } : {}),
          hr, ...(hr[0] === span[0] && hr[1] === span[1] ? {} : { sr: span }),
        }));
      }
    }
    await this.send(out);
  }

  screenRow(row: readonly unknown[]): void {
    this.options.partial?.aggregator.toPartialRows([row]);
  }

  /** Tells every state partition that source shard `src` is idle (confirmed caught up and quiet). */
  async broadcastIdle(src: string, lastBatchId: number): Promise<void> {
    const targets = await this.options.channel.shards();
    await this.send(targets.map((target) => this.record(target, {
      v: REPARTITION_RECORD_VERSION, kind: 'idle', src, batch: lastBatchId, part: 0, parts: 1, maxEventTimeMs: null, rows: [],
      hr: hexRange({ start: target.startingHashKey, end: target.endingHashKey }),
    })));
  }

  private record(target: RepartitionTarget, record: RepartitionRecord): RepartitionRecordOut {
    return {
      data: encodeRepartitionRecord({
        ...record, to: target.shardId, ...(this.options.input === undefined ? {} : { in: this.options.input }),
        ...(this.options.namespace === undefined ? {} : { ns: this.options.namespace }),
      }),
      partitionKey: `${record.src}#${record.batch}`,
      explicitHashKey: target.startingHashKey.toString(),
      shardId: target.shardId,
    };
  }

  private async send(records: readonly RepartitionRecordOut[]): Promise<void> {
    this.options.meter?.add('repartitionRecords', records.length);
    this.options.meter?.add('repartitionBytes', records.reduce((n, r) => n + r.data.length, 0));
    const landed = await this.options.channel.put(records);
    const misrouted = landed ? records.filter((r, i) => landed[i] !== undefined && landed[i] !== r.shardId).length : 0;
    if (misrouted > 0) {
      this.options.channel.refresh?.();
      throw new RepartitionResharded(misrouted);
    }
  }

  /**
   * Cuts a target's rows into records that encode below the size limit (at least one), each
   * holding every row of one hash range, so that stage 2 can tell per hash what it applied even
   * when the batch is sent again cut differently after a reshard. The rows of a single hash that
   * outgrow a record share that hash's range as numbered parts (a hash never moves between shards).
   */
  private split(routed: readonly Routed[], target: RepartitionTarget): Piece[] {
    const limit = this.rowBytesLimit;
    const whole: HashRange = { start: target.startingHashKey, end: target.endingHashKey };
    const sizes = routed.map((r) => encodedRowBytes(r.row));
    if (sizes.reduce((a, b) => a + b, 0) <= limit) return [{ range: whole, part: 0, parts: 1, rows: routed.map((r) => r.row) }];
    // Sorted by hash, stably: rows of one key keep their order.
    const order = routed.map((_, i) => i).sort((a, b) => (routed[a]!.hash < routed[b]!.hash ? -1 : routed[a]!.hash > routed[b]!.hash ? 1 : a - b));
    const groups: { hash: bigint; rows: (readonly unknown[])[]; bytes: number }[] = [];
    for (const i of order) {
      const last = groups[groups.length - 1];
      if (last && last.hash === routed[i]!.hash) {
        last.rows.push(routed[i]!.row);
        last.bytes += sizes[i]!;
      } else groups.push({ hash: routed[i]!.hash, rows: [routed[i]!.row], bytes: sizes[i]! });
    }
    const pieces: Piece[] = [];
    let open: { start: bigint; rows: (readonly unknown[])[]; bytes: number } = { start: whole.start, rows: [], bytes: 0 };
    const close = (end: bigint): void => {
      if (end >= open.start) pieces.push({ range: { start: open.start, end }, part: 0, parts: 1, rows: open.rows });
    };
    for (const group of groups) {
      if (group.bytes > limit) {
        close(group.hash - 1n);
        const shares = this.shares(group.rows, limit);
        shares.forEach((rows, part) => pieces.push({ range: { start: group.hash, end: group.hash }, part, parts: shares.length, rows }));
        open = { start: group.hash + 1n, rows: [], bytes: 0 };
        continue;
      }
      if (open.bytes + group.bytes > limit && open.rows.length > 0) {
        close(group.hash - 1n);
        open = { start: group.hash, rows: [], bytes: 0 };
      }
      open.rows.push(...group.rows);
      open.bytes += group.bytes;
    }
    close(whole.end);
    return pieces;
  }

  /** One hash's rows in shares below the limit, in order. */
  private shares(rows: readonly (readonly unknown[])[], limit: number): (readonly unknown[])[][] {
    const shares: (readonly unknown[])[][] = [[]];
    let size = 0;
    for (const row of rows) {
      const rowBytes = encodedRowBytes(row);
      if (size + rowBytes > limit && shares[shares.length - 1]!.length > 0) {
        shares.push([]);
        size = 0;
      }
      shares[shares.length - 1]!.push(row);
      size += rowBytes;
    }
    return shares;
  }
}

interface Routed {
  readonly row: readonly unknown[];
  readonly hash: bigint;
}

interface Piece {
  readonly range: HashRange;
  readonly part: number;
  readonly parts: number;
  readonly rows: readonly (readonly unknown[])[];
}
