/**
 * What one shard invocation runs against: the backends of its state partition. They are
 * interfaces; the AWS adapters implement them (lib/aws/aws-backends.ts), and so can memory.
 */
import type { Checkpoint, CommitSideWrite } from '../checkpoint/checkpoint.js';
import type { CostMeter } from '../core/cost-meter.js';
import type { Clock } from '../runtime/clock.js';
import type { WatermarkCoordinator } from '../runtime/watermark-coordinator.js';
import type { Sink } from '../sinks/sink.js';
import type { SinkRowLimits } from '../sinks/row-limits.js';
import type { DeadLetterWriter } from '../sources/dead-letter.js';
import type { ExpiredRecords, ShardRecord } from '../sources/kinesis-shard-source.js';
import type { SourceShard } from '../sources/repartition-records.js';
import type { LostSourceBatches } from '../sources/repartition-shard-source.js';
import type { HashKeyRange } from '../state/state-routing.js';

/** Reads a shard's records between two sequence numbers (inclusive): GetRecords on AWS. */
export interface ShardReader {
  read(shardId: string, firstSequenceNumber: string, lastSequenceNumber: string): Promise<ShardRecord[]>;
}

/**
 * Where a re-drive run's records are kept while its batch is planned on a shard's own partition
 * (the ledger in the checkpoint table on AWS: lib/aws/redrive-batch.ts), so that whoever finds the
 * batch planned and not committed runs it with exactly those records.
 */
export interface RedriveLedger {
  /** The run's records, in order (sequence numbers 1..n: their places in the run). */
  records(run: string): Promise<ShardRecord[]>;
  /** The write that marks the run done, made in the same transaction as its batch's commit. */
  doneWrite(run: string, batchId: number): CommitSideWrite;
  /** The shard's runs not done whose records are stored (a re-drive may have died before planning their batch). */
  storedRuns?(shardId: string): Promise<string[]>;
}

/**
 * Records of a planned, uncommitted batch that left the stream before the batch committed: the
 * batch runs over the rest, and these are recorded as lost where `sluice status` shows them.
 */
export interface ExpiredPlannedRecords extends ExpiredRecords {
  readonly shardId: string;
  readonly batchId: number;
  /** Stage 2: the senders' batches whose rows for this shard the lost internal records carried. */
  readonly lostSources?: readonly LostSourceBatches[];
}

/**
 * One planned batch of a shard, as a kept copy of its records is keyed: the batch id and its
 * planned first and last sequence numbers (of the shard's first view with records in the batch),
 * so a copy kept for one plan is never taken for another's.
 */
export interface KeptBatch {
  readonly shardId: string;
  readonly batchId: number;
  readonly firstSequenceNumber: string;
  readonly lastSequenceNumber: string;
}

/**
 * A copy of a planned batch's records, kept while the stream may trim them before the batch
 * commits (lib/query/kept-records.ts says when), so a later run that finds them trimmed runs with
 * exactly the planned records instead of losing some. Keeping and recording a loss for the same
 * batch exclude each other (one item, conditional writes): a batch has a kept copy or a recorded
 * loss, never both. The copy is raw input: removed after the commit, with a TTL as backstop.
 */
export interface KeptRecords {
  /**
   * Keeps `records` (the batch's, in shard order) unless a copy is kept already: 'kept' (now or
   * before), or 'refused' when a loss is recorded for the batch (its committing run will lack them).
   */
  keep(batch: KeptBatch, records: readonly ShardRecord[]): Promise<'kept' | 'refused'>;
  /** The kept records of the batch, or null when none are kept (for this plan). */
  read(batch: KeptBatch): Promise<ShardRecord[] | null>;
  /** Removes the copy of a committed batch (best effort: the TTL removes what this leaves). */
  remove(batch: KeptBatch): Promise<void>;
}

/**
 * When a first attempt keeps its batch's records before writing the sink: when any of them is
 * within the attempt's time (deadline) plus `marginMs` of leaving the stream (its arrival plus
 * `retentionMs`). An attempt not at risk ends before any of its records can expire, so it can
 * never write after a run that lost them.
 */
export interface KeepPolicy {
  /** The stream's retention (the shortest of the streams the stage reads); unknown: 24 h, Kinesis's minimum. */
  readonly retentionMs: number;
  /** Clock skew and requests in flight past the deadline (default 5 minutes). */
  readonly marginMs?: number;
  /** The function's timeout, when the invocation has no deadline of its own (default 15 minutes, Lambda's maximum). */
  readonly timeoutMs?: number;
}

export interface PartitionBackends {
  readonly checkpoint: Checkpoint;
  readonly sink: Sink;
  /** The row limits of the sink under any decorators (default: `sink.rowLimits`). */
  readonly sinkRowLimits?: SinkRowLimits;
  readonly deadLetters: DeadLetterWriter;
  readonly watermarks?: WatermarkCoordinator;
  readonly shardReader?: ShardReader;
  readonly redriveLedger?: RedriveLedger;
  /**
   * Records a planned batch's records lost to retention and returns what is recorded: the record
   * only grows (a retry that lost as many or fewer finds the larger record and leaves out as many),
   * and fails once the batch committed. Without it such a batch fails: a loss nobody can see is not taken.
   */
  readonly recordExpiredRecords?: (loss: ExpiredPlannedRecords) => Promise<ExpiredRecords>;
  /**
   * The write, in the batch's commit, that holds only while the recorded loss is exactly `loss` and
   * freezes it (a later attempt cannot grow it): the committing run's loss is the one recorded.
   */
  readonly expiredRecordsCommitWrite?: (loss: ExpiredPlannedRecords) => CommitSideWrite;
  /** Where a batch at risk of losing records to retention keeps them (none: such a batch may lose them). */
  readonly keptRecords?: KeptRecords;
  readonly keepPolicy?: KeepPolicy;
  readonly costMeter?: CostMeter;
  readonly clock?: Clock;
  /**
   * Stage 2: the shards of the stream(s) feeding this stage (by source name when a hop has several
   * inputs), with the parents a reshard replaced, so one not heard from yet holds the watermark
   * back, or carries its parents'.
   */
  readonly sourcePartitions?: (sourceName?: string) => Promise<readonly (string | SourceShard)[]>;
  /** The hash-key range of the shard this partition is (Kinesis's HashKeyRange): the grouping keys it owns. */
  readonly stateKeyRange?: () => Promise<HashKeyRange>;
  /**
   * The namespace whose internal-stream records this partition applies, when it is not the
   * query's own (a replay shadow sharing the internal streams with the live run).
   */
  readonly channelNamespace?: string;
}
