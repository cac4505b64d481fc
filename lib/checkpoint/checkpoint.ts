import type { Offset } from '../sources/source.js';
import type { StateStoreProvider } from '../state/state-store.js';

/** Every persisted record carries a format version, so a later Sluice can read old checkpoints. */
export const CHECKPOINT_FORMAT_VERSION = 1;

/** The offset log entry of a planned batch: what it reads and the watermark/time it runs with. */
export interface OffsetSeq {
  readonly formatVersion: number;
  readonly batchId: number;
  /** End offset per source name (null = the source had no data yet). */
  readonly offsets: Readonly<Record<string, Offset | null>>;
  readonly batchWatermarkMs: number;
  readonly batchTimestampMs: number;
  /** Confs that must not change across restarts (e.g. the multiple-watermark policy). */
  readonly conf: Readonly<Record<string, string>>;
}

export interface CommitEntry {
  readonly formatVersion: number;
  readonly batchId: number;
  /** The watermark after this batch: the next batch runs with it. */
  readonly nextBatchWatermarkMs: number;
  /**
   * The earliest processing-time timer of the stateful operators after this batch (null: none), so
   * that a recovered query (a scheduled invocation) knows whether a no-data batch is due without
   * reading state. Absent in entries written before timers existed, or by reshard seeding: unknown.
   */
  readonly nextTimerMs?: number | null;
}

/**
 * Spark's HDFSMetadataLog contract: `add` refuses an existing batch id (the single-writer guard;
 * a conditional put on DynamoDB) and returns false instead of overwriting.
 */
export interface MetadataLog<T> {
  add(batchId: number, entry: T): Promise<boolean>;
  get(batchId: number): Promise<T | undefined>;
  getLatest(): Promise<[number, T] | undefined>;
  /** Removes entries with id < `beforeBatchId`. */
  purge(beforeBatchId: number): Promise<void>;
}

/** What a query persists between batches and across restarts. */
export interface Checkpoint {
  readonly offsetLog: MetadataLog<OffsetSeq>;
  readonly commitLog: MetadataLog<CommitEntry>;
  readonly stateStore: StateStoreProvider;
  /** The query's identity and plan fingerprint, written at first start. */
  readQueryMetadata(): Promise<QueryMetadata | undefined>;
  writeQueryMetadata(metadata: QueryMetadata): Promise<void>;
}

export interface QueryMetadata {
  readonly formatVersion: number;
  readonly queryId: string;
  readonly fingerprint: QueryFingerprint;
}

/** What must not change incompatibly between runs on one checkpoint. */
export interface QueryFingerprint {
  readonly outputMode: string;
  readonly sink: string;
  readonly sources: readonly string[];
  /** One entry per stateful operator, in operator id order. */
  readonly statefulOperators: readonly { readonly operatorId: number; readonly kind: string; readonly stateSchema: string }[];
}
