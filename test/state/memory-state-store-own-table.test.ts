/**
 * MemoryStateStore.ownTable: the store keeps an operator's AggregationTable (one per store id) and
 * versions it along with its key-value part: commit, abort, supersede by a newer open, rollback to
 * an older version, and retention.
 */
import { describe, expect, it } from 'vitest';
import { AggregationTable, type GroupEntry, type GroupState } from '../../lib/execution/aggregation-table.js';
import { CheckpointError } from '../../lib/errors/sluice-error.js';
import { MemoryStateStoreProvider } from '../../lib/state/memory-state-store.js';
import type { StateStore, StateStoreId } from '../../lib/state/state-store.js';
import { evict, snapshot, type Snapshot } from '../support/aggregation-table.js';

const id: StateStoreId = { operatorId: 0, storeName: 'default' };
const otherId: StateStoreId = { operatorId: 1, storeName: 'default' };

/** Keys: [label, event time in micros]; the table's event time is in ms. */
const key = (label: string, timeMs: number): unknown[] => [label, timeMs * 1000];

/** A table factory that counts how often it was called. */
function factory(): { create: () => AggregationTable; readonly calls: () => number } {
  let calls = 0;
  return {
    create: () => {
      calls++;
      return new AggregationTable(['string', 'long'], [false, false], (k) => (k[1] as number) / 1000, true);
    },
    calls: () => calls,
  };
}

function tableOf(store: StateStore<GroupState>, create: () => AggregationTable): AggregationTable {
  expect(store.ownTable).toBeTypeOf('function');
  return store.ownTable!(create);
}

/** Adds a group, or sets an existing group's state, as the operator does. */
function put(table: AggregationTable, keyValues: unknown[], value: number): GroupEntry {
  let entry = table.index.get(keyValues);
  if (entry === undefined) {
    entry = { keyValues, state: null, partial: null, encoded: null, touched: 0 };
    table.insert(entry);
  }
  table.setState(entry, [entry.keyValues, [value]]);
  return entry;
}



/** The table as of the store's version, including its time index (probed in a batch that is aborted). */
async function expectTableAt(provider: MemoryStateStoreProvider, storeId: StateStoreId, version: number, table: AggregationTable, expected: Snapshot): Promise<void> {
  const store = await provider.open<GroupState>(storeId, version);
  expect(tableOf(store, () => { throw new Error('the table must already exist'); })).toBe(table);
  expect(snapshot(table)).toEqual(expected);
  expect(table.size).toBe(expected.length);
  for (const [k, s] of expected) expect(JSON.stringify(table.index.get(JSON.parse(k) as unknown[])?.state)).toBe(s);
  expect(evict(table, Number.MAX_SAFE_INTEGER)).toEqual(expected.map(([k]) => k));
  expect(table.size).toBe(0);
  store.abort();
  expect(snapshot(table)).toEqual(expected);
  expect(table.size).toBe(expected.length);
}

describe('MemoryStateStore.ownTable: one table per store id, kept across opens', () => {
  it('returns the same table across opens of later versions and across a restart, creating it once', async () => {
    const provider = new MemoryStateStoreProvider();
    const f = factory();
    const s0 = await provider.open<GroupState>(id, 0);
    const table = tableOf(s0, f.create);
    expect(f.calls()).toBe(1);
    expect(tableOf(s0, f.create)).toBe(table);
    expect(f.calls()).toBe(1);
    put(table, key('a', 1), 1);
    put(table, key('b', 2), 2);
    expect(await s0.commit()).toBe(1);
    const v1 = snapshot(table);

    const s1 = await provider.open<GroupState>(id, 1);
    expect(tableOf(s1, f.create)).toBe(table);
    expect(f.calls()).toBe(1);
    expect(snapshot(table)).toEqual(v1);
    put(table, key('a', 1), 10);
    expect(await s1.commit()).toBe(2);
    const v2 = snapshot(table);

    // A query restart: the same provider opens the store again at the next version.
    const restarted = await provider.open<GroupState>(id, 2);
    const other = factory();
    expect(tableOf(restarted, other.create)).toBe(table);
    expect(other.calls()).toBe(0);
    expect(snapshot(table)).toEqual(v2);
    // The store's key-value view is the table's groups (inspection), as a key-value store would hold them.
    expect(restarted.size).toBe(table.size);
    expect([...restarted.entries()].map(([, v]) => JSON.stringify(v)).sort()).toEqual(snapshot(table).map(([k, s]) => JSON.stringify([JSON.parse(k), JSON.parse(s)])).sort());
    restarted.abort();
    await expectTableAt(provider, id, 2, table, v2);
  });

  it('two store ids get two tables, versioned independently', async () => {
    const provider = new MemoryStateStoreProvider();
    const fa = factory();
    const fb = factory();
    const a0 = await provider.open<GroupState>(id, 0);
    const b0 = await provider.open<GroupState>(otherId, 0);
    const ta = tableOf(a0, fa.create);
    const tb = tableOf(b0, fb.create);
    expect(ta).not.toBe(tb);
    expect(fa.calls()).toBe(1);
    expect(fb.calls()).toBe(1);
    put(ta, key('a', 1), 1);
    put(tb, key('b', 1), 2);
    await a0.commit();
    b0.abort(); // aborts b's table only
    expect(snapshot(ta)).toEqual([[JSON.stringify(key('a', 1)), JSON.stringify([key('a', 1), [1]])]]);
    expect(snapshot(tb)).toEqual([]);

    // Re-opening a's older version rolls back a's table only.
    const b1 = await provider.open<GroupState>(otherId, 0);
    put(tb, key('b', 1), 3);
    await b1.commit();
    const tbV1 = snapshot(tb);
    await provider.open<GroupState>(id, 0);
    expect(snapshot(ta)).toEqual([]);
    expect(snapshot(tb)).toEqual(tbV1);
    // The same operator id with another store name is another store.
    const c0 = await provider.open<GroupState>({ operatorId: 0, storeName: 'other' }, 0);
    const fc = factory();
    const tc = tableOf(c0, fc.create);
    expect(fc.calls()).toBe(1);
    expect(tc).not.toBe(ta);
    expect(tc).not.toBe(tb);
  });
});

