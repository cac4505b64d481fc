/**
 * State partitions are shards. When a stream is resharded, a child shard's keys had their state in
 * the parent's partition; starting the child with empty state would give a silently wrong answer.
 * Until state can be split and merged across partitions, a stateful partition whose shard has a
 * parent with committed state is refused, loudly, before it runs a batch.
 */
import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { Checkpoint } from '../checkpoint/checkpoint.js';
import { CheckpointError } from '../errors/sluice-error.js';
import { listStreamShards } from './kinesis-shard-reader.js';

export class ReshardGuard {
  private readonly checked = new Set<string>();

  constructor(
    private readonly kinesis: KinesisClient,
    private readonly streamName: string,
    private readonly checkpointOf: (shardId: string) => Checkpoint,
  ) {}

  async check(shardId: string): Promise<void> {
    if (this.checked.has(shardId)) return;
    // A partition that has committed before was checked when it started.
    if (await this.checkpointOf(shardId).commitLog.getLatest()) {
      this.checked.add(shardId);
      return;
    }
    const shard = (await listStreamShards(this.kinesis, this.streamName)).find((s) => s.ShardId === shardId);
    const parents = [shard?.ParentShardId, shard?.AdjacentParentShardId].filter((p): p is string => p !== undefined);
    for (const parent of parents) {
      if (await this.checkpointOf(parent).commitLog.getLatest()) {
        throw new CheckpointError(
          `Shard ${shardId} of ${this.streamName} was created by a reshard of ${parents.join(' and ')}, whose state partition holds `
          + 'state for its keys; running it with empty state would give wrong results.',
          {
            code: 'RESHARD_WITH_STATE',
            retryable: false,
            hint: 'resharding a stream under a stateful query is not supported yet: restore the previous shard count, '
              + 'or start the query under a new name (a fresh checkpoint) on the resharded stream.',
            context: { shardId, parents },
          },
        );
      }
    }
    this.checked.add(shardId);
  }
}
