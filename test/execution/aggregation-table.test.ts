/**
 * AggregationTable: a streaming aggregation's groups, indexed by key values and by event time.
 * Versioned mode records undo logs so that a state store can commit, abort and roll it back; cache
 * mode records nothing.
 */
import { describe, expect, it } from 'vitest';
import { AggregationTable, type GroupEntry, type GroupState } from '../../lib/execution/aggregation-table.js';
import { WINDOW_STRUCT, type DataType } from '../../lib/plan/data-types.js';
import { evict, snapshot, type Snapshot } from '../support/aggregation-table.js';
import { createPrng } from '../../lib/local/sample-events.js';

// ---------------------------------------------------------------------------------------------
// Key shapes

interface Shape {
  readonly name: string;
  readonly keyTypes: readonly DataType[];
  readonly windowKeys: readonly boolean[];
  /** The table's keyEventTimeMs. */
  readonly timeMs: (k: readonly unknown[]) => number;
  /** The key column timeMs reads (with a window first, eviction drops the window's level at once). */
  readonly timeKeyIndex: number;
  /** A fresh key-values array (a new object each call, so lookups are by value). */
  readonly key: (group: number, time: number) => unknown[];
}

const MS = 1000; // micros per ms
const LABELS = ['a', 'b', 'c', 'd'];

/** ['string', 'long']: the long is an event time in micros. */
const STRING_LONG: Shape = {
  name: "['string','long']",
  keyTypes: ['string', 'long'],
  windowKeys: [false, false],
  timeMs: (k) => (k[1] as number) / MS,
  timeKeyIndex: 1,
  key: (group, time) => [LABELS[group % LABELS.length]!, time * MS],
};

/** [window, 'string']: a one-second tumbling window; its event time is its end. */
const WINDOW_STRING: Shape = {
  name: "[window,'string']",
  keyTypes: [WINDOW_STRUCT, 'string'],
  windowKeys: [true, false],
  timeMs: (k) => (k[0] as { end: number }).end / 1000,
  timeKeyIndex: 0,
  key: (group, time) => [{ start: time * 1_000_000, end: (time + 1) * 1_000_000 }, LABELS[group % LABELS.length]!],
};

/** Three columns (the nested index). */
const STRING_LONG_BOOL: Shape = {
  name: "['string','long','boolean']",
  keyTypes: ['string', 'long', 'boolean'],
  windowKeys: [false, false, false],
  timeMs: (k) => (k[1] as number) / MS,
  timeKeyIndex: 1,
  key: (group, time) => [LABELS[group % LABELS.length]!, time * MS, group % 2 === 0],
};

const newTable = (shape: Shape, versioned = true): AggregationTable =>
  new AggregationTable(shape.keyTypes, shape.windowKeys, shape.timeMs, versioned, undefined, shape.timeKeyIndex);

const newEntry = (keyValues: unknown[]): GroupEntry => ({ keyValues, state: null, partial: null, encoded: null, touched: 0 });
const stateOf = (entry: GroupEntry, ...buffers: unknown[]): GroupState => [entry.keyValues, buffers];

/** Inserts a new group with a state, as the operator does for a group new in the batch. */
function add(table: AggregationTable, keyValues: unknown[], ...buffers: unknown[]): GroupEntry {
  const entry = newEntry(keyValues);
  table.insert(entry);
  table.setState(entry, stateOf(entry, ...buffers));
  return entry;
}



const keysOf = (s: Snapshot): string[] => s.map(([k]) => k);

// ---------------------------------------------------------------------------------------------

