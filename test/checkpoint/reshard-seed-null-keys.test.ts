/**
 * Seeding a child from its parents' stream-stream join state when rows sit under a NULL join key
 * (lib/checkpoint/reshard-seed.ts, lib/execution/join/join-state-manager.ts `unionJoinSide`). A NULL
 * key never matches (Spark: `=` with NULL is never true; the rows on a preserved side wait for the
 * watermark and are emitted with NULLs), and on the second of two chained joins such rows sit where
 * their row was routed, not where the NULL key hashes: after a split both children buffer some, and
 * the merge must keep all of them. A split must give each such row to exactly one child.
 */
import { describe, expect, it } from 'vitest';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { CHECKPOINT_FORMAT_VERSION, type Checkpoint } from '../../lib/checkpoint/checkpoint.js';
import { seedFromParents, type SeedParent } from '../../lib/checkpoint/reshard-seed.js';
import { unionJoinSide, type KeyEntry, type StoredRow } from '../../lib/execution/join/join-state-manager.js';
import { encodeKey } from '../../lib/execution/values.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { defineQuery } from '../../lib/query/query-definition.js';
import { col, count } from '../../lib/plan/functions.js';
import { hashKeyOf } from '../../lib/sinks/repartition-sink.js';
import { inHashKeyRange, repartitionRoutingKey, repartitionStateRouting, type HashKeyRange, type StoreRouting } from '../../lib/state/state-routing.js';
import { nullKeyOuterJoins } from '../support/null-key-join.js';

const MAX = (1n << 128n) - 1n;
const MID = MAX / 2n;
const whole: HashKeyRange = { start: 0n, end: MAX };
const lower: HashKeyRange = { start: 0n, end: MID };
const upper: HashKeyRange = { start: MID + 1n, end: MAX };

/** Stage 2 of payments ⟕ orders ⟕ shipments: both joins, routed by `ref = order_id = sid`. */
function stage2Routing(): StoreRouting[] {
  const q = compileQuery(nullKeyOuterJoins('seed-null'), { allowRepartition: true });
  const stage = q.stages.find((s) => s.index === 1)!;
  const hop = stage.inputHop!;
  return repartitionStateRouting(stage.plan, hop.routingKeyPositions, hop.stateUnroutable, hop.stateKeyPositions);
}

/** The second join's left side (its preserved side): operator 1. */
const COUNTS = { operatorId: 1, storeName: 'left-keyToNumValues' };
const ROWS = { operatorId: 1, storeName: 'left-keyWithIndexToValue' };

type Buffered = Readonly<Record<string, readonly unknown[][]>>;

/** A parent that committed batch 2 with the second join's left side holding `rows` per key value. */
async function joinParent(rows: Buffered): Promise<Checkpoint> {
  const cp = new MemoryCheckpoint();
  for (let v = 0; v < 3; v++) {
    const counts = await cp.stateStore.open(COUNTS, v);
    const values = await cp.stateStore.open(ROWS, v);
    if (v === 2) {
      for (const [k, list] of Object.entries(rows)) {
        const keyValues = [k === 'NULL' ? null : k];
        const key = encodeKey(keyValues);
        counts.put(key, { key: keyValues, count: list.length } satisfies KeyEntry);
        list.forEach((row, i) => values.put(`${key}#${i}`, { row, matched: false } satisfies StoredRow));
      }
    }
    await counts.commit();
    await values.commit();
  }
  await cp.offsetLog.add(2, { formatVersion: CHECKPOINT_FORMAT_VERSION, batchId: 2, offsets: {}, batchWatermarkMs: 0, batchTimestampMs: 0, conf: {} });
  await cp.commitLog.add(2, { formatVersion: CHECKPOINT_FORMAT_VERSION, batchId: 2, nextBatchWatermarkMs: 0 });
  return cp;
}

async function seeded(child: Checkpoint): Promise<{ counts: Map<string, KeyEntry>; rows: Map<string, StoredRow> }> {
  const counts = await child.stateStore.open<KeyEntry>(COUNTS, 1);
  const rows = await child.stateStore.open<StoredRow>(ROWS, 1);
  return { counts: new Map(counts.entries()), rows: new Map(rows.entries()) };
}

