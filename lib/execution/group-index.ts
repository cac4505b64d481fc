import type { DataType } from '../plan/data-types.js';
import { encodeKey } from './values.js';

/**
 * A hash index from a grouping key (one value per key column) to an entry, without building a
 * string per lookup: one Map level per column, keyed by the column's value as a primitive. A
 * `window()` column is its start (its length is fixed per column); NULL is null; other structs and
 * arrays are their JSON text. Maps compare with SameValueZero, so -0 and 0 are one group and so are all NaNs,
 * as Spark normalises floating-point grouping keys.
 */
export interface GroupIndex<E> {
  get(key: readonly unknown[]): E | undefined;
  set(key: readonly unknown[], entry: E): void;
  delete(key: readonly unknown[]): void;
  clear(): void;
  /**
   * Removes at once the entries under `key[0]`'s first-level value when there are exactly `count`
   * of them (a closed window's groups, when the window is the first key); false, removing
   * nothing, otherwise or when the index has no such level.
   */
  deleteFirstLevel(key: readonly unknown[], count: number): boolean;
  /** Every entry (order unspecified). */
  forEach(visit: (entry: E) => void): void;
}

type Primitive = string | number | boolean | null;
type ToPrimitive = (v: unknown) => Primitive;
type Level = Map<Primitive, unknown>;

function primitiveOf(type: DataType, isWindow: boolean): ToPrimitive {
  if (isWindow) return (v) => (v === null || v === undefined ? null : (v as { start: number }).start);
  if (typeof type === 'object') return (v) => (v === null || v === undefined ? null : encodeKey([v]));
  return (v) => (v === undefined ? null : (v as Primitive));
}

/** `windowKeys[i]`: key column i is a `window()` (a struct named start/end is not necessarily one). */
export function createGroupIndex<E>(keyTypes: readonly DataType[], windowKeys: readonly boolean[] = []): GroupIndex<E> {
  const toPrimitive = keyTypes.map((t, i) => primitiveOf(t, windowKeys[i] === true));
  switch (toPrimitive.length) {
    case 0:
      return singleEntryIndex<E>();
    case 1:
      return oneLevelIndex<E>(toPrimitive[0]!);
    case 2:
      return twoLevelIndex<E>(toPrimitive[0]!, toPrimitive[1]!);
    default:
      return nestedIndex<E>(toPrimitive);
  }
}

function singleEntryIndex<E>(): GroupIndex<E> {
  let entry: E | undefined;
  return {
    get: () => entry,
    set: (_, e) => { entry = e; },
    delete: () => { entry = undefined; },
    clear: () => { entry = undefined; },
    deleteFirstLevel: () => false,
    forEach: (visit) => { if (entry !== undefined) visit(entry); },
  };
}

function oneLevelIndex<E>(p0: ToPrimitive): GroupIndex<E> {
  const map = new Map<Primitive, E>();
  return {
    get: (key) => map.get(p0(key[0])),
    set: (key, e) => { map.set(p0(key[0]), e); },
    delete: (key) => { map.delete(p0(key[0])); },
    clear: () => map.clear(),
    deleteFirstLevel: () => false,
    forEach: (visit) => map.forEach((e) => visit(e)),
  };
}

function twoLevelIndex<E>(p0: ToPrimitive, p1: ToPrimitive): GroupIndex<E> {
  const outer = new Map<Primitive, Map<Primitive, E>>();
  // Consecutive rows mostly share their first key (a window): its level is remembered, which
  // saves one of the two Map lookups per row.
  let lastK0: Primitive | undefined;
  let lastInner: Map<Primitive, E> | undefined;
  const levelOf = (k0: Primitive): Map<Primitive, E> | undefined => {
    if (k0 === lastK0 && lastInner !== undefined) return lastInner;
    const inner = outer.get(k0);
    if (inner !== undefined) {
      lastK0 = k0;
      lastInner = inner;
    }
    return inner;
  };
  const forget = (): void => {
    lastK0 = undefined;
    lastInner = undefined;
  };
  return {
    get: (key) => levelOf(p0(key[0]))?.get(p1(key[1])),
    set: (key, e) => {
      const k0 = p0(key[0]);
      let inner = levelOf(k0);
      if (inner === undefined) {
        outer.set(k0, (inner = new Map()));
        lastK0 = k0;
        lastInner = inner;
      }
      inner.set(p1(key[1]), e);
    },
    delete: (key) => {
      const k0 = p0(key[0]);
      const inner = levelOf(k0);
      if (inner === undefined) return;
      inner.delete(p1(key[1]));
      // A closed window's level goes with its last group.
      if (inner.size === 0) {
        outer.delete(k0);
        forget();
      }
    },
    clear: () => {
      outer.clear();
      forget();
    },
    deleteFirstLevel: (key, count) => {
      const k0 = p0(key[0]);
      if (levelOf(k0)?.size !== count) return false;
      outer.delete(k0);
      forget();
      return true;
    },
    forEach: (visit) => outer.forEach((inner) => inner.forEach((e) => visit(e))),
  };
}

function nestedIndex<E>(toPrimitive: readonly ToPrimitive[]): GroupIndex<E> {
  const root: Level = new Map();
  const last = toPrimitive.length - 1;
  return {
    get: (key) => {
      let level: Level | undefined = root;
      for (let i = 0; i < last && level !== undefined; i++) level = level.get(toPrimitive[i]!(key[i])) as Level | undefined;
      return level?.get(toPrimitive[last]!(key[last])) as E | undefined;
    },
    set: (key, e) => {
      let level = root;
      for (let i = 0; i < last; i++) {
        const k = toPrimitive[i]!(key[i]);
        let next = level.get(k) as Level | undefined;
        if (next === undefined) level.set(k, (next = new Map()));
        level = next;
      }
      level.set(toPrimitive[last]!(key[last]), e);
    },
    delete: (key) => {
      const path: [Level, Primitive][] = [];
      let level: Level | undefined = root;
      for (let i = 0; i <= last && level !== undefined; i++) {
        const k = toPrimitive[i]!(key[i]);
        path.push([level, k]);
        level = i < last ? (level.get(k) as Level | undefined) : undefined;
      }
      if (path.length !== last + 1) return;
      // Delete the entry, then every level it leaves empty.
      for (let i = last; i >= 0; i--) {
        const [lvl, k] = path[i]!;
        if (i < last && (lvl.get(k) as Level).size > 0) break;
        lvl.delete(k);
      }
    },
    clear: () => root.clear(),
    // A level below the first counts its next level's keys, not entries: not checkable by count.
    deleteFirstLevel: () => false,
    forEach: (visit) => {
      const walk = (level: Level, depth: number): void => level.forEach((v) => (depth === last ? visit(v as E) : walk(v as Level, depth + 1)));
      walk(root, 0);
    },
  };
}