describe('AggregationTable (versioned): insert, setState, evictUpTo, commit', () => {
  it('indexes inserted groups by value, counts them, and evicts exactly the closed ones', () => {
    const shape = STRING_LONG;
    const table = newTable(shape);
    expect(table.versioned).toBe(true);
    expect(table.size).toBe(0);
    const a1 = add(table, shape.key(0, 1), 10);
    const b1 = add(table, shape.key(1, 1), 20);
    const a2 = add(table, shape.key(0, 2), 30);
    const c5 = add(table, shape.key(2, 5), 40);
    expect(table.size).toBe(4);
    expect(table.index.get(shape.key(0, 1))).toBe(a1);
    expect(table.index.get(shape.key(1, 1))).toBe(b1);
    expect(table.index.get(shape.key(0, 2))).toBe(a2);
    expect(table.index.get(shape.key(2, 5))).toBe(c5);
    expect(table.index.get(shape.key(3, 1))).toBeUndefined();
    expect(a1.state).toEqual([['a', 1000], [10]]);

    table.setState(a1, stateOf(a1, 11));
    expect(table.index.get(shape.key(0, 1))!.state).toEqual([['a', 1000], [11]]);
    table.commit(1);

    // Nothing is at or before 0 ms; 1 ms closes the two groups at 1 ms only.
    expect(evict(table, 0)).toEqual([]);
    expect(evict(table, 1)).toEqual([JSON.stringify(['a', 1000]), JSON.stringify(['b', 1000])]);
    expect(table.size).toBe(2);
    expect(table.index.get(shape.key(0, 1))).toBeUndefined();
    expect(table.index.get(shape.key(1, 1))).toBeUndefined();
    expect(table.index.get(shape.key(0, 2))).toBe(a2);
    // Evicted groups are not visited again.
    expect(evict(table, 2)).toEqual([JSON.stringify(['a', 2000])]);
    expect(evict(table, 4)).toEqual([]);
    table.commit(2);
    expect(table.size).toBe(1);
    expect(snapshot(table)).toEqual([[JSON.stringify(['c', 5000]), JSON.stringify([['c', 5000], [40]])]]);
  });

  it('window keys: looked up by value, evicted by window end', () => {
    const shape = WINDOW_STRING;
    const table = newTable(shape);
    const w0a = add(table, shape.key(0, 0), 1); // window [0 s, 1 s): event time 1000 ms
    const w0b = add(table, shape.key(1, 0), 2);
    const w3a = add(table, shape.key(0, 3), 3); // window [3 s, 4 s): event time 4000 ms
    table.commit(1);
    expect(table.index.get(shape.key(0, 0))).toBe(w0a);
    expect(table.index.get(shape.key(1, 0))).toBe(w0b);
    expect(table.index.get(shape.key(0, 3))).toBe(w3a);
    expect(table.index.get(shape.key(1, 3))).toBeUndefined();
    // The window [0 s, 1 s) closes at 1000 ms, not before.
    expect(evict(table, 999)).toEqual([]);
    expect(evict(table, 1000)).toEqual([JSON.stringify(shape.key(0, 0)), JSON.stringify(shape.key(1, 0))].sort());
    expect(table.size).toBe(1);
    expect(table.index.get(shape.key(0, 0))).toBeUndefined();
    expect(evict(table, 3999)).toEqual([]);
    expect(evict(table, 4000)).toEqual([JSON.stringify(shape.key(0, 3))]);
    expect(table.size).toBe(0);
  });

  it('without an event-time key, evictUpTo visits nothing and removes nothing', () => {
    const table = new AggregationTable(['string'], [false], null, true);
    const e = add(table, ['x'], 1);
    let visits = 0;
    table.evictUpTo(Number.MAX_SAFE_INTEGER, () => visits++);
    expect(visits).toBe(0);
    expect(table.size).toBe(1);
    expect(table.index.get(['x'])).toBe(e);
    table.abort();
    expect(table.size).toBe(0);
    expect(table.index.get(['x'])).toBeUndefined();
  });
});

