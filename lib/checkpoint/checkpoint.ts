import type { Offset } from '../sources/source.js';
import type { StateStoreProvider } from '../state/state-store.js';
import type { BatchBlameLog } from './batch-blame-log.js';

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

/**
 * A write that belongs to a batch's commit (the partition's watermark row; a progress record):
 * made atomically with the commit entry by a commit log that can (`addWithSideWrites`), so the
 * commit costs one request. Opaque to the engine: the adapter that made it knows its shape.
 */
export interface CommitSideWrite {
  /** For error messages: what the write is. */
  readonly description: string;
}

/** The commit log; one that can fold side writes into its commit says so with `addWithSideWrites`. */
export interface CommitLog extends MetadataLog<CommitEntry> {
  /**
   * As `add`, with `sideWrites` in the same atomic write. Returns false, writing nothing, when
   * the commit entry exists. A side write whose own condition fails (a stale update) is dropped,
   * as its separate write would have been refused, without failing the commit.
   */
  addWithSideWrites?(batchId: number, entry: CommitEntry, sideWrites: readonly CommitSideWrite[]): Promise<boolean>;
}

/** What a query persists between batches and across restarts. */
export interface Checkpoint {
  readonly offsetLog: MetadataLog<OffsetSeq>;
  readonly commitLog: CommitLog;
  readonly stateStore: StateStoreProvider;
  /** The query's identity and plan fingerprint, written at first start. */
  readQueryMetadata(): Promise<QueryMetadata | undefined>;
  writeQueryMetadata(metadata: QueryMetadata): Promise<void>;
  /**
   * Replaces the metadata while it is still `expected` (false, writing nothing, otherwise): a
   * reshard child whose seed an older version refused after writing its parent's metadata
   * (lib/aws/reshard-guard.ts) is given its own stage's.
   */
  replaceQueryMetadata?(expected: QueryMetadata, metadata: QueryMetadata): Promise<boolean>;
  /**
   * Hands over batch N's progress record just before `commitLog.add(N)`: a checkpoint that keeps
   * recent progress (DynamoDB: a ring of items with a TTL) writes it with the commit, in the same
   * request, so `sluice status` needs no logs and the batch pays no extra round trip.
   */
  stageProgress?(batchId: number, progress: object): void;
  /**
   * Where the search for a planned batch's failing records resumes after an invocation ran out of
   * time (lib/query/data-error-search.ts). Without it, each retry searches from the start.
   */
  readonly blameLog?: BatchBlameLog;
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