/** Every row of a key, in index order, as the join reads them. */
function rowsOf(state: { counts: Map<string, KeyEntry>; rows: Map<string, StoredRow> }, keyValue: string | null): unknown[] {
  const key = encodeKey([keyValue]);
  const n = state.counts.get(key)?.count ?? 0;
  return Array.from({ length: n }, (_, i) => state.rows.get(`${key}#${i}`)?.row);
}

const parent = (checkpoint: Checkpoint, range: HashKeyRange, partitionId: string): SeedParent => ({ partitionId, checkpoint, range });
/** A non-NULL order id that hashes into `range`, as the repartition sink routes it. */
const keyIn = (range: HashKeyRange, from = 0): string => {
  for (let i = from; ; i++) if (inHashKeyRange(hashKeyOf(repartitionRoutingKey([`o${i}`])), range)) return `o${i}`;
};

describe('merging join state with NULL join keys', () => {
  const routing = stage2Routing();

  it('the second join\'s stores know that a NULL key never matches', () => {
    const side = routing.find((s) => s.id.operatorId === 1 && s.id.storeName === 'left-keyToNumValues')!.joinSide!;
    expect(side.neverMatches([null])).toBe(true);
    expect(side.neverMatches(['o1'])).toBe(false);
  });

  it('a merge keeps every NULL-key row of both parents, once, re-indexed, and the other keys as they were', async () => {
    const lo = keyIn(lower);
    const hi = keyIn(upper);
    const a = await joinParent({ NULL: [['x1', 1], ['x2', 1]], [lo]: [['p-lo', 5]] });
    const b = await joinParent({ NULL: [['x3', 1]], [hi]: [['p-hi', 7], ['p-hi2', 8]] });
    const child = new MemoryCheckpoint();
    const outcome = await seedFromParents({
      childPartitionId: 'c', child, childRange: whole, parents: [parent(a, lower, 'a'), parent(b, upper, 'b')],
      stores: routing, sourceName: 'repartition.orders', startOffset: () => null,
    });
    expect(outcome).toBe('seeded');
    const state = await seeded(child);
    expect(rowsOf(state, null)).toEqual([['x1', 1], ['x2', 1], ['x3', 1]]);
    expect(state.counts.get(encodeKey([null]))).toEqual({ key: [null], count: 3 });
    expect(rowsOf(state, lo)).toEqual([['p-lo', 5]]);
    expect(rowsOf(state, hi)).toEqual([['p-hi', 7], ['p-hi2', 8]]);
    // No row outside the counts: 3 + 1 + 2.
    expect(state.rows.size).toBe(6);
  });

  it('a merge still refuses a key that can match held by both parents (its rows should have met on one shard)', async () => {
    const a = await joinParent({ o7: [['p', 1]] });
    const b = await joinParent({ o7: [['q', 2]] });
    await expect(seedFromParents({
      childPartitionId: 'c', child: new MemoryCheckpoint(), childRange: whole, parents: [parent(a, lower, 'a'), parent(b, upper, 'b')],
      stores: routing, sourceName: 'repartition.orders', startOffset: () => null,
    })).rejects.toMatchObject({ code: 'RESHARD_STATE_CONFLICT' });
  });

  it('a split gives the NULL key\'s rows to exactly one child, the one its hash routes to; split then merge gives the parent back', async () => {
    const keys = [keyIn(lower), keyIn(upper), keyIn(lower, 50), keyIn(upper, 50)];
    const p = await joinParent({ NULL: [['x1', 1], ['x2', 1], ['x3', 1]], ...Object.fromEntries(keys.map((k, i) => [k, [[`p${i}`, i]]])) });
    const children = [new MemoryCheckpoint(), new MemoryCheckpoint()];
    for (const [i, range] of [lower, upper].entries()) {
      await seedFromParents({
        childPartitionId: `c${i}`, child: children[i]!, childRange: range, parents: [parent(p, whole, 'p')],
        stores: routing, sourceName: 'repartition.orders', startOffset: () => null,
      });
    }
    const states = await Promise.all(children.map(seeded));
    const nullOwner = inHashKeyRange(hashKeyOf(repartitionRoutingKey([null])), lower) ? 0 : 1;
    expect(rowsOf(states[nullOwner]!, null)).toEqual([['x1', 1], ['x2', 1], ['x3', 1]]);
    expect(rowsOf(states[1 - nullOwner]!, null)).toEqual([]);
    for (const k of keys) expect(states.map((s) => rowsOf(s, k).length).sort()).toEqual([0, 1]);
    expect(states[0]!.rows.size + states[1]!.rows.size).toBe(7);

    // Merged back (each child committed its seed, batch 0): the parent's rows, each once.
    const merged = new MemoryCheckpoint();
    await seedFromParents({
      childPartitionId: 'm', child: merged, childRange: whole, parents: [parent(children[0]!, lower, 'c0'), parent(children[1]!, upper, 'c1')],
      stores: routing, sourceName: 'repartition.orders', startOffset: () => null,
    });
    const back = await seeded(merged);
    expect(rowsOf(back, null)).toEqual([['x1', 1], ['x2', 1], ['x3', 1]]);
    for (const [i, k] of keys.entries()) expect(rowsOf(back, k)).toEqual([[`p${i}`, i]]);
    expect(back.rows.size).toBe(7);
  });
});

