/**
 * Watermarks across state partitions. Each partition (a Kinesis shard) tracks its own watermark
 * from its own rows, as Spark does for a whole query; a batch runs with the minimum over the live
 * partitions, so no partition closes a window another may still add rows to. A partition counts
 * as idle (left out of the minimum) only once it is confirmed caught up and quiet for a while.
 * With one partition this is exactly Spark's watermark.
 */
export interface WatermarkCoordinator {
  /** The watermark the next batch of `partitionId` runs with, given that partition's own. */
  combine(partitionId: string, localWatermarkMs: number): Promise<number>;
  /** Records `partitionId`'s own watermark after it committed `batchId`. */
  publish(partitionId: string, localWatermarkMs: number, batchId: number, hadData: boolean): Promise<void>;
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

/** The min-over-live-partitions rule, shared by every coordinator implementation. */
export function combineWatermarks(partitions: readonly PartitionWatermark[], self: PartitionWatermark): number {
  let min = self.watermarkMs;
  for (const p of partitions) {
    if (p.partitionId === self.partitionId || p.idle) continue;
    if (p.watermarkMs < min) min = p.watermarkMs;
  }
  return min;
}