describe('AggregationTable (versioned): abort', () => {
  for (const shape of [STRING_LONG, WINDOW_STRING]) {
    it(`${shape.name}: undoes inserts, state changes and evictions since the last commit`, () => {
      const table = newTable(shape);
      const g1 = add(table, shape.key(0, 1), 1);
      const g2 = add(table, shape.key(1, 2), 2);
      const g3 = add(table, shape.key(2, 3), 3);
      table.commit(1);
      const committed = snapshot(table);
      const g1State = g1.state;

      // A batch: a new group, a changed group, a group changed then evicted, an inserted group evicted.
      const g4 = add(table, shape.key(3, 4), 4);
      table.setState(g1, stateOf(g1, 100));
      table.setState(g1, stateOf(g1, 101));
      table.setState(g2, stateOf(g2, 200));
      const g0 = add(table, shape.key(3, 0), 0);
      expect(evict(table, shape.timeMs(shape.key(0, 2)))).toEqual(
        [g0, g1, g2].map((e) => JSON.stringify(e.keyValues)).sort(),
      );
      const g1again = add(table, shape.key(0, 1), 999); // the evicted key comes back as a new group
      expect(table.size).toBe(3);
      expect(table.index.get(shape.key(0, 1))).toBe(g1again);

      table.abort();
      expect(snapshot(table)).toEqual(committed);
      expect(table.size).toBe(3);
      expect(table.index.get(shape.key(0, 1))).toBe(g1);
      expect(g1.state).toBe(g1State);
      expect(table.index.get(shape.key(1, 2))).toBe(g2);
      expect(g2.state).toEqual(stateOf(g2, 2));
      expect(table.index.get(shape.key(2, 3))).toBe(g3);
      expect(table.index.get(shape.key(3, 4))).toBeUndefined();
      expect(table.index.get(shape.key(3, 0))).toBeUndefined();
      void g4;

      // The time index holds exactly the groups that exist, once each.
      expect(evict(table, Number.MAX_SAFE_INTEGER)).toEqual(keysOf(committed));
      expect(table.size).toBe(0);
      table.abort();
      expect(snapshot(table)).toEqual(committed);
      expect(table.size).toBe(3);
    });
  }

  it('after abort, evictUpTo neither visits aborted groups nor misses restored ones', () => {
    const shape = STRING_LONG;
    const table = newTable(shape);
    add(table, shape.key(0, 5), 1);
    table.commit(1);
    add(table, shape.key(1, 1), 2); // aborted: must not be evicted later
    expect(evict(table, 5)).toEqual([JSON.stringify(shape.key(0, 5)), JSON.stringify(shape.key(1, 1))].sort());
    table.abort();
    expect(table.size).toBe(1);
    expect(evict(table, 1)).toEqual([]);
    expect(evict(table, 5)).toEqual([JSON.stringify(shape.key(0, 5))]);
    expect(table.size).toBe(0);
    table.commit(2);
    // A group inserted after the abort is indexed once, as is the restored one.
    table.rollBackTo(1);
    add(table, shape.key(2, 5), 3);
    expect(evict(table, 5)).toEqual([JSON.stringify(shape.key(0, 5)), JSON.stringify(shape.key(2, 5))].sort());
    expect(table.size).toBe(0);
  });

  it('abort with nothing to undo leaves the table as committed', () => {
    const shape = STRING_LONG;
    const table = newTable(shape);
    table.abort();
    expect(table.size).toBe(0);
    add(table, shape.key(0, 1), 1);
    table.commit(1);
    table.abort();
    table.abort();
    expect(table.size).toBe(1);
    expect(evict(table, 1)).toEqual([JSON.stringify(shape.key(0, 1))]);
  });
});