describe('MemoryStateStore.ownTable: aborts', () => {
  it('abort() of the store undoes its table changes, including the time index', async () => {
    const provider = new MemoryStateStoreProvider();
    const f = factory();
    const s0 = await provider.open<GroupState>(id, 0);
    const table = tableOf(s0, f.create);
    put(table, key('a', 1), 1);
    put(table, key('b', 5), 2);
    await s0.commit();
    const v1 = snapshot(table);

    const s1 = await provider.open<GroupState>(id, 1);
    expect(tableOf(s1, f.create)).toBe(table);
    put(table, key('a', 1), 100); // a change
    put(table, key('c', 3), 3); // a new group
    expect(evict(table, 1)).toEqual([JSON.stringify(key('a', 1))]); // an eviction
    s1.put('kv', [['kv'], [1]]);
    s1.abort();
    expect(snapshot(table)).toEqual(v1);
    expect(table.size).toBe(2);
    expect(table.index.get(key('c', 3))).toBeUndefined();
    expect(table.index.get(key('a', 1))!.state).toEqual([key('a', 1), [1]]);
    expect(s1.get('kv')).toBeUndefined();
    // The aborted store can no longer use the table.
    expect(() => s1.ownTable!(f.create)).toThrow(CheckpointError);
    await expectTableAt(provider, id, 1, table, v1);

    // The batch runs again and commits version 2 on top of version 1.
    const again = await provider.open<GroupState>(id, 1);
    put(tableOf(again, f.create), key('d', 2), 4);
    expect(await again.commit()).toBe(2);
    const v2: Snapshot = [...v1, [JSON.stringify(key('d', 2)), JSON.stringify([key('d', 2), [4]])]];
    v2.sort((x, y) => (x[0] < y[0] ? -1 : 1));
    await expectTableAt(provider, id, 2, table, v2);
    expect(f.calls()).toBe(1);
  });

  it('a store superseded by a newer open of the same version gets its table changes aborted', async () => {
    const provider = new MemoryStateStoreProvider();
    const f = factory();
    const s0 = await provider.open<GroupState>(id, 0);
    const table = tableOf(s0, f.create);
    put(table, key('a', 1), 1);
    put(table, key('b', 2), 2);
    await s0.commit();
    const v1 = snapshot(table);

    const stale = await provider.open<GroupState>(id, 1);
    expect(tableOf(stale, f.create)).toBe(table);
    put(table, key('a', 1), 10);
    put(table, key('z', 9), 9);
    expect(evict(table, 2)).toEqual([JSON.stringify(key('a', 1)), JSON.stringify(key('b', 2))]);
    expect(table.size).toBe(1);

    // The last opener wins: the stale store's changes are gone.
    const winner = await provider.open<GroupState>(id, 1);
    expect(snapshot(table)).toEqual(v1);
    expect(table.size).toBe(2);
    expect(table.index.get(key('z', 9))).toBeUndefined();
    expect(() => stale.ownTable!(f.create)).toThrow(/Concurrent update/);
    expect(tableOf(winner, f.create)).toBe(table);
    expect(f.calls()).toBe(1);

    put(table, key('c', 3), 3);
    // The stale store's abort and commit do not touch the winner's pending changes.
    stale.abort();
    expect(table.index.get(key('c', 3))).toBeDefined();
    await expect(stale.commit()).rejects.toThrow(/Concurrent update/);
    expect(table.index.get(key('c', 3))).toBeDefined();
    expect(await winner.commit()).toBe(2);
    const v2 = snapshot(table);
    expect(v2.map(([k]) => k)).toEqual([key('a', 1), key('b', 2), key('c', 3)].map((k) => JSON.stringify(k)));
    await expectTableAt(provider, id, 2, table, v2);
  });

  it('a store superseded by an open of an older version: its changes are aborted, then the table rolls back', async () => {
    const provider = new MemoryStateStoreProvider();
    const f = factory();
    const s0 = await provider.open<GroupState>(id, 0);
    const table = tableOf(s0, f.create);
    put(table, key('a', 1), 1);
    await s0.commit();
    const v1 = snapshot(table);
    const s1 = await provider.open<GroupState>(id, 1);
    tableOf(s1, f.create);
    put(table, key('b', 2), 2);
    await s1.commit();

    const stale = await provider.open<GroupState>(id, 2);
    tableOf(stale, f.create);
    put(table, key('c', 3), 3);
    put(table, key('a', 1), 100);
    await provider.open<GroupState>(id, 1);
    expect(snapshot(table)).toEqual(v1);
    await expectTableAt(provider, id, 1, table, v1);
  });
});

