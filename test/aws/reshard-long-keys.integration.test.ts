/**
 * State keyed by a long beyond 2^53 follows its rows on a split (on the emulators: kinesis-mock's
 * SplitShard, DynamoDB Local, s3rver). A deduplication keyed by the stream's partition key, a long
 * column: each id comes once before the split and again after it. The ids are picked so that the
 * MD5 of their exact digits and of the nearest double's digits fall in different children: a child
 * seeded by the rounded key has not seen its ids and emits their second copies, which the in-memory
 * run never does. (The state key decoder read such a long as a double until this test.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readS3Files } from '../../lib/aws/sink-readers.js';
import { canonicalJson } from '../../lib/local/chaos/compare.js';
import { runInMemory } from '../../lib/local/chaos/memory-reference.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { reshardStream } from '../../lib/local/kinesis-admin.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { kinesisHashKey } from '../../lib/state/state-routing.js';
import { deploy } from '../support/aws-pipeline.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const query = defineQuery({
  name: 'reshard-long-keys',
  source: { schema: 'user_id long, ts timestamp', partitionKey: 'user_id' },
  transform: (df) => df.withWatermark('ts', '1 hour').dropDuplicatesWithinWatermark(['user_id']),
  outputMode: 'append',
  sink: { kind: 's3-files' },
});

/** Where a split of the stream's only shard at its midpoint puts a hash: the lower child or the upper. */
const LOWER_END = ((1n << 128n) - 1n) / 2n;
const lowerChild = (partitionKey: string): boolean => kinesisHashKey(partitionKey) <= LOWER_END;

/** Odd longs above 2^53 (each rounds to a double of other digits) whose two hashes land in different children. */
function idsThatRoundIntoTheOtherChild(n: number): bigint[] {
  const out: bigint[] = [];
  for (let id = 2n ** 53n + 1n; out.length < n; id += 2n) {
    if (lowerChild(String(id)) !== lowerChild(String(Number(id)))) out.push(id);
  }
  return out;
}

describe('a split under state keyed by longs beyond 2^53', () => {
  it('deduplication by a long partition key: the second copies after the split are dropped, as in memory', async () => {
    const ids = idsThatRoundIntoTheOtherChild(6);
    // The JSON carries each long exactly (JSON.stringify cannot write a bigint).
    const record = (id: bigint, minute: number) => ({
      data: `{"user_id":${id},"ts":"${new Date(Date.UTC(2024, 4, 1, 14, minute)).toISOString()}"}`, partitionKey: String(id),
    });
    const before = ids.map((id, i) => record(id, i));
    const after = ids.map((id, i) => record(id, 10 + i));
    const expected = (await runInMemory(query, [...before, ...after].map((r, i) => ({ shardId: 'memory', sequenceNumber: String(i), ...r })), { batchSize: 4 }))
      .rows.map((r) => canonicalJson(r)).sort();
    expect(expected).toHaveLength(ids.length);

    const d = await deploy(emulators, query, 1);
    await d.put(before);
    await d.drain({ batchSize: 4 });
    await reshardStream(d.clients.kinesis, d.config.streamName, [{ split: 'first-open' }]);
    await d.put(after);
    await d.drain({ batchSize: 4 });
    await d.tick(Date.now() + 3_600_000);
    const rows = (await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)).map((r) => canonicalJson(r)).sort();
    expect(rows).toEqual(expected);
    // Both children ran batches of the second copies.
    const children = new Set(d.results.filter((r) => r.shardId !== 'shardId-000000000000' && r.result.progress.some((p) => p.numInputRows > 0)).map((r) => r.shardId));
    expect(children.size).toBe(2);
  }, Number(process.env.RESHARD_TEST_TIMEOUT_MS ?? 240_000));
});
