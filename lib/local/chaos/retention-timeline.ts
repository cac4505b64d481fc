/**
 * The retention timeline the chaos harness simulates ('planned-then-expired'), compressed so a
 * run of a few minutes can meet both cases the engine tells apart:
 *
 * - a record is AT RISK when an attempt reading it may still be alive when it leaves the stream:
 *   its arrival plus the retention falls before the attempt's deadline plus a margin (the engine's
 *   own rule, KeepPolicy). Such an attempt keeps the records before its first sink write, and a
 *   zombie of it may wake after the trim;
 * - a record NOT at risk leaves the stream only long after every attempt that read it ended (in
 *   production retention is >= 24 h, an invocation <= 15 min): trimming it means time jumped
 *   ahead, so a frozen attempt that read it was timed out by Lambda (it never wakes), and Lambda's
 *   prompt retry after the crash ran the engine on the planned batch (a re-run keeps its records)
 *   before the trim.
 *
 * The stream keeps records RETENTION_MS (compressed from 24 h; told to the engine as
 * `streamRetentionHours`); the function's deadline is the local event source mapping's (15 min,
 * Lambda's maximum; the scheduled function's default is the same), with the engine's default margin. A
 * run lasts minutes, so a record put in it is never at risk by itself: the oldest part of each
 * shard's first wave is a BACKLOG that arrived BACKLOG_AGE_MS before it was put (what every
 * function reading the stream sees as its arrival), at risk from the start. A fault on a batch
 * holding backlog records is the at-risk case, on one holding none the other.
 */
import type { KinesisStreamEvent } from 'aws-lambda';
import { shardIdOf } from '../../aws/kinesis-trigger-handler.js';

/** The stream's retention the harness simulates (and tells the engine). */
export const RETENTION_MS = 30 * 60_000;
/** The invocation deadline the local event source mapping gives (Lambda's maximum timeout). */
export const FUNCTION_TIMEOUT_MS = 15 * 60_000;
/** The engine's default margin past the deadline (clock skew, requests in flight). */
export const KEEP_MARGIN_MS = 5 * 60_000;
/** How long before its put a backlog record arrived: at risk (>= 10 min), far from leaving (< 30 min) during a run. */
export const BACKLOG_AGE_MS = 20 * 60_000;

/** What the harness tells the engine (RuntimeConfig.streamRetentionHours; the deadline is the invocation's, the margin the default). */
export const STREAM_RETENTION_HOURS = RETENTION_MS / 3_600_000;

/** The engine's rule: a record read at `nowMs` by an attempt with `deadlineMs` may leave the stream before the attempt ends. */
export function atRisk(arrivalMs: number, nowMs: number, deadlineMs = nowMs + FUNCTION_TIMEOUT_MS): boolean {
  return arrivalMs + RETENTION_MS <= deadlineMs + KEEP_MARGIN_MS;
}

/** The records of a run's streams that are backlog (arrived BACKLOG_AGE_MS before their put), by stream, shard and sequence number. */
export class Backlog {
  private readonly records = new Set<string>();

  /**
   * Marks the oldest `share` of each shard's records of `streamName` (in put order) as backlog.
   * Kinesis trims a shard oldest-first, so a shard's backlog is its prefix: a trim ending at a
   * backlog record trims backlog only.
   */
  mark(streamName: string, placed: readonly { readonly shardId: string; readonly sequenceNumber: string }[], share = 0.5): this {
    const byShard = new Map<string, { shardId: string; sequenceNumber: string }[]>();
    for (const r of placed) byShard.set(r.shardId, [...(byShard.get(r.shardId) ?? []), r]);
    for (const [shardId, list] of byShard) {
      const sorted = [...list].sort((a, b) => (BigInt(a.sequenceNumber) < BigInt(b.sequenceNumber) ? -1 : 1));
      for (const r of sorted.slice(0, Math.ceil(sorted.length * share))) this.add(streamName, shardId, r.sequenceNumber);
    }
    return this;
  }

  add(streamName: string, shardId: string, sequenceNumber: string): void {
    this.records.add(`${streamName}#${shardId}#${sequenceNumber}`);
  }

  readonly has = (streamName: string, shardId: string, sequenceNumber: string): boolean => this.records.has(`${streamName}#${shardId}#${sequenceNumber}`);

  /** A record's arrival as every reader of the stream sees it: a backlog record's is BACKLOG_AGE_MS earlier. */
  arrivalMs(streamName: string, shardId: string, sequenceNumber: string, putArrivalMs: number): number {
    return this.has(streamName, shardId, sequenceNumber) ? putArrivalMs - BACKLOG_AGE_MS : putArrivalMs;
  }

  /** `event` with the arrival every reader sees (a copy; the event source mapping keeps its own). */
  agedEvent(streamName: string, event: KinesisStreamEvent): KinesisStreamEvent {
    return {
      Records: event.Records.map((r) => {
        const ms = this.arrivalMs(streamName, shardIdOf(r), r.kinesis.sequenceNumber, r.kinesis.approximateArrivalTimestamp * 1000);
        return { ...r, kinesis: { ...r.kinesis, approximateArrivalTimestamp: ms / 1000 } };
      }),
    };
  }
}