describe('MemoryStateStore.ownTable: re-executing older versions', () => {
  it('re-opening version v-1 after committing v rolls the table back (with the key-value part)', async () => {
    const provider = new MemoryStateStoreProvider(10); // several versions back, beyond the default retention
    const f = factory();
    const history: Snapshot[] = [[]];
    let store = await provider.open<GroupState>(id, 0);
    let table = tableOf(store, f.create);
    for (let v = 1; v <= 4; v++) {
      put(table, key(`g${v}`, v), v);
      if (v > 1) put(table, key('g1', 1), 10 * v);
      if (v === 3) expect(evict(table, 2)).toEqual([JSON.stringify(key('g1', 1)), JSON.stringify(key('g2', 2))]);
      store.put('marker', [['marker'], [v]]);
      expect(await store.commit()).toBe(v);
      history.push(snapshot(table));
      store = await provider.open<GroupState>(id, v);
      expect(tableOf(store, f.create)).toBe(table);
    }
    store.abort();
    expect(history[4]!.map(([k]) => k)).toEqual(['g1', 'g3', 'g4'].map((g, i) => JSON.stringify(key(g, [1, 3, 4][i]!))));

    // v-1 after committing v
    const s3 = await provider.open<GroupState>(id, 3);
    expect(snapshot(table)).toEqual(history[3]);
    expect(s3.get('marker')).toEqual([['marker'], [3]]);
    s3.abort();
    await expectTableAt(provider, id, 3, table, history[3]!);
    // Further back, over an eviction: the evicted groups come back with their states.
    const s1 = await provider.open<GroupState>(id, 1);
    expect(snapshot(table)).toEqual(history[1]);
    expect(s1.get('marker')).toEqual([['marker'], [1]]);
    s1.abort();
    await expectTableAt(provider, id, 1, table, history[1]!);

    // Re-executed differently from version 1, then rolled back again.
    store = await provider.open<GroupState>(id, 1);
    table = tableOf(store, f.create);
    put(table, key('x', 7), 7);
    expect(await store.commit()).toBe(2);
    const redone = snapshot(table);
    expect(redone).toEqual([...history[1]!, [JSON.stringify(key('x', 7)), JSON.stringify([key('x', 7), [7]])]]);
    await expectTableAt(provider, id, 2, table, redone);
    await expectTableAt(provider, id, 0, table, []);
    expect(f.calls()).toBe(1);
  });

  it('a store first opened at a later version starts empty and can be rolled back to it', async () => {
    const provider = new MemoryStateStoreProvider();
    const f = factory();
    const s5 = await provider.open<GroupState>(id, 5);
    const table = tableOf(s5, f.create);
    put(table, key('a', 1), 1);
    expect(await s5.commit()).toBe(6);
    const v6 = snapshot(table);
    const s6 = await provider.open<GroupState>(id, 6);
    tableOf(s6, f.create);
    put(table, key('b', 2), 2);
    expect(await s6.commit()).toBe(7);
    await expectTableAt(provider, id, 6, table, v6);
    await expectTableAt(provider, id, 5, table, []);
    await expect(provider.open<GroupState>(id, 4)).rejects.toThrow(/not available/);
  });

  it('a table first used after earlier commits is empty before it existed, and the key-value part rolls back with it', async () => {
    const provider = new MemoryStateStoreProvider();
    const f = factory();
    const s0 = await provider.open<GroupState>(id, 0);
    s0.put('k', [1]);
    expect(await s0.commit()).toBe(1);
    const s1 = await provider.open<GroupState>(id, 1);
    const table = tableOf(s1, f.create);
    put(table, key('a', 1), 1);
    s1.put('k', [2]);
    expect(await s1.commit()).toBe(2);

    const again = await provider.open<GroupState>(id, 0);
    expect(again.get('k')).toBeUndefined();
    const fresh = tableOf(again, f.create);
    expect(fresh).not.toBe(table);
    expect(snapshot(fresh)).toEqual([]);
    expect(f.calls()).toBe(2);
    put(fresh, key('b', 2), 2);
    again.put('k', [3]);
    expect(await again.commit()).toBe(1);
    const s1b = await provider.open<GroupState>(id, 1);
    expect(s1b.get('k')).toEqual([3]);
    expect(tableOf(s1b, f.create)).toBe(fresh);
    expect(snapshot(fresh).map(([k]) => k)).toEqual([JSON.stringify(key('b', 2))]);
  });
});