describe('AggregationTable (versioned): rollBackTo and forgetBefore', () => {
  for (const shape of [STRING_LONG, WINDOW_STRING]) {
    it(`${shape.name}: rolling back over several versions restores each one exactly`, () => {
      const table = newTable(shape);
      const history = new Map<number, Snapshot>([[0, []]]);
      const entries = new Map<string, GroupEntry>();
      /** Evicts the groups whose key time is at or before time index t. */
      const closeUpTo = (t: number): string[] => evict(table, shape.timeMs(shape.key(0, t)));
      const put = (group: number, time: number, value: number): void => {
        const k = JSON.stringify(shape.key(group, time));
        const existing = table.index.get(shape.key(group, time));
        if (existing) table.setState(existing, stateOf(existing, value));
        else entries.set(k, add(table, shape.key(group, time), value));
      };
      // v1: four groups
      put(0, 1, 1); put(1, 1, 2); put(2, 3, 3); put(3, 6, 4);
      table.commit(1);
      history.set(1, snapshot(table));
      // v2: changes, a new group, evicts time 1
      put(0, 1, 10); put(2, 3, 30); put(0, 7, 5);
      closeUpTo(1);
      table.commit(2);
      history.set(2, snapshot(table));
      // v3: a key evicted in v2 comes back; another eviction
      put(0, 1, 100); put(3, 6, 40);
      closeUpTo(3);
      table.commit(3);
      history.set(3, snapshot(table));
      // v4: everything up to 6 ms is evicted, one change
      put(0, 7, 50);
      closeUpTo(6);
      table.commit(4);
      history.set(4, snapshot(table));
      expect(history.get(4)).toEqual([[JSON.stringify(shape.key(0, 7)), JSON.stringify([shape.key(0, 7), [50]])]]);

      const check = (v: number): void => {
        const expected = history.get(v)!;
        expect(snapshot(table)).toEqual(expected);
        expect(table.size).toBe(expected.length);
        for (const [k, s] of expected) {
          const keyValues = JSON.parse(k) as unknown[];
          expect(JSON.stringify(table.index.get(keyValues)?.state)).toBe(s);
        }
        for (const [k] of history.get(1)!.concat(history.get(2)!, history.get(3)!)) {
          if (!expected.some(([e]) => e === k)) expect(table.index.get(JSON.parse(k) as unknown[])).toBeUndefined();
        }
      };

      table.rollBackTo(4); // no-op: already there
      check(4);
      table.rollBackTo(2);
      check(2);
      table.rollBackTo(2);
      check(2);
      // The time index after the rollback: exactly v2's groups, then put back.
      expect(evict(table, Number.MAX_SAFE_INTEGER)).toEqual(keysOf(history.get(2)!));
      table.abort();
      check(2);
      expect(closeUpTo(1)).toEqual([]);
      expect(closeUpTo(3)).toEqual(keysOf(history.get(2)!).filter((k) => shape.timeMs(JSON.parse(k) as unknown[]) <= shape.timeMs(shape.key(0, 3))));
      table.abort();
      check(2);

      // Re-executing version 3 differently, then rolling back below it.
      put(1, 8, 7);
      table.commit(3);
      history.set(3, snapshot(table));
      table.rollBackTo(1);
      check(1);
      table.rollBackTo(0);
      check(0);
      expect(evict(table, Number.MAX_SAFE_INTEGER)).toEqual([]);
    });
  }

  it('forgetBefore(v): rolling back to v still works, below v throws', () => {
    const shape = STRING_LONG;
    const make = (): AggregationTable => {
      const table = newTable(shape);
      for (let v = 1; v <= 5; v++) {
        add(table, shape.key(v, v), v);
        table.commit(v);
      }
      table.forgetBefore(3);
      return table;
    };
    const t1 = make();
    expect(() => t1.rollBackTo(2)).toThrow(/can no longer be rolled back/);
    const t2 = make();
    expect(() => t2.rollBackTo(0)).toThrow(/can no longer be rolled back/);
    const t3 = make();
    t3.rollBackTo(3);
    expect(t3.size).toBe(3);
    expect(t3.index.get(shape.key(4, 4))).toBeUndefined();
    expect(t3.index.get(shape.key(3, 3))).toBeDefined();
    // Version 3's own log was forgotten: going below it now throws as well.
    expect(() => t3.rollBackTo(2)).toThrow(/can no longer be rolled back/);
  });

  it('a refused rollBackTo leaves the table at its version, still able to roll back within what is retained', () => {
    const shape = STRING_LONG;
    const table = newTable(shape);
    for (let v = 1; v <= 5; v++) {
      add(table, shape.key(v, v), v);
      table.commit(v);
    }
    const v5 = snapshot(table);
    table.forgetBefore(3);
    expect(() => table.rollBackTo(2)).toThrow(/can no longer be rolled back/);
    // Refused: nothing was undone.
    expect(snapshot(table)).toEqual(v5);
    expect(table.size).toBe(5);
    // Version 3 is retained, so it can still be rolled back to.
    table.rollBackTo(3);
    expect(table.size).toBe(3);
    expect(evict(table, Number.MAX_SAFE_INTEGER)).toHaveLength(3);
  });
});

