/**
 * Where a re-driven record of a one-stage stateful query runs (lib/aws/redrive-routing.ts): its own
 * shard while open; after a split, the child whose hash-key range holds the MD5 of its partition
 * key (followed down through a second split); after a merge, the merged child; refused when a split
 * is crossed and the state cannot be divided by key.
 */
import type { Shard } from '@aws-sdk/client-kinesis';
import { describe, expect, it } from 'vitest';
import { indivisibleState, redriveTargetOf } from '../../lib/aws/redrive-routing.js';
import { kinesisHashKey } from '../../lib/state/state-routing.js';

const MAX = (1n << 128n) - 1n;
const HALF = 1n << 127n;
const shard = (id: string, start: bigint, end: bigint, closed: boolean, parent?: string, adjacent?: string): Shard => ({
  ShardId: id, HashKeyRange: { StartingHashKey: String(start), EndingHashKey: String(end) },
  SequenceNumberRange: { StartingSequenceNumber: '1', ...(closed ? { EndingSequenceNumber: '9' } : {}) },
  ...(parent ? { ParentShardId: parent } : {}), ...(adjacent ? { AdjacentParentShardId: adjacent } : {}),
});
/** 'north' hashes into the high half, 'south' into the low one. */
const high = 'north';
const low = 'south';

describe('redriveTargetOf', () => {
  it('the checks below rest on where the keys hash', () => {
    expect(kinesisHashKey(high) >= HALF).toBe(true);
    expect(kinesisHashKey(low) < HALF).toBe(true);
  });

  it('an open shard is its own target; a split parent\'s records go to the child holding their key, through a second split too', () => {
    const quarter = 1n << 126n;
    const lowQuarter = kinesisHashKey(low) < quarter ? 'g0' : 'g1';
    const shards = [
      shard('p', 0n, MAX, true), shard('a', 0n, HALF - 1n, true, 'p'), shard('b', HALF, MAX, false, 'p'),
      shard('g0', 0n, quarter - 1n, false, 'a'), shard('g1', quarter, HALF - 1n, false, 'a'),
    ];
    expect(redriveTargetOf(shards, 'b', low, null)).toEqual({ shardId: 'b' });
    expect(redriveTargetOf(shards, 'p', high, null)).toEqual({ shardId: 'b' });
    expect(redriveTargetOf(shards, 'p', low, null)).toEqual({ shardId: lowQuarter });
    expect(redriveTargetOf(shards, 'a', low, null)).toEqual({ shardId: lowQuarter });
  });

  it('a merge takes both parents\' records whatever the state; a split of an indivisible state is refused with why', () => {
    const merged = [shard('a', 0n, HALF - 1n, true), shard('b', HALF, MAX, true), shard('m', 0n, MAX, false, 'a', 'b')];
    const why = indivisibleState([{ id: { operatorId: 0, storeName: 'default' }, routingKey: null, unroutable: 'it is a global aggregation (no keys)' }]);
    expect(why).toMatch(/operator 0 cannot be divided by key \(it is a global aggregation/);
    expect(redriveTargetOf(merged, 'a', low, why)).toEqual({ shardId: 'm' });
    expect(redriveTargetOf(merged, 'b', high, why)).toEqual({ shardId: 'm' });
    const split = [shard('p', 0n, MAX, true), shard('a', 0n, HALF - 1n, false, 'p'), shard('b', HALF, MAX, false, 'p')];
    expect(redriveTargetOf(split, 'p', high, why)).toEqual({ refused: expect.stringMatching(/shard p was split, and the state of stateful operator 0/) });
    expect(redriveTargetOf(split, 'gone', high, null)).toEqual({ refused: expect.stringMatching(/no longer listed/) });
    expect(indivisibleState([{ id: { operatorId: 0, storeName: 'default' }, routingKey: () => 'k' }])).toBeNull();
  });
});
