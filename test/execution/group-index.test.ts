/**
 * createGroupIndex: a grouping-key → entry index with Spark's grouping equality (NULL is one group,
 * -0 and 0 are one group, NaN equals NaN, structs and arrays by value, a window by its start).
 */
import { describe, expect, it } from 'vitest';
import { createGroupIndex, type GroupIndex } from '../../lib/execution/group-index.js';
import { arrayOf, structOf, type DataType, type StructType } from '../../lib/plan/data-types.js';
import { createPrng } from '../../lib/local/sample-events.js';

const WINDOW: StructType = { kind: 'struct', fields: [{ name: 'start', type: 'timestamp' }, { name: 'end', type: 'timestamp' }] };
const POINT: StructType = structOf([{ name: 'x', type: 'long' }, { name: 'label', type: 'string' }]);
const LONGS = arrayOf('long');
const DOUBLES = arrayOf('double');

interface Entry { readonly id: string }
const entry = (id: string): Entry => ({ id });

describe('createGroupIndex: arity 0 (a global aggregation)', () => {
  it('holds one entry for the empty key', () => {
    const index = createGroupIndex<Entry>([]);
    expect(index.get([])).toBeUndefined();
    const e = entry('all');
    index.set([], e);
    expect(index.get([])).toBe(e);
    const replacement = entry('again');
    index.set([], replacement);
    expect(index.get([])).toBe(replacement);
    index.delete([]);
    expect(index.get([])).toBeUndefined();
    index.set([], e);
    index.clear();
    expect(index.get([])).toBeUndefined();
  });
});

describe('createGroupIndex: get/set/delete/clear', () => {
  it('arity 1: distinct keys, overwrite, delete one, clear all', () => {
    const index = createGroupIndex<Entry>(['string']);
    const a = entry('a');
    const b = entry('b');
    index.set(['a'], a);
    index.set(['b'], b);
    expect(index.get(['a'])).toBe(a);
    expect(index.get(['b'])).toBe(b);
    expect(index.get(['c'])).toBeUndefined();
    const a2 = entry('a2');
    index.set(['a'], a2);
    expect(index.get(['a'])).toBe(a2);
    index.delete(['a']);
    expect(index.get(['a'])).toBeUndefined();
    expect(index.get(['b'])).toBe(b);
    index.delete(['never set']);
    expect(index.get(['b'])).toBe(b);
    index.clear();
    expect(index.get(['b'])).toBeUndefined();
    index.set(['b'], a);
    expect(index.get(['b'])).toBe(a);
  });

  it('arity 2: the second column distinguishes groups under the same first value', () => {
    const index = createGroupIndex<Entry>(['string', 'long']);
    const e1 = entry('a/1');
    const e2 = entry('a/2');
    const e3 = entry('b/1');
    index.set(['a', 1], e1);
    index.set(['a', 2], e2);
    index.set(['b', 1], e3);
    expect(index.get(['a', 1])).toBe(e1);
    expect(index.get(['a', 2])).toBe(e2);
    expect(index.get(['b', 1])).toBe(e3);
    expect(index.get(['b', 2])).toBeUndefined();
    expect(index.get(['c', 1])).toBeUndefined();
    index.delete(['a', 1]);
    expect(index.get(['a', 1])).toBeUndefined();
    expect(index.get(['a', 2])).toBe(e2);
    index.delete(['c', 9]);
    index.delete(['a', 9]);
    expect(index.get(['a', 2])).toBe(e2);
    index.clear();
    expect(index.get(['a', 2])).toBeUndefined();
    expect(index.get(['b', 1])).toBeUndefined();
  });

  it('arity 3 and 4 (nested levels): every column distinguishes groups', () => {
    const index = createGroupIndex<Entry>(['string', 'long', 'boolean']);
    const keys: [string, number, boolean][] = [['a', 1, true], ['a', 1, false], ['a', 2, true], ['b', 1, true]];
    const entries = keys.map((k) => entry(JSON.stringify(k)));
    keys.forEach((k, i) => index.set(k, entries[i]!));
    keys.forEach((k, i) => expect(index.get(k)).toBe(entries[i]));
    expect(index.get(['b', 1, false])).toBeUndefined();
    expect(index.get(['b', 2, true])).toBeUndefined();
    expect(index.get(['c', 1, true])).toBeUndefined();
    index.delete(['a', 1, true]);
    expect(index.get(['a', 1, true])).toBeUndefined();
    expect(index.get(['a', 1, false])).toBe(entries[1]);
    expect(index.get(['a', 2, true])).toBe(entries[2]);
    index.delete(['z', 1, true]);
    index.delete(['a', 7, true]);
    expect(index.get(['a', 2, true])).toBe(entries[2]);
    index.clear();
    keys.forEach((k) => expect(index.get(k)).toBeUndefined());

    const four = createGroupIndex<Entry>(['string', 'long', 'string', 'double']);
    const x = entry('x');
    const y = entry('y');
    four.set(['p', 1, 'q', 1.5], x);
    four.set(['p', 1, 'q', 2.5], y);
    expect(four.get(['p', 1, 'q', 1.5])).toBe(x);
    expect(four.get(['p', 1, 'q', 2.5])).toBe(y);
    expect(four.get(['p', 1, 'r', 1.5])).toBeUndefined();
    four.delete(['p', 1, 'q', 1.5]);
    expect(four.get(['p', 1, 'q', 1.5])).toBeUndefined();
    expect(four.get(['p', 1, 'q', 2.5])).toBe(y);
  });
});