describe('unionJoinSide', () => {
  const side = (counts: [string, KeyEntry][], rows: [string, StoredRow][]) => ({ counts: new Map(counts), rows: new Map(rows) });
  const anyNull = (values: readonly unknown[]) => values.some((v) => v === null);

  it('skips holes in a parent\'s indexes and keeps the matched flags', () => {
    const k = encodeKey([null]);
    const union = unionJoinSide([
      side([[k, { key: [null], count: 3 }]], [[`${k}#0`, { row: ['a'], matched: false }], [`${k}#2`, { row: ['c'], matched: true }]]),
      side([[k, { key: [null], count: 1 }]], [[`${k}#0`, { row: ['d'], matched: false }]]),
    ], anyNull);
    expect(union).toEqual({
      counts: new Map([[k, { key: [null], count: 3 }]]),
      rows: new Map([[`${k}#0`, { row: ['a'], matched: false }], [`${k}#1`, { row: ['c'], matched: true }], [`${k}#2`, { row: ['d'], matched: false }]]),
    });
  });

  it('names a shared key that can match (a NULL-safe key, say) as a conflict', () => {
    const k = encodeKey([null]);
    const one = side([[k, { key: [null], count: 1 }]], [[`${k}#0`, { row: ['a'], matched: false }]]);
    expect(unionJoinSide([one, one], () => false)).toEqual({ conflict: k });
  });
});

describe('other state with a NULL key in stage 2 (Spark: NULL is one group, one duplicate key)', () => {
  it('an aggregation\'s NULL group and a deduplication\'s NULL key route where the repartition sink sends their rows', () => {
    for (const transform of [
      (df: Parameters<NonNullable<Parameters<typeof defineQuery>[0]['transform']>>[0]) => df.groupBy(col('store_id')).agg(count('*').as('n')),
      (df: Parameters<NonNullable<Parameters<typeof defineQuery>[0]['transform']>>[0]) => df.dropDuplicates(['store_id']),
    ]) {
      const q = compileQuery(defineQuery({
        name: 'null-group', source: { schema: 'store_id string, amount long' }, transform: transform as never, outputMode: 'update', sink: { kind: 'dynamodb' },
      }), { expectedShardCount: 2, allowRepartition: true });
      const hop = q.hops[0]!;
      const routing = repartitionStateRouting(q.stateStage!.plan, hop.routingKeyPositions, hop.stateUnroutable, hop.stateKeyPositions)[0]!;
      const rowHash = hashKeyOf(repartitionRoutingKey(hop.routingOrdinals.map(() => null)));
      // An aggregation keeps `[keyValues, buffers]`; a deduplication's value is not its key.
      const key = routing.routingKey!(encodeKey([null]), q.stateStage!.plan.kind === 'Deduplicate' ? 0 : [[null], [1]]);
      expect(key).not.toBeNull();
      expect(hashKeyOf(key!)).toBe(rowHash);
    }
  });
});
