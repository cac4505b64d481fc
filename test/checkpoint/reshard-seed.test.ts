/**
 * Seeding a child shard's partition from its parents (lib/checkpoint/reshard-seed.ts) with the
 * routing of lib/state/state-routing.ts, on memory checkpoints: a split keeps exactly the entries
 * whose key hashes into the child's range, a merge takes the union, watermarks carry over, and a
 * state that cannot be divided by key is refused clearly.
 */
import { describe, expect, it } from 'vitest';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { seedFromParents, type SeedParent } from '../../lib/checkpoint/reshard-seed.js';
import { CHECKPOINT_FORMAT_VERSION, type Checkpoint } from '../../lib/checkpoint/checkpoint.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { encodeKey } from '../../lib/execution/values.js';
import { inHashKeyRange, kinesisHashKey, repartitionStateRouting, sourceStreamStateRouting, decodeKey, type HashKeyRange } from '../../lib/state/state-routing.js';
import { hashKeyOf } from '../../lib/sinks/repartition-sink.js';
import { seedRepartitionOffset } from '../../lib/sources/repartition-shard-source.js';
import type { DataFrame } from '../../lib/api/data-frame.js';

const MAX = (1n << 128n) - 1n;
const MID = MAX / 2n;
const whole: HashKeyRange = { start: 0n, end: MAX };
const lower: HashKeyRange = { start: 0n, end: MID };
const upper: HashKeyRange = { start: MID + 1n, end: MAX };
const stores = ['north', 'south', 'east', 'west', 'central', 'harbor', 'airport', 'mall'];
const storeId = { operatorId: 0, storeName: 'default' };

const perStore = (df: DataFrame): DataFrame => df.withWatermark('ts', '10 minutes')
  .groupBy(window(col('ts'), '1 hour'), col('store_id')).agg(sum('amount').as('revenue'), count('*').as('orders'));

function compiled(partitionKey: string | undefined, transform: (df: DataFrame) => DataFrame = perStore, shards = 2) {
  return compileQuery(defineQuery({
    name: 'seed',
    source: { schema: 'store_id string, amount long, ts timestamp', ...(partitionKey ? { partitionKey } : {}) },
    transform,
    outputMode: 'update',
    sink: { kind: 'dynamodb' },
  }), { expectedShardCount: shards, allowRepartition: true });
}

/** A parent that committed batch 4 with one aggregation entry per store. */
async function parentWith(keys: readonly string[], watermarks: { batch: number; next: number } = { batch: 1_000, next: 2_000 }): Promise<Checkpoint> {
  const cp = new MemoryCheckpoint();
  for (let v = 0; v < 5; v++) {
    const store = await cp.stateStore.open(storeId, v);
    if (v === 4) for (const k of keys) store.put(encodeKey([0, k]), [[{ start: 0, end: 3_600_000_000 }, k], [k.length, 1]]);
    await store.commit();
  }
  await cp.offsetLog.add(4, { formatVersion: CHECKPOINT_FORMAT_VERSION, batchId: 4, offsets: { kinesis: null }, batchWatermarkMs: watermarks.batch, batchTimestampMs: 42, conf: { c: '1' } });
  await cp.commitLog.add(4, { formatVersion: CHECKPOINT_FORMAT_VERSION, batchId: 4, nextBatchWatermarkMs: watermarks.next });
  return cp;
}

async function keysOf(cp: Checkpoint, version: number): Promise<string[]> {
  const store = await cp.stateStore.open(storeId, version);
  return [...store.entries()].map(([, v]) => (v as [unknown[], unknown])[0][1] as string).sort();
}

const parent = (checkpoint: Checkpoint, range: HashKeyRange, partitionId = 'p'): SeedParent => ({ partitionId, checkpoint, range });