describe('AggregationTable (cache mode)', () => {
  it('records nothing: abort and rollBackTo are no-ops, eviction still works', () => {
    const shape = STRING_LONG;
    const table = newTable(shape, false);
    expect(table.versioned).toBe(false);
    expect(table.forVersion).toBe(-1);
    const a = add(table, shape.key(0, 1), 1);
    const b = add(table, shape.key(1, 2), 2);
    table.commit(1); // no-op
    table.setState(a, stateOf(a, 10));
    add(table, shape.key(2, 3), 3);
    table.abort();
    expect(table.size).toBe(3);
    expect(a.state).toEqual(stateOf(a, 10));
    expect(table.index.get(shape.key(2, 3))).toBeDefined();
    table.rollBackTo(0);
    expect(table.size).toBe(3);
    table.forgetBefore(5);
    expect(() => table.rollBackTo(0)).not.toThrow();

    expect(evict(table, 2)).toEqual([JSON.stringify(shape.key(0, 1)), JSON.stringify(shape.key(1, 2))]);
    table.abort();
    expect(table.size).toBe(1);
    expect(table.index.get(shape.key(0, 1))).toBeUndefined();
    expect(table.index.get(shape.key(1, 2))).toBeUndefined();
    expect(b.state).toEqual(stateOf(b, 2));
    expect(snapshot(table)).toEqual([[JSON.stringify(shape.key(2, 3)), JSON.stringify([shape.key(2, 3), [3]])]]);
  });
});

