/**
 * Watermarks across state partitions. Each partition (a Kinesis shard) tracks its own watermark
 * from its own rows, as Spark does for a whole query; a batch runs with the minimum over the live
 * partitions, so no partition closes a window while another may still send rows at that time. A
 * partition counts as idle (left out of the minimum) only once it is confirmed caught up and
 * quiet for a while; a partition with rows in the batch being planned is live. When every
 * partition is idle, the watermark is the maximum, Spark's own rule for one query (max event
 * time minus the delay). With one partition this is exactly Spark's watermark.
 */
import type { CommitSideWrite } from '../checkpoint/checkpoint.js';
export interface WatermarkCoordinator {
  /**
   * The watermark the next batch of `partitionId` runs with, given that partition's own and
   * whether that batch has new rows (which makes the partition live whatever its idle flag says).
   */
  combine(partitionId: string, localWatermarkMs: number, hasNewData?: boolean): Promise<number>;
  /** Records `partitionId`'s own watermark after it committed `batchId`. */
  publish(partitionId: string, localWatermarkMs: number, batchId: number, hadData: boolean): Promise<void>;
  /**
   * `publish` as a write the commit log makes in the batch's commit (one request fewer), when this
   * coordinator and the commit log share a store; undefined when it cannot be folded.
   */
  publishWithCommit?(partitionId: string, localWatermarkMs: number, batchId: number, hadData: boolean): CommitSideWrite | undefined;
  /**
   * Starts reading the other partitions' watermarks now, beside the checkpoint's recovery reads;
   * `combine` in this invocation uses what it read (with this partition's own publications applied)
   * instead of reading again: a reading made a moment earlier, which any read is by the time the
   * batch is planned (the other partitions' watermarks only move forward).
   */
  prefetch?(partitionId: string): void;
}

/** One partition alone: its own watermark is the query's. */
export const singlePartitionWatermarks: WatermarkCoordinator = {
  combine: async (_partitionId, localWatermarkMs) => localWatermarkMs,
  publish: async () => {},
};

export interface PartitionWatermark {
  readonly partitionId: string;
  readonly watermarkMs: number;
  /** Excluded from the minimum: confirmed caught up, or closed by a reshard. */
  readonly idle: boolean;
}

/**
 * The min-over-live-partitions rule, shared by every coordinator implementation. `self` is the
 * planning partition (its idle flag already false when its batch has rows); `partitions` may
 * include it, in which case `self` wins.
 */
export function combineWatermarks(partitions: readonly PartitionWatermark[], self: PartitionWatermark): number {
  const all = [self, ...partitions.filter((p) => p.partitionId !== self.partitionId)];
  const live = all.filter((p) => !p.idle);
  if (live.length === 0) return Math.max(...all.map((p) => p.watermarkMs));
  return Math.min(...live.map((p) => p.watermarkMs));
}