describe('createGroupIndex: Spark grouping equality', () => {
  const arities: DataType[][] = [['double'], ['string', 'double'], ['string', 'long', 'double']];

  for (const types of arities) {
    const prefix = (types.length === 1 ? [] : types.length === 2 ? ['k'] : ['k', 7]) as unknown[];
    const key = (v: unknown): unknown[] => [...prefix, v];

    it(`arity ${types.length}: NULL and undefined are the same group, distinct from every value`, () => {
      const index = createGroupIndex<Entry>(types);
      const nulls = entry('null');
      index.set(key(null), nulls);
      expect(index.get(key(undefined))).toBe(nulls);
      expect(index.get(key(0))).toBeUndefined();
      expect(index.get(key(Number.NaN))).toBeUndefined();
      const zero = entry('zero');
      index.set(key(0), zero);
      expect(index.get(key(null))).toBe(nulls);
      index.delete(key(undefined));
      expect(index.get(key(null))).toBeUndefined();
      expect(index.get(key(0))).toBe(zero);
    });

    it(`arity ${types.length}: -0 and 0 are one group; NaN equals NaN`, () => {
      const index = createGroupIndex<Entry>(types);
      const zero = entry('0');
      index.set(key(-0), zero);
      expect(index.get(key(0))).toBe(zero);
      const nan = entry('NaN');
      index.set(key(Number.NaN), nan);
      expect(index.get(key(0 / 0))).toBe(nan);
      expect(index.get(key(Math.sqrt(-1)))).toBe(nan);
      expect(index.get(key(0))).toBe(zero);
      index.delete(key(0));
      expect(index.get(key(-0))).toBeUndefined();
      expect(index.get(key(Number.NaN))).toBe(nan);
    });
  }

  it('a NULL in the first of several columns is its own group at that level', () => {
    const index = createGroupIndex<Entry>(['string', 'string', 'long']);
    const e = entry('null/a/1');
    index.set([null, 'a', 1], e);
    expect(index.get([undefined, 'a', 1])).toBe(e);
    expect(index.get(['null', 'a', 1])).toBeUndefined();
    expect(index.get(['', 'a', 1])).toBeUndefined();
    expect(index.get([null, 'a', null])).toBeUndefined();
  });

  it('the string "null" and the empty string are not NULL', () => {
    const index = createGroupIndex<Entry>(['string']);
    const n = entry('NULL');
    index.set([null], n);
    expect(index.get(['null'])).toBeUndefined();
    expect(index.get([''])).toBeUndefined();
    const s = entry('"null"');
    index.set(['null'], s);
    expect(index.get([null])).toBe(n);
    expect(index.get(['null'])).toBe(s);
  });

  it('windows with the same start are the same group (a window is its start); NULL window is its own group', () => {
    for (const types of [[WINDOW], [WINDOW, 'string'], [WINDOW, 'string', 'long']] as DataType[][]) {
      const index = createGroupIndex<Entry>(types);
      const rest = types.slice(1).map((t) => (t === 'string' ? 'k' : 1));
      const w0 = entry('w0');
      const w1 = entry('w1');
      index.set([{ start: 0, end: 10_000_000 }, ...rest], w0);
      index.set([{ start: 10_000_000, end: 20_000_000 }, ...rest], w1);
      // A different struct instance for the same window finds the same group.
      expect(index.get([{ start: 0, end: 10_000_000 }, ...rest])).toBe(w0);
      expect(index.get([{ start: 10_000_000, end: 20_000_000 }, ...rest])).toBe(w1);
      expect(index.get([{ start: 20_000_000, end: 30_000_000 }, ...rest])).toBeUndefined();
      expect(index.get([null, ...rest])).toBeUndefined();
      const nullWindow = entry('null window');
      index.set([undefined, ...rest], nullWindow);
      expect(index.get([null, ...rest])).toBe(nullWindow);
      expect(index.get([{ start: 0, end: 10_000_000 }, ...rest])).toBe(w0);
      index.delete([{ start: 0, end: 10_000_000 }, ...rest]);
      expect(index.get([{ start: 0, end: 10_000_000 }, ...rest])).toBeUndefined();
      expect(index.get([{ start: 10_000_000, end: 20_000_000 }, ...rest])).toBe(w1);
    }
  });

  it('struct keys compare by value, field by field', () => {
    for (const types of [[POINT], ['string', POINT], ['string', 'long', POINT]] as DataType[][]) {
      const index = createGroupIndex<Entry>(types);
      const rest = types.slice(0, -1).map((t) => (t === 'string' ? 'k' : 1));
      const p = entry('p');
      index.set([...rest, { x: 1, label: 'a' }], p);
      expect(index.get([...rest, { x: 1, label: 'a' }])).toBe(p);
      expect(index.get([...rest, { x: 1, label: 'b' }])).toBeUndefined();
      expect(index.get([...rest, { x: 2, label: 'a' }])).toBeUndefined();
      expect(index.get([...rest, { x: null, label: 'a' }])).toBeUndefined();
      expect(index.get([...rest, null])).toBeUndefined();
      const nullFields = entry('all-null struct');
      index.set([...rest, { x: null, label: null }], nullFields);
      expect(index.get([...rest, null])).toBeUndefined();
      const nullStruct = entry('NULL');
      index.set([...rest, null], nullStruct);
      expect(index.get([...rest, { x: null, label: null }])).toBe(nullFields);
      expect(index.get([...rest, undefined])).toBe(nullStruct);
      index.delete([...rest, { x: 1, label: 'a' }]);
      expect(index.get([...rest, { x: 1, label: 'a' }])).toBeUndefined();
      expect(index.get([...rest, { x: null, label: null }])).toBe(nullFields);
    }
  });

  it('array keys compare by value, element by element and in order', () => {
    for (const types of [[LONGS], ['string', LONGS], ['string', 'long', LONGS]] as DataType[][]) {
      const index = createGroupIndex<Entry>(types);
      const rest = types.slice(0, -1).map((t) => (t === 'string' ? 'k' : 1));
      const a = entry('[1,2]');
      index.set([...rest, [1, 2]], a);
      expect(index.get([...rest, [1, 2]])).toBe(a);
      expect(index.get([...rest, [2, 1]])).toBeUndefined();
      expect(index.get([...rest, [1, 2, 3]])).toBeUndefined();
      expect(index.get([...rest, [1]])).toBeUndefined();
      expect(index.get([...rest, []])).toBeUndefined();
      expect(index.get([...rest, null])).toBeUndefined();
      const empty = entry('[]');
      const withNull = entry('[null]');
      index.set([...rest, []], empty);
      index.set([...rest, [null]], withNull);
      expect(index.get([...rest, []])).toBe(empty);
      expect(index.get([...rest, [null]])).toBe(withNull);
      expect(index.get([...rest, [1, 2]])).toBe(a);
      expect(index.get([...rest, null])).toBeUndefined();
    }
  });

  it('arrays of doubles: -0 and 0 elements are one group (Spark normalises nested floating-point keys)', () => {
    const index = createGroupIndex<Entry>([DOUBLES]);
    const e = entry('[0]');
    index.set([[-0, 1.5]], e);
    expect(index.get([[0, 1.5]])).toBe(e);
  });

  it('an array or struct holding NaN is not the group of the one holding NULL', () => {
    // Spark normalises NaN inside structs and arrays to one NaN, but NaN is never NULL:
    // array(NaN) and array(NULL) are two groups, and so are struct(NaN) and struct(NULL).
    const arrays = createGroupIndex<Entry>([DOUBLES]);
    const nanArray = entry('[NaN]');
    const nullArray = entry('[null]');
    arrays.set([[Number.NaN]], nanArray);
    arrays.set([[null]], nullArray);
    expect(arrays.get([[Number.NaN]])).toBe(nanArray);
    expect(arrays.get([[null]])).toBe(nullArray);

    const structType = structOf([{ name: 'd', type: 'double' }]);
    const structs = createGroupIndex<Entry>(['string', structType]);
    const nanStruct = entry('{NaN}');
    const nullStruct = entry('{null}');
    structs.set(['k', { d: Number.NaN }], nanStruct);
    structs.set(['k', { d: null }], nullStruct);
    expect(structs.get(['k', { d: Number.NaN }])).toBe(nanStruct);
    expect(structs.get(['k', { d: null }])).toBe(nullStruct);
  });
});

