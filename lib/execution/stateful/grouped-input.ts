import type { Attribute } from '../../plan/attribute.js';
import type { Row as UserRow } from '../../plan/stateful-processor.js';
import { compareValues, encodeKey } from '../values.js';
import type { Row } from '../evaluate.js';
import { eventTimeReader } from '../streaming-deduplicate-exec.js';

export interface InputGroup {
  readonly key: string;
  readonly keyValues: readonly unknown[];
  readonly rows: UserRow[];
}

function compareKeys(a: readonly unknown[], b: readonly unknown[]): number {
  for (let i = 0; i < a.length; i++) {
    const c = compareValues(a[i], b[i]);
    if (c !== 0) return c;
  }
  return 0;
}

/**
 * Groups a batch's rows by key, as user code sees them (objects by column name), keys ascending:
 * Spark sorts each partition by the grouping key before calling the user's code.
 */
export function groupInput(rows: readonly Row[], input: readonly Attribute[], keys: readonly Attribute[]): InputGroup[] {
  const ordinals = keys.map((k) => input.findIndex((a) => a.id === k.id));
  const names = input.map((a) => a.name);
  const groups = new Map<string, { key: string; keyValues: unknown[]; rows: UserRow[] }>();
  for (const row of rows) {
    const keyValues = ordinals.map((i) => row[i]);
    const key = encodeKey(keyValues);
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { key, keyValues, rows: [] }));
    const object: UserRow = {};
    for (let i = 0; i < names.length; i++) object[names[i]!] = row[i];
    group.rows.push(object);
  }
  return [...groups.values()].sort((a, b) => compareKeys(a.keyValues, b.keyValues));
}

/** Drops rows at or behind the late-events watermark (by the input's event-time column), counting them. */
export function dropLateRows(rows: Row[], input: readonly Attribute[], lateMs: number | null): { rows: Row[]; dropped: number } {
  const eventTime = eventTimeReader(input, (a) => input.findIndex((x) => x.id === a.id));
  if (lateMs === null || eventTime === null) return { rows, dropped: 0 };
  const kept = rows.filter((r) => {
    const t = eventTime(r);
    return t === null || t > lateMs;
  });
  return { rows: kept, dropped: rows.length - kept.length };
}
