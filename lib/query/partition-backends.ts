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
