/**
 * What `sluice dev --ui` shows, as a list of events: each committed batch's progress record (with
 * its shard and stage, and the rows it wrote), the dead letters with their reasons, and the run's
 * status. The page replays the list on connect and then follows it live (server-sent events).
 */
import type { StreamingQueryProgress } from '../../../runtime/progress.js';
import type { DeadLetterRecord } from '../../../sources/dead-letter.js';
import { progressLags } from '../../../runtime/progress-figures.js';
import { formatWatermark } from '../report.js';

export interface BoardBatchOutput {
  readonly columns: readonly string[];
  /** Cells as the console sink prints them. */
  readonly rows: readonly (readonly string[])[];
}

export type BoardEvent =
  | { readonly type: 'query'; readonly name: string; readonly outputMode: string; readonly sink: string; readonly shards: number }
  | BoardBatch
  | { readonly type: 'deadLetters'; readonly deadLetters: readonly BoardDeadLetter[] }
  | { readonly type: 'status'; readonly text: string; readonly done: boolean };

export interface BoardBatch {
  readonly type: 'batch';
  /** The shard as `sluice dev` labels it (with its stage when there are two). */
  readonly shard: string;
  readonly stage: string;
  /** Stage 1 of a repartition stage: its output rows are routed, not written to the sink. */
  readonly routed: boolean;
  /** Its input rows came from the source stream (not the internal one). */
  readonly fromSource: boolean;
  readonly startMs: number;
  /** The watermark as the terminal report prints it. */
  readonly watermark: string;
  readonly watermarkLagMs: number | null;
  readonly eventTimeLagMs: number | null;
  readonly progress: StreamingQueryProgress;
  readonly output?: BoardBatchOutput;
}

export function boardBatch(
  shard: string, stage: { kind: string; reads: string; writes: string }, progress: StreamingQueryProgress, output?: BoardBatchOutput,
): BoardBatch {
  const lags = progressLags(progress);
  return {
    type: 'batch', shard, stage: stage.kind, routed: stage.writes === 'internal-stream', fromSource: stage.reads !== 'internal-stream',
    startMs: Date.parse(progress.timestamp), watermark: formatWatermark(progress.batchWatermarkMs),
    watermarkLagMs: lags.watermarkLagMs ?? null, eventTimeLagMs: lags.eventTimeLagMs ?? null, progress, ...(output ? { output } : {}),
  };
}

export interface BoardDeadLetter {
  readonly shardId: string;
  readonly sequenceNumber: string;
  readonly partitionKey: string;
  readonly reason: string;
  /** The record's data as text, cut to 200 characters. */
  readonly data: string;
}

/** Batches kept for the page: a long run keeps its most recent ones. */
const MAX_BATCHES = 20_000;

export class ProgressBoard {
  private readonly events: BoardEvent[] = [];
  private readonly listeners = new Set<(event: BoardEvent) => void>();
  private batches = 0;

  publish(event: BoardEvent): void {
    if (event.type === 'batch' && ++this.batches > MAX_BATCHES) {
      this.events.splice(this.events.findIndex((e) => e.type === 'batch'), 1);
    }
    if (event.type === 'deadLetters') {
      // The list is re-read whole each time: the newest replaces the older.
      const old = this.events.findIndex((e) => e.type === 'deadLetters');
      if (old !== -1) this.events.splice(old, 1);
    }
    this.events.push(event);
    for (const listener of this.listeners) listener(event);
  }

  publishDeadLetters(records: readonly DeadLetterRecord[]): void {
    this.publish({
      type: 'deadLetters',
      deadLetters: records.map((d) => ({
        shardId: d.shardId, sequenceNumber: d.sequenceNumber, partitionKey: d.partitionKey, reason: d.reason,
        data: Buffer.from(d.dataBase64, 'base64').toString('utf8').slice(0, 200),
      })),
    });
  }

  /** The events so far, then every new one, until the returned function is called. */
  follow(listener: (event: BoardEvent) => void): () => void {
    for (const event of this.events) listener(event);
    this.listeners.add(listener);
    return () => { this.listeners.delete(listener); };
  }

  snapshot(): readonly BoardEvent[] {
    return [...this.events];
  }
}