describe('state routing', () => {
  it('hashes as Kinesis and the repartition sink do (MD5 of the key, 128-bit unsigned)', () => {
    expect(kinesisHashKey('')).toBe(BigInt('0xd41d8cd98f00b204e9800998ecf8427e'));
    expect(hashKeyOf('north')).toBe(kinesisHashKey('north'));
  });

  it('decodes what encodeKey wrote', () => {
    for (const key of [['a'], [7], [1, 'x', null], [Number.NaN], ['s1']]) expect(decodeKey(encodeKey(key))).toEqual(key);
  });

  it('routes an aggregation entry by its partition-key column; a global aggregation is not routable', () => {
    const routing = sourceStreamStateRouting(compiled('store_id').sourceStage.plan, 'store_id');
    expect(routing[0]!.routingKey!('ignored', [[{ start: 0, end: 1 }, 'north'], []])).toBe('north');
    const global = compiled(undefined, (df) => df.agg(count('*').as('n')), 1);
    expect(sourceStreamStateRouting(global.sourceStage.plan, undefined)[0]!.routingKey).toBeNull();
  });

  it('routes a deduplication entry keyed by a long beyond 2^53 by its exact digits, as the producer wrote the partition key', () => {
    const q = compileQuery(defineQuery({
      name: 'seed-long',
      source: { schema: 'user_id long, ts timestamp', partitionKey: 'user_id' },
      transform: (df) => df.withWatermark('ts', '10 minutes').dropDuplicatesWithinWatermark(['user_id']),
      outputMode: 'append',
      sink: { kind: 'dynamodb' },
    }), { expectedShardCount: 2 });
    const routing = sourceStreamStateRouting(q.sourceStage.plan, 'user_id');
    for (const id of [2n ** 53n + 1n, 9_223_372_036_854_775_807n, -(2n ** 60n) - 1n]) {
      expect(routing[0]!.routingKey!(encodeKey([id]), 0)).toBe(String(id));
    }
    expect(routing[0]!.routingKey!(encodeKey([42]), 0)).toBe('42');
  });

  it('routes a stage-2 entry by the routing columns, as the repartition sink hashes a row', () => {
    const q = compiled(undefined);
    expect(q.hops[0]!.routingKeyPositions).toEqual([1]);
    const routing = repartitionStateRouting(q.stateStage!.plan, q.hops[0]!.routingKeyPositions);
    expect(routing[0]!.routingKey!('ignored', [[{ start: 0, end: 1 }, 'north'], []])).toBe('["north"]');
  });
});

describe('seedFromParents', () => {
  const routing = sourceStreamStateRouting(compiled('store_id').sourceStage.plan, 'store_id');

  it('a split gives each child exactly its hash range\'s entries, at version 1, with the parent\'s watermarks', async () => {
    const p = await parentWith(stores);
    const children = [new MemoryCheckpoint(), new MemoryCheckpoint()];
    for (const [i, range] of [lower, upper].entries()) {
      const outcome = await seedFromParents({
        childPartitionId: `c${i}`, child: children[i]!, childRange: range, parents: [parent(p, whole)], stores: routing, sourceName: 'kinesis', startOffset: () => null,
      });
      expect(outcome).toBe('seeded');
      expect(await keysOf(children[i]!, 1)).toEqual(stores.filter((s) => inHashKeyRange(kinesisHashKey(s), range)).sort());
      expect((await children[i]!.commitLog.getLatest())?.[1].nextBatchWatermarkMs).toBe(2_000);
      expect((await children[i]!.offsetLog.get(0))?.batchWatermarkMs).toBe(1_000);
    }
    const [a, b] = [await keysOf(children[0]!, 1), await keysOf(children[1]!, 1)];
    expect(a.length).toBeGreaterThan(0);
    expect(b.length).toBeGreaterThan(0);
    expect([...a, ...b].sort()).toEqual([...stores].sort());
    // Seeding again changes nothing: the child has committed.
    expect(await seedFromParents({
      childPartitionId: 'c0', child: children[0]!, childRange: lower, parents: [parent(p, whole)], stores: routing, sourceName: 'kinesis', startOffset: () => null,
    })).toBe('committed-before');
  });

  it('a merge takes the union; the lower parent watermark resumes, the higher one runs next', async () => {
    const low = stores.filter((s) => inHashKeyRange(kinesisHashKey(s), lower));
    const high = stores.filter((s) => inHashKeyRange(kinesisHashKey(s), upper));
    const child = new MemoryCheckpoint();
    await seedFromParents({
      childPartitionId: 'c', child, childRange: whole,
      parents: [parent(await parentWith(low, { batch: 500, next: 700 }), lower, 'a'), parent(await parentWith(high, { batch: 900, next: 1_100 }), upper, 'b')],
      stores: routing, sourceName: 'kinesis', startOffset: () => null,
    });
    expect(await keysOf(child, 1)).toEqual([...stores].sort());
    expect((await child.offsetLog.get(0))?.batchWatermarkMs).toBe(500);
    expect((await child.commitLog.getLatest())?.[1].nextBatchWatermarkMs).toBe(1_100);
  });

  it('refuses to split a state that is not keyed by the partition key (a global aggregation), saying what to do', async () => {
    const global = compiled(undefined, (df) => df.agg(count('*').as('n')), 1);
    const globalRouting = sourceStreamStateRouting(global.sourceStage.plan, undefined);
    const p = new MemoryCheckpoint();
    for (let v = 0; v < 2; v++) {
      const store = await p.stateStore.open(storeId, v);
      if (v === 1) store.put(encodeKey([]), [[], [3]]);
      await store.commit();
    }
    await p.offsetLog.add(1, { formatVersion: 1, batchId: 1, offsets: {}, batchWatermarkMs: 0, batchTimestampMs: 0, conf: {} });
    await p.commitLog.add(1, { formatVersion: 1, batchId: 1, nextBatchWatermarkMs: 0 });
    const child = new MemoryCheckpoint();
    const attempt = seedFromParents({
      childPartitionId: 'c', child, childRange: lower, parents: [parent(p, whole)], stores: globalRouting, sourceName: 'kinesis', startOffset: () => null,
    });
    await expect(attempt).rejects.toMatchObject({ code: 'RESHARD_WITH_STATE', retryable: false });
    await expect(attempt).rejects.toThrow(/global aggregation[\s\S]*repartitionShardCount: 1/);
    expect(await child.commitLog.getLatest()).toBeUndefined();
    // A merge of such a state is a union: nothing needs dividing.
    expect(await seedFromParents({
      childPartitionId: 'c', child, childRange: whole, parents: [parent(p, lower)], stores: globalRouting, sourceName: 'kinesis', startOffset: () => null,
    })).toBe('seeded');
  });

  it('refuses a merge whose parents both hold a key', async () => {
    const child = new MemoryCheckpoint();
    await expect(seedFromParents({
      childPartitionId: 'c', child, childRange: whole,
      parents: [parent(await parentWith(['north']), lower, 'a'), parent(await parentWith(['north']), upper, 'b')],
      stores: routing, sourceName: 'kinesis', startOffset: () => null,
    })).rejects.toMatchObject({ code: 'RESHARD_STATE_CONFLICT' });
  });

  it('a stage-2 child starts from what its parents applied per source shard, in its own hash range', () => {
    const legacy = (batch: number, maxEventTimeMs: number, idle = false) => ({ batch, parts: [0], complete: true, maxEventTimeMs, idle });
    const offset = seedRepartitionOffset('c', whole, [
      { offset: { shardId: 'a', sequenceNumber: '9', sources: { s0: legacy(3, 10) } } as never, range: lower },
      { offset: { shardId: 'b', sequenceNumber: '7', sources: { s0: legacy(3, 10), s1: legacy(1, 5, true) } } as never, range: upper },
    ]) as unknown as { sources: Record<string, { span: string[]; ranges: { lo: string; hi: string; batch: number }[] }> };
    expect(Object.keys(offset.sources).sort()).toEqual(['s0', 's1']);
    // Both parents applied batch 3 of s0: one range over the whole child.
    expect(offset.sources.s0!.ranges).toMatchObject([{ batch: 3, lo: whole.start.toString(16), hi: whole.end.toString(16) }]);
    // Only the upper parent heard of s1: the lower half has nothing applied.
    expect(offset.sources.s1!.ranges).toMatchObject([{ batch: 1, lo: upper.start.toString(16), hi: upper.end.toString(16) }]);
  });
});

