import type { StateStore, StateStoreId } from '../../state/state-store.js';
import type { Row } from '../evaluate.js';

/**
 * One side's buffered rows, Spark's SymmetricHashJoinStateManager (state format 2): a multi-map
 * `join key -> rows` kept in two stores, so appending a row writes one small entry:
 * - `<side>-keyToNumValues`: encoded key -> { key values, number of rows }
 * - `<side>-keyWithIndexToValue`: `<encoded key>#<index>` -> { row, matched }
 * `matched` records whether the row ever joined (outer joins emit a NULL row only for unmatched rows
 * when they are evicted; left semi skips left rows already emitted). Values are replaced, never
 * mutated.
 */
export interface KeyEntry {
  readonly key: readonly unknown[];
  readonly count: number;
}

export interface StoredRow {
  readonly row: Row;
  readonly matched: boolean;
}

export type JoinSide = 'left' | 'right';

export function joinStateStoreIds(operatorId: number, side: JoinSide): [StateStoreId, StateStoreId] {
  return [
    { operatorId, storeName: `${side}-keyToNumValues` },
    { operatorId, storeName: `${side}-keyWithIndexToValue` },
  ];
}

const indexKey = (key: string, index: number): string => `${key}#${index}`;

export class JoinStateManager {
  constructor(
    private readonly keyToNumValues: StateStore<KeyEntry>,
    private readonly keyWithIndexToValue: StateStore<StoredRow>,
  ) {}

  /** Rows stored on this side. */
  get numRows(): number {
    return this.keyWithIndexToValue.size;
  }

  /** The rows buffered under a key, in append order (as long as nothing was evicted from the key). */
  *get(key: string): IterableIterator<[number, StoredRow]> {
    const count = this.keyToNumValues.get(key)?.count ?? 0;
    for (let i = 0; i < count; i++) {
      const v = this.keyWithIndexToValue.get(indexKey(key, i));
      if (v !== undefined) yield [i, v];
    }
  }

  append(key: string, keyValues: readonly unknown[], row: Row, matched: boolean): void {
    const count = this.keyToNumValues.get(key)?.count ?? 0;
    this.keyWithIndexToValue.put(indexKey(key, count), { row, matched });
    this.keyToNumValues.put(key, { key: keyValues, count: count + 1 });
  }

  markMatched(key: string, index: number, stored: StoredRow): void {
    if (!stored.matched) this.keyWithIndexToValue.put(indexKey(key, index), { row: stored.row, matched: true });
  }

  /** Removes every row whose key satisfies `evict`; returns them. */
  removeByKey(evict: (keyValues: readonly unknown[]) => boolean): StoredRow[] {
    const removed: StoredRow[] = [];
    for (const [key, entry] of [...this.keyToNumValues.entries()]) {
      if (!evict(entry.key)) continue;
      for (let i = 0; i < entry.count; i++) {
        const v = this.keyWithIndexToValue.get(indexKey(key, i));
        if (v !== undefined) removed.push(v);
        this.keyWithIndexToValue.remove(indexKey(key, i));
      }
      this.keyToNumValues.remove(key);
    }
    return removed;
  }

  /**
   * Removes every row satisfying `evict`; returns them. Like Spark, a hole is filled by moving the
   * key's last row into it, and the moved row is examined next.
   */
  removeByValue(evict: (row: Row) => boolean): StoredRow[] {
    const removed: StoredRow[] = [];
    for (const [key, entry] of [...this.keyToNumValues.entries()]) {
      let count = entry.count;
      let index = 0;
      while (index < count) {
        const v = this.keyWithIndexToValue.get(indexKey(key, index));
        if (v === undefined || !evict(v.row)) {
          index++;
          continue;
        }
        removed.push(v);
        const last = count - 1;
        if (index !== last) {
          const moved = this.keyWithIndexToValue.get(indexKey(key, last));
          if (moved !== undefined) this.keyWithIndexToValue.put(indexKey(key, index), moved);
        }
        this.keyWithIndexToValue.remove(indexKey(key, last));
        count--;
      }
      if (count === entry.count) continue;
      if (count > 0) this.keyToNumValues.put(key, { key: entry.key, count });
      else this.keyToNumValues.remove(key);
    }
    return removed;
  }
}

/** One parent's entries of a side's two stores (already restricted to the child's range). */
export interface JoinSideEntries {
  readonly counts: ReadonlyMap<string, unknown>;
  readonly rows: ReadonlyMap<string, unknown>;
}

/**
 * The union of several parents' entries of one join side, for a merged shard. A key held by one
 * parent keeps its entries as they are. A key held by several is refused (`conflict`) unless its
 * rows can never match (`neverMatches`: a NULL compared with `=`): they are independent rows, each
 * waiting for the watermark to emit its NULL row on a preserved side, so the merged key holds all of
 * them, re-indexed 0..n-1 in parent order, then index order (deterministic bytes when written again).
 */
export function unionJoinSide(
  parents: readonly JoinSideEntries[], neverMatches: (keyValues: readonly unknown[]) => boolean,
): { counts: Map<string, unknown>; rows: Map<string, unknown> } | { conflict: string } {
  const holders = new Map<string, number[]>();
  parents.forEach((p, i) => { for (const key of p.counts.keys()) holders.set(key, [...(holders.get(key) ?? []), i]); });
  const shared = new Set([...holders].filter(([, held]) => held.length > 1).map(([key]) => key));
  const counts = new Map<string, unknown>();
  const rows = new Map<string, unknown>();
  for (const p of parents) {
    for (const [key, entry] of p.counts) if (!shared.has(key)) counts.set(key, entry);
    for (const [key, row] of p.rows) if (!shared.has(baseKeyOf(key))) rows.set(key, row);
  }
  for (const key of shared) {
    const entries = holders.get(key)!.map((i) => [parents[i]!, parents[i]!.counts.get(key) as KeyEntry] as const);
    if (!neverMatches(entries[0]![1].key)) return { conflict: key };
    let n = 0;
    for (const [p, entry] of entries) {
      for (let i = 0; i < entry.count; i++) {
        const row = p.rows.get(indexKey(key, i));
        if (row !== undefined) rows.set(indexKey(key, n++), row);
      }
    }
    counts.set(key, { key: entries[0]![1].key, count: n } satisfies KeyEntry);
  }
  return { counts, rows };
}

/** The join key of a `keyWithIndexToValue` entry (`<key>#<index>`). */
function baseKeyOf(indexedKey: string): string {
  return indexedKey.slice(0, indexedKey.lastIndexOf('#'));
}
