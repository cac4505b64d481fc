import { describe, expect, it } from 'vitest';
import { MemoryStateStoreProvider } from '../../lib/state/memory-state-store.js';
import { CheckpointError } from '../../lib/errors/sluice-error.js';

const id = { operatorId: 0, storeName: 'default' };
const sorted = (entries: Iterable<[string, unknown]>): [string, unknown][] => [...entries].sort((a, b) => a[0].localeCompare(b[0]));

describe('MemoryStateStore', () => {
  it('reads its own uncommitted writes and tracks size through put, overwrite and remove', async () => {
    const provider = new MemoryStateStoreProvider();
    const s0 = await provider.open<number>(id, 0);
    expect(s0.size).toBe(0);
    s0.put('a', 1);
    s0.put('b', 2);
    s0.put('a', 3);
    expect(s0.get('a')).toBe(3);
    expect(s0.size).toBe(2);
    s0.remove('b');
    s0.remove('missing');
    expect(s0.get('b')).toBeUndefined();
    expect(s0.size).toBe(1);
    s0.put('b', 4);
    expect(s0.size).toBe(2);
    expect(await s0.commit()).toBe(1);

    const s1 = await provider.open<number>(id, 1);
    expect(s1.size).toBe(2);
    s1.put('a', 5); // overwrite of a committed key: size unchanged
    expect(s1.size).toBe(2);
    s1.remove('a');
    expect(s1.size).toBe(1);
    s1.remove('a');
    expect(s1.size).toBe(1);
    s1.put('c', 6);
    s1.remove('c'); // put then removed in the same batch, never committed
    expect(s1.size).toBe(1);
    s1.put('a', 7);
    expect(s1.size).toBe(2);
    expect(sorted(s1.entries())).toEqual([['a', 7], ['b', 4]]);
    await s1.commit();

    const s2 = await provider.open<number>(id, 2);
    expect(s2.size).toBe(2);
    expect(sorted(s2.entries())).toEqual([['a', 7], ['b', 4]]);
  });

  it('keeps size right whatever the order of reads and writes', async () => {
    const provider = new MemoryStateStoreProvider();
    const s0 = await provider.open<number>(id, 0);
    s0.put('kept', 0);
    await s0.commit();
    const s = await provider.open<number>(id, 1);
    expect(s.get('x')).toBeUndefined();
    s.put('y', 1); // a different key than the one just read
    s.put('x', 2);
    expect(s.size).toBe(3);
    expect(s.get('kept')).toBe(0);
    s.put('kept', 5); // read, then overwritten: no new key
    expect(s.size).toBe(3);
    expect(s.get('y')).toBe(1);
    s.remove('x'); // the last read was another key
    s.remove('x');
    expect(s.size).toBe(2);
    expect(s.get('x')).toBeUndefined();
    s.put('x', 3);
    expect(s.size).toBe(3);
    s.remove('kept');
    s.put('kept', 6);
    expect(s.size).toBe(3);
    expect(sorted(s.entries())).toEqual([['kept', 6], ['x', 3], ['y', 1]]);
  });

  it('abort drops the uncommitted changes', async () => {
    const provider = new MemoryStateStoreProvider();
    const s0 = await provider.open<number>(id, 0);
    s0.put('a', 1);
    await s0.commit();
    const s1 = await provider.open<number>(id, 1);
    s1.put('b', 2);
    s1.remove('a');
    expect(s1.size).toBe(1);
    s1.abort();
    expect(s1.size).toBe(1);
    expect(s1.get('a')).toBe(1);
    expect(s1.get('b')).toBeUndefined();
    const again = await provider.open<number>(id, 1);
    expect(sorted(again.entries())).toEqual([['a', 1]]);
  });

  it('re-opens an older version for a re-executed batch, and drops the versions after it', async () => {
    const provider = new MemoryStateStoreProvider();
    for (let v = 0; v < 5; v++) {
      const s = await provider.open<number>(id, v);
      s.put(`k${v}`, v);
      if (v > 0) s.remove(`k${v - 1}`);
      await s.commit();
    }
    const old = await provider.open<number>(id, 2);
    expect(sorted(old.entries())).toEqual([['k1', 1]]);
    expect(old.size).toBe(1);
    old.put('x', 9);
    expect(await old.commit()).toBe(3);
    const latest = await provider.open<number>(id, 3);
    expect(sorted(latest.entries())).toEqual([['k1', 1], ['x', 9]]);
    await expect(provider.open(id, 5)).rejects.toThrow(CheckpointError);
  });

  it('by default keeps what a re-run needs, the previous version, and no deep history (Spark keeps 2 in memory)', async () => {
    const provider = new MemoryStateStoreProvider();
    for (let v = 0; v < 12; v++) {
      const s = await provider.open<number>(id, v);
      s.put('n', v);
      expect(await s.commit()).toBe(v + 1);
      if (v >= 1) {
        const previous = await provider.open<number>(id, v); // the state committed, the commit log did not
        expect(previous.get('n')).toBe(v - 1);
        previous.put('n', v);
        expect(await previous.commit()).toBe(v + 1);
      }
    }
    await expect(provider.open(id, 6)).rejects.toThrow(/not available/);
  });

  it('keeps the retained versions across compaction and refuses older ones', async () => {
    const provider = new MemoryStateStoreProvider(3);
    for (let v = 0; v < 10; v++) {
      const s = await provider.open<number>(id, v);
      s.put('n', v);
      s.put(`only${v}`, v);
      if (v >= 2) s.remove(`only${v - 2}`);
      await s.commit();
    }
    for (let v = 10; v >= 7; v--) {
      const s = await provider.open<number>(id, v);
      expect(s.get('n')).toBe(v - 1);
      expect(s.size).toBe(3);
      expect(sorted(s.entries())).toEqual([['n', v - 1], [`only${v - 2}`, v - 2], [`only${v - 1}`, v - 1]].sort((a, b) => String(a[0]).localeCompare(String(b[0]))));
    }
    await expect(provider.open(id, 1)).rejects.toThrow(/not available/);
  });

  it('rebuilds every retained version after random puts, overwrites and removes, with and without a read first', async () => {
    const provider = new MemoryStateStoreProvider(4);
    let seed = 7;
    const random = (n: number): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    const model = new Map<string, number>();
    const versions: [string, unknown][][] = [[]];
    for (let v = 0; v < 12; v++) {
      const s = await provider.open<number>(id, v);
      if (v === 5) {
        s.put('k0', -1); // an aborted attempt leaves nothing behind
        s.remove('k1');
        s.abort();
      }
      const t = v === 5 ? await provider.open<number>(id, v) : s;
      for (let op = 0; op < 30; op++) {
        const key = `k${random(8)}`;
        if (random(2) === 0) expect(t.get(key)).toBe(model.get(key));
        if (random(3) === 0) {
          t.remove(key);
          model.delete(key);
        } else {
          t.put(key, v * 100 + op);
          model.set(key, v * 100 + op);
        }
      }
      expect(t.size).toBe(model.size);
      await t.commit();
      versions.push(sorted(model.entries()));
    }
    for (let v = 12; v >= 8; v--) {
      const s = await provider.open<number>(id, v);
      expect(sorted(s.entries())).toEqual(versions[v]);
      expect(s.size).toBe(versions[v]!.length);
    }
  });

  it('lets the last opener win: a superseded store can neither write nor commit, and its writes are reverted', async () => {
    const provider = new MemoryStateStoreProvider();
    const a = await provider.open<number>(id, 0);
    a.put('k', 1);
    a.put('gone', 1);
    const b = await provider.open<number>(id, 0); // a restarted batch: a's writes are undone
    expect(b.get('k')).toBeUndefined();
    expect(b.size).toBe(0);
    expect(() => a.put('k', 3)).toThrow(/Concurrent update/);
    b.put('k', 2);
    await expect(a.commit()).rejects.toThrow(/Concurrent update/);
    expect(await b.commit()).toBe(1);
    expect(sorted((await provider.open<number>(id, 1)).entries())).toEqual([['k', 2]]);
  });

  it('refuses a commit from a store whose version was committed by another writer', async () => {
    const provider = new MemoryStateStoreProvider();
    const a = await provider.open<number>(id, 0);
    await a.commit();
    const b = await provider.open<number>(id, 1);
    b.put('k', 1);
    await expect(a.commit()).rejects.toThrow(/Concurrent update/);
    expect(await b.commit()).toBe(2);
  });
});

describe('grouping key encoding', () => {
  it('keeps keys apart when a string contains the separator', async () => {
    const { compileKeyEncoder } = await import('../../lib/execution/values.js');
    const encode = compileKeyEncoder(['string', 'string']);
    expect(encode(["x\u0001'y", 'z'])).not.toBe(encode(['x', "y\u0001'z"]));
    expect(encode(['x\u0003a', 'z'])).not.toBe(encode(['x\u0001', 'z']));
    expect(encode(['plain', 'keys'])).toBe("'plain\u0001'keys");
  });
});