describe('seedFromParents of a stage reading several sources (a join\'s stage 2)', () => {
  it('carries every source\'s offset the parents committed, not only the stage\'s first one', async () => {
    const p = new MemoryCheckpoint();
    const progress = (batch: number) => ({ span: ['0', MAX.toString(16)], ranges: [{ lo: '0', hi: MAX.toString(16), batch, maxEventTimeMs: 5 }], idle: false });
    await p.offsetLog.add(2, {
      formatVersion: 1, batchId: 2, batchWatermarkMs: 0, batchTimestampMs: 0, conf: {},
      offsets: {
        'repartition.orders': { shardId: 'p', sequenceNumber: '9', recordCount: 1, sources: { 'orders.s0': progress(4) } },
        'repartition.payments': { shardId: 'p', sequenceNumber: '9', recordCount: 1, sources: { 'payments.s0': progress(6) } },
      } as never,
    });
    await p.commitLog.add(2, { formatVersion: 1, batchId: 2, nextBatchWatermarkMs: 0 });
    const child = new MemoryCheckpoint();
    await seedFromParents({
      childPartitionId: 'c', child, childRange: lower, parents: [parent(p, whole)], stores: [], sourceName: 'repartition.orders',
      startOffset: (offsets) => seedRepartitionOffset('c', lower, offsets.map((offset) => ({ offset, range: whole }))),
    });
    const offsets = (await child.offsetLog.get(0))!.offsets as Record<string, { sources: Record<string, { ranges: { batch: number }[] }> }>;
    expect(Object.keys(offsets).sort()).toEqual(['repartition.orders', 'repartition.payments']);
    expect(offsets['repartition.payments']!.sources['payments.s0']!.ranges[0]!.batch).toBe(6);
  });
});