describe('AggregationTable.nextBatchStamp', () => {
  it('is strictly increasing, across commits, aborts and rollbacks', () => {
    const shape = STRING_LONG;
    for (const versioned of [true, false]) {
      const table = newTable(shape, versioned);
      const stamps: number[] = [];
      let version = 0;
      for (let i = 0; i < 20; i++) {
        stamps.push(table.nextBatchStamp());
        add(table, shape.key(i, i), i);
        if (i % 3 === 0) table.abort();
        else table.commit(++version);
        if (i % 5 === 4) {
          table.rollBackTo(0);
          version = 0;
        }
      }
      for (let i = 1; i < stamps.length; i++) expect(stamps[i]!).toBeGreaterThan(stamps[i - 1]!);
      // A stamp is never the initial `touched` of a new entry (0).
      expect(stamps[0]!).toBeGreaterThan(0);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Randomized differential test against a model


/** The model: key JSON → state JSON. */
type Model = Map<string, string>;

function differential(shape: Shape, seed: number, ops: number): void {
  const rand = createPrng(seed);
  const int = (n: number): number => Math.floor(rand() * n);
  const table = newTable(shape);
  const GROUPS = 4;
  const TIMES = 8;
  const allKeys: unknown[][] = [];
  for (let g = 0; g < GROUPS; g++) for (let t = 0; t < TIMES; t++) allKeys.push(shape.key(g, t));
  const timeOf = new Map(allKeys.map((k) => [JSON.stringify(k), shape.timeMs(k)]));

  /** An eviction time: at, between or around the keys' event times. */
  const threshold = (): number => shape.timeMs(shape.key(0, int(TIMES + 2) - 1)) + (rand() < 0.3 ? -1 : 0);

  let model: Model = new Map();
  const committed = new Map<number, Model>([[0, new Map()]]);
  let version = 0;
  let oldestRetained = 0;
  let counter = 0;
  const trace: string[] = [];

  const modelSnapshot = (m: Model): Snapshot => [...m].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));

  const checkAgainstModel = (): void => {
    const where = `seed ${seed}, after: ${trace.slice(-6).join(' ; ')}`;
    expect(table.size, where).toBe(model.size);
    expect(snapshot(table), where).toEqual(modelSnapshot(model));
    for (const k of allKeys) {
      const json = JSON.stringify(k);
      const entry = table.index.get(JSON.parse(json) as unknown[]); // a fresh copy: lookups by value
      if (model.has(json)) {
        expect(entry, where).toBeDefined();
        expect(JSON.stringify(entry!.keyValues), where).toBe(json);
        expect(JSON.stringify(entry!.state), where).toBe(model.get(json));
      } else {
        expect(entry, where).toBeUndefined();
      }
    }
  };

  /** Probes the time index with an eviction, then aborts it (only when nothing is pending). */
  const probeTimeIndex = (): void => {
    const where = `seed ${seed}, probe after: ${trace.slice(-6).join(' ; ')}`;
    const t = threshold();
    const expected = [...model.keys()].filter((k) => timeOf.get(k)! <= t).sort();
    expect(evict(table, t), where).toEqual(expected);
    expect(table.size, where).toBe(model.size - expected.length);
    table.abort();
    checkAgainstModel();
  };

  for (let i = 0; i < ops; i++) {
    const r = rand();
    if (r < 0.3) {
      // Insert a new group and give it a state, as the operator does within a batch (a state of
      // null means "new in this batch", so a group is never committed without one).
      const absent = allKeys.filter((k) => !model.has(JSON.stringify(k)));
      if (absent.length === 0) continue;
      const k = absent[int(absent.length)]!;
      const entry = newEntry(JSON.parse(JSON.stringify(k)) as unknown[]);
      table.insert(entry);
      table.setState(entry, stateOf(entry, ++counter));
      model.set(JSON.stringify(k), JSON.stringify(entry.state));
      trace.push(`insert ${JSON.stringify(k)}`);
    } else if (r < 0.5) {
      // Change an existing group's state (possibly twice in a batch).
      const present = [...model.keys()];
      if (present.length === 0) continue;
      const json = present[int(present.length)]!;
      const entry = table.index.get(JSON.parse(json) as unknown[])!;
      table.setState(entry, stateOf(entry, ++counter));
      model.set(json, JSON.stringify(entry.state));
      trace.push(`setState ${json}`);
    } else if (r < 0.62) {
      const t = threshold();
      const expected = [...model.keys()].filter((k) => timeOf.get(k)! <= t).sort();
      trace.push(`evictUpTo ${t}`);
      expect(evict(table, t), `seed ${seed}, ${trace.slice(-6).join(' ; ')}`).toEqual(expected);
      for (const k of expected) model.delete(k);
    } else if (r < 0.8) {
      version++;
      table.commit(version);
      committed.set(version, new Map(model));
      trace.push(`commit ${version}`);
      if (rand() < 0.15 && version - oldestRetained > 3) {
        oldestRetained = version - 1 - int(3);
        table.forgetBefore(oldestRetained);
        for (const v of [...committed.keys()]) if (v < oldestRetained) committed.delete(v);
        trace.push(`forgetBefore ${oldestRetained}`);
      }
    } else if (r < 0.9) {
      table.abort();
      model = new Map(committed.get(version)!);
      trace.push('abort');
    } else {
      // A re-executed batch: the store aborts what is pending, then rolls back.
      const target = oldestRetained + int(version - oldestRetained + 1);
      table.abort();
      table.rollBackTo(target);
      for (const v of [...committed.keys()]) if (v > target) committed.delete(v);
      version = target;
      model = new Map(committed.get(version)!);
      trace.push(`rollBackTo ${target}`);
    }
    checkAgainstModel();
    const last = trace[trace.length - 1] ?? '';
    if ((last.startsWith('commit') || last === 'abort' || last.startsWith('rollBackTo')) && rand() < 0.5) probeTimeIndex();
  }
  // Finally, every retained version can still be rolled back to, newest first.
  table.abort();
  for (let v = version; v >= oldestRetained; v--) {
    table.rollBackTo(v);
    model = new Map(committed.get(v)!);
    checkAgainstModel();
    const expected = [...model.keys()].sort();
    expect(evict(table, Number.MAX_SAFE_INTEGER)).toEqual(expected);
    table.abort();
  }
}

describe('AggregationTable: randomized differential test against a model', () => {
  for (const shape of [STRING_LONG, WINDOW_STRING, STRING_LONG_BOOL]) {
    for (const seed of [1, 2, 3, 42, 2026]) {
      it(`${shape.name}, seed ${seed}: 400 random operations`, () => {
        differential(shape, seed, 400);
      });
    }
  }
});