describe('createGroupIndex: deleting the last entry under an outer level', () => {
  it('arity 2: a closed window level can take new groups afterwards', () => {
    const index = createGroupIndex<Entry>([WINDOW, 'string']);
    const w = { start: 0, end: 10 };
    index.set([w, 'a'], entry('a'));
    index.delete([w, 'a']);
    expect(index.get([w, 'a'])).toBeUndefined();
    const again = entry('a again');
    index.set([{ start: 0, end: 10 }, 'a'], again);
    const b = entry('b');
    index.set([{ start: 0, end: 10 }, 'b'], b);
    expect(index.get([w, 'a'])).toBe(again);
    expect(index.get([w, 'b'])).toBe(b);
    // Deleting twice, or a sibling that does not exist, keeps the others.
    index.delete([w, 'zzz']);
    index.delete([w, 'a']);
    index.delete([w, 'a']);
    expect(index.get([w, 'b'])).toBe(b);
    index.delete([w, 'b']);
    expect(index.get([w, 'b'])).toBeUndefined();
    const c = entry('c');
    index.set([w, 'c'], c);
    expect(index.get([w, 'c'])).toBe(c);
  });

  it('arity 3 and 4: emptying an inner level keeps its siblings and later inserts work at every depth', () => {
    for (const types of [['string', 'string', 'long'], ['string', 'string', 'long', 'boolean']] as DataType[][]) {
      const index = createGroupIndex<Entry>(types);
      const k = (...parts: unknown[]): unknown[] => (types.length === 3 ? parts.slice(0, 3) : parts);
      const e1 = entry('a/x/1');
      const e2 = entry('a/y/1');
      index.set(k('a', 'x', 1, true), e1);
      index.set(k('a', 'y', 1, true), e2);
      index.delete(k('a', 'x', 1, true));
      expect(index.get(k('a', 'x', 1, true))).toBeUndefined();
      expect(index.get(k('a', 'y', 1, true))).toBe(e2);
      // The emptied branch takes new entries.
      const e3 = entry('a/x/2');
      index.set(k('a', 'x', 2, true), e3);
      expect(index.get(k('a', 'x', 2, true))).toBe(e3);
      // Empty the whole 'a' subtree, then reinsert under it.
      index.delete(k('a', 'x', 2, true));
      index.delete(k('a', 'y', 1, true));
      expect(index.get(k('a', 'y', 1, true))).toBeUndefined();
      const e4 = entry('a/y/1 again');
      index.set(k('a', 'y', 1, true), e4);
      expect(index.get(k('a', 'y', 1, true))).toBe(e4);
      expect(index.get(k('a', 'x', 2, true))).toBeUndefined();
      // A delete that stops at a missing level changes nothing.
      index.delete(k('b', 'y', 1, true));
      index.delete(k('a', 'q', 1, true));
      expect(index.get(k('a', 'y', 1, true))).toBe(e4);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Differential test against a reference Map keyed by a canonical JSON text of the key.


/** Fresh values each call (new struct/array instances), over a small domain including NULL. */
function domainOf(type: DataType): (() => unknown)[] {
  if (type === 'string') return [() => 'a', () => 'b', () => '', () => 'null', () => null, () => undefined];
  if (type === 'long' || type === 'int' || type === 'timestamp') return [() => 0, () => 1, () => -1, () => 7, () => null];
  if (type === 'double') return [() => 0, () => -0, () => 1.5, () => Number.NaN, () => null, () => undefined];
  if (type === 'boolean') return [() => true, () => false, () => null];
  if (typeof type === 'object' && type.kind === 'struct' && type.fields[0]!.name === 'start') {
    return [...[0, 10, 20].map((s) => (): unknown => ({ start: s, end: s + 10 })), () => null];
  }
  if (typeof type === 'object' && type.kind === 'struct') {
    return [() => ({ x: 1, label: 'a' }), () => ({ x: 1, label: 'b' }), () => ({ x: null, label: 'a' }), () => null];
  }
  if (typeof type === 'object' && type.kind === 'array' && type.element === 'double') {
    return [() => [0], () => [-0], () => [Number.NaN], () => [null], () => [Infinity], () => [-Infinity], () => [1.5, Number.NaN], () => null];
  }
  if (typeof type === 'object' && type.kind === 'array') return [() => [], () => [1], () => [1, 2], () => [2, 1], () => [null], () => null];
  throw new Error(`no domain for ${JSON.stringify(type)}`);
}

/** A value with Spark's grouping equality made explicit: -0 is 0, NaN is NaN (not NULL), nested too. */
function canonical(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number') return Number.isNaN(v) ? { nan: true } : !Number.isFinite(v) ? { infinity: Math.sign(v) } : v === 0 ? 0 : v;
  if (Array.isArray(v)) return { array: v.map(canonical) };
  if (typeof v === 'object') return { struct: Object.entries(v as object).map(([k, x]) => [k, canonical(x)]) };
  return { value: v };
}

/** Spark's grouping equality as text: NULL/undefined one value, -0 is 0, NaN is NaN, a window is its start. */
function referenceKey(types: readonly DataType[], key: readonly unknown[]): string {
  return JSON.stringify(key.map((v, i) => {
    if (v === null || v === undefined) return null;
    const t = types[i]!;
    if (typeof t === 'object' && t.kind === 'struct' && t.fields[0]!.name === 'start') return { window: (v as { start: number }).start };
    return canonical(v);
  }));
}

function differential(types: readonly DataType[], seed: number, ops: number): void {
  const random = createPrng(seed);
  const domains = types.map(domainOf);
  const randomKey = (): unknown[] => domains.map((d) => d[Math.floor(random() * d.length)]!());
  const index: GroupIndex<Entry> = createGroupIndex<Entry>(types);
  const reference = new Map<string, Entry>();
  const seenKeys: unknown[][] = [];
  const describeKey = (k: readonly unknown[]): string => JSON.stringify(k, (_, v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v === undefined ? 'undefined' : v));

  for (let op = 0; op < ops; op++) {
    const r = random();
    const key = randomKey();
    const ref = referenceKey(types, key);
    if (r < 0.45) {
      const e = entry(`${op}`);
      index.set(key, e);
      reference.set(ref, e);
      seenKeys.push(key);
    } else if (r < 0.75) {
      index.delete(key);
      reference.delete(ref);
    } else if (r < 0.99) {
      const got = index.get(key);
      if (got !== reference.get(ref)) {
        throw new Error(`seed ${seed}, op ${op}: get(${describeKey(key)}) returned ${got?.id} but the reference holds ${reference.get(ref)?.id}`);
      }
    } else {
      index.clear();
      reference.clear();
    }
    // After every op, every key written so far (fresh instances of it) agrees with the reference.
    if (op % 7 === 0 || op === ops - 1) {
      for (const k of seenKeys) {
        // A deep copy: other instances of the same struct and array values.
        const got = index.get(structuredClone(k));
        const want = reference.get(referenceKey(types, k));
        if (got !== want) {
          throw new Error(`seed ${seed}, after op ${op}: get(${describeKey(k)}) returned ${got?.id} but the reference holds ${want?.id}`);
        }
      }
    }
  }
  expect(seenKeys.length).toBeGreaterThan(0);
}

describe('createGroupIndex: randomized differential test against a reference Map', () => {
  const cases: [string, DataType[]][] = [
    ['arity 1 (string)', ['string']],
    ['arity 1 (double)', ['double']],
    ['arity 1 (array)', [LONGS]],
    ['arity 1 (array of doubles with NaN, ±Infinity, -0)', [DOUBLES]],
    ['arity 2 (string, array of doubles)', ['string', DOUBLES]],
    ['arity 2 (window, string)', [WINDOW, 'string']],
    ['arity 2 (double, boolean)', ['double', 'boolean']],
    ['arity 3 (window, string, long)', [WINDOW, 'string', 'long']],
    ['arity 4 (string, struct, double, array)', ['string', POINT, 'double', LONGS]],
    ['arity 5 (boolean, string, long, double, window)', ['boolean', 'string', 'long', 'double', WINDOW]],
  ];
  for (const [name, types] of cases) {
    it(name, () => {
      for (const seed of [1, 2, 3, 42, 2024]) differential(types, seed, 600);
    });
  }
});
