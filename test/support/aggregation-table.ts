/** Helpers for tests of the aggregation table, directly or through a state store. */
import type { AggregationTable } from '../../lib/execution/aggregation-table.js';

export type Snapshot = [key: string, state: string][];

/** The table's groups through forEach, sorted: [keyValues JSON, state JSON]. */
export function snapshot(table: AggregationTable): Snapshot {
  const rows: Snapshot = [];
  table.forEach((e) => rows.push([JSON.stringify(e.keyValues), JSON.stringify(e.state)]));
  return rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

/** Evicts up to `timeMs`, returning the visited groups' keys (sorted, duplicates kept). */
export function evict(table: AggregationTable, timeMs: number): string[] {
  const visited: string[] = [];
  table.evictUpTo(timeMs, (e) => visited.push(JSON.stringify(e.keyValues)));
  return visited.sort();
}