describe('MemoryStateStore.ownTable: retention', () => {
  it('versions older than the retention are unavailable for the key-value part and for the table', async () => {
    const provider = new MemoryStateStoreProvider(2);
    const f = factory();
    const history: Snapshot[] = [[]];
    let table: AggregationTable | null = null;
    for (let v = 1; v <= 6; v++) {
      const store = await provider.open<GroupState>(id, v - 1);
      table = tableOf(store, f.create);
      put(table, key(`g${v}`, v), v);
      if (v % 2 === 0) put(table, key('g1', 1), 100 + v);
      store.put('marker', [['marker'], [v]]);
      expect(await store.commit()).toBe(v);
      history.push(snapshot(table));
    }
    // Retention 2 keeps between 2 and 3 older versions: after version 6, versions 4 to 6.
    const latest = history[6]!;
    for (const old of [0, 1, 2, 3]) {
      await expect(provider.open<GroupState>(id, old)).rejects.toThrow(/not available/);
      await expect(provider.open<GroupState>(id, old)).rejects.toThrow(CheckpointError);
      // A refused open leaves the table as it was.
      expect(snapshot(table!)).toEqual(latest);
    }
    await expectTableAt(provider, id, 6, table!, latest);
    const s5 = await provider.open<GroupState>(id, 5);
    expect(s5.get('marker')).toEqual([['marker'], [5]]);
    expect(snapshot(table!)).toEqual(history[5]);
    s5.abort();
    const s4 = await provider.open<GroupState>(id, 4);
    expect(s4.get('marker')).toEqual([['marker'], [4]]);
    expect(snapshot(table!)).toEqual(history[4]);
    s4.abort();
    await expectTableAt(provider, id, 4, table!, history[4]!);
    // The table itself has forgotten how to go back to version 3.
    expect(() => table!.rollBackTo(3)).toThrow(/can no longer be rolled back/);
    expect(snapshot(table!)).toEqual(history[4]);
    await expect(provider.open<GroupState>(id, 3)).rejects.toThrow(/not available/);
    expect(f.calls()).toBe(1);
  });

  it('over many batches the table keeps only what the retention needs', async () => {
    const provider = new MemoryStateStoreProvider(2);
    const f = factory();
    const history: Snapshot[] = [[]];
    let table: AggregationTable | null = null;
    for (let v = 1; v <= 20; v++) {
      const store = await provider.open<GroupState>(id, v - 1);
      table = tableOf(store, f.create);
      put(table, key(`g${v % 5}`, v), v);
      if (v % 3 === 0) evict(table, v - 4);
      expect(await store.commit()).toBe(v);
      history.push(snapshot(table));
    }
    // After version 20 (Spark's retention, 2 versions): 18 to 20 are available, 17 is not.
    await expect(provider.open<GroupState>(id, 17)).rejects.toThrow(/not available/);
    expect(snapshot(table!)).toEqual(history[20]);
    await expectTableAt(provider, id, 19, table!, history[19]!);
    await expectTableAt(provider, id, 18, table!, history[18]!);
    expect(() => table!.rollBackTo(17)).toThrow(/can no longer be rolled back/);
    expect(() => table!.rollBackTo(10)).toThrow(/can no longer be rolled back/);
    expect(snapshot(table!)).toEqual(history[18]);
  });
});
