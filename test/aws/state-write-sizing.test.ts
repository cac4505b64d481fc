/** `sluice cost`'s state sizing follows the deployed store's snapshot policy (snapshotByBytes), commit by commit. */
import { describe, expect, it } from 'vitest';
import { DeployedStateSizer } from '../../lib/aws/state-write-sizing.js';

describe('DeployedStateSizer', () => {
  it('a delta per commit; a snapshot once 3 versions passed and the deltas outweigh it, with its marker and the purge of what the last one replaced', async () => {
    const sizer = new DeployedStateSizer('q#shard-0', 3);
    const perCommit: number[] = [];
    for (let version = 0; version < 9; version++) {
      const store = await sizer.open<{ n: number }>({ operatorId: 0, storeName: 'default' } as never, version);
      // The same 10 keys rewritten: each delta weighs about what a snapshot of the state does.
      for (let k = 0; k < 10; k++) store.put(`key-${k}`, { n: version * 10 + k });
      const before = sizer.units;
      await store.commit();
      perCommit.push(sizer.units - before);
    }
    // v3: snapshot + marker; v6: + the deletes of v1, v2's deltas; v9: + v3's snapshot, marker and v4, v5's deltas.
    expect(perCommit).toEqual([1, 1, 2, 1, 1, 4, 1, 1, 6]);
    expect(sizer.heldBytes()).toBeGreaterThan(0);
  });

  it('a large state with small deltas is not snapshotted every few versions: its writes follow the change', async () => {
    const sizer = new DeployedStateSizer('q#shard-0', 3);
    const big = await sizer.open<string>({ operatorId: 0, storeName: 'default' } as never, 0);
    for (let k = 0; k < 20_000; k++) big.put(`key-${k}`, `value-${k}-${(k * 7919) % 10_007}`);
    await big.commit();
    const change = async (version: number): Promise<number> => {
      const store = await sizer.open<string>({ operatorId: 0, storeName: 'default' } as never, version);
      store.put(`key-${version}`, `changed-${version}`);
      const before = sizer.units;
      await store.commit();
      return sizer.units - before;
    };
    // The load (version 1)'s delta outweighs the state at version 3: one snapshot of it (many units), then none.
    expect(await change(1)).toBe(1);
    expect(await change(2)).toBeGreaterThan(50);
    const perCommit: number[] = [];
    for (let version = 3; version < 40; version++) perCommit.push(await change(version));
    expect(perCommit).toEqual(perCommit.map(() => 1));
  });
});
