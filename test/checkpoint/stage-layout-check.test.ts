/**
 * A one-shard stream's query ran a windowed count in one stage; redeployed for two shards it runs
 * with a repartition stage, and the split children of the old shard (no metadata of their own)
 * must not start the stateless stage 1 as if nothing had been kept: stage 2 would count from zero.
 */
import { describe, expect, it } from 'vitest';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { refuseStateLeftInParents } from '../../lib/checkpoint/stage-layout-check.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { col, count, window } from '../../lib/plan/functions.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import type { DataFrame } from '../../lib/api/data-frame.js';

const definition = (transform: (df: DataFrame) => DataFrame, outputMode: 'append' | 'update' = 'update'): StreamingQueryDefinition => defineQuery({
  name: 'orders-per-hour',
  source: { schema: 'store_id string, ts timestamp' },
  transform,
  outputMode,
  sink: { kind: 'dynamodb' },
});
const perHour = definition((df) => df.withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '1 hour')).agg(count('*').as('orders')));
const northOnly = definition((df) => df.filter(col('store_id').eq('north')), 'append');

const records: ShardRecord[] = [1, 2, 3].map((i) => ({
  sequenceNumber: String(BigInt(i) * 1_000_000_000_000n),
  partitionKey: `k${i}`,
  dataBase64: Buffer.from(JSON.stringify({ store_id: 'north', ts: `2024-05-01T10:0${i}:00Z` })).toString('base64'),
  approximateArrivalTimestampMs: 0,
}));

/** The old shard's partition after one invocation of `def` compiled for `shards` shards. */
async function parentThatRan(def: StreamingQueryDefinition, shards: number): Promise<MemoryCheckpoint> {
  const checkpoint = new MemoryCheckpoint();
  const query = compileQuery(def, { expectedShardCount: shards, allowRepartition: false });
  const result = await runShardInvocation(query, { shardId: 'shardId-000000000000', records },
    { checkpoint, sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() });
  expect(result.error).toBeUndefined();
  return checkpoint;
}

describe('a stateless stage-1 child of a shard that ran the query in one stage', () => {
  it('is refused: the new plan for two shards has a stateless stage 1, and the parent holds the count', async () => {
    const twoShards = compileQuery(perHour, { expectedShardCount: 2, allowRepartition: true });
    expect(twoShards.stateStage).not.toBeNull();
    expect(twoShards.sourceStage.isStateful).toBe(false);

    const parent = await parentThatRan(perHour, 1);
    const attempt = refuseStateLeftInParents('shardId-000000000001', [{ partitionId: 'shardId-000000000000', checkpoint: parent }]);
    await expect(attempt).rejects.toMatchObject({ code: 'RESHARD_STAGE_CHANGED', retryable: false });
    await expect(attempt).rejects.toThrow(/parent shardId-000000000000 ran it with stateful operator\(s\) 0 \(.*\).*new query name/s);
  });

  it('runs when its parent ran a stateless stage too (a plain split of a stateless stage 1), or never ran', async () => {
    const stateless = await parentThatRan(northOnly, 2);
    expect((await stateless.readQueryMetadata())?.fingerprint.statefulOperators).toEqual([]);
    await expect(refuseStateLeftInParents('c', [
      { partitionId: 'a', checkpoint: stateless }, { partitionId: 'b', checkpoint: new MemoryCheckpoint() },
    ])).resolves.toBeUndefined();
  });
});
