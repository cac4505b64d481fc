/**
 * Comparing a run's final sink contents with the expected ones, row by row, by result key:
 *
 * - lost:        an expected row whose key is missing (or fewer copies than expected);
 * - duplicated:  more copies of a key than expected;
 * - mismatched:  a copy whose value no expected copy of its key has (each expected copy matches
 *                one actual copy at most: per key the values are compared as multisets), or a
 *                key that should not be there at all.
 *
 * Batch boundaries differ between runs (faults split and retry batches), so rows are compared as
 * multisets by key, never by position.
 */
import type { DeadLetterRecord } from '../../sources/dead-letter.js';

export interface Diff {
  lost: number;
  duplicated: number;
  mismatched: number;
  /** A few examples of each difference, for the report. */
  readonly examples: string[];
}

export const emptyDiff = (): Diff => ({ lost: 0, duplicated: 0, mismatched: 0, examples: [] });

export function addDiff(into: Diff, d: Diff): Diff {
  into.lost += d.lost;
  into.duplicated += d.duplicated;
  into.mismatched += d.mismatched;
  into.examples.push(...d.examples.slice(0, Math.max(0, 6 - into.examples.length)));
  return into;
}

/**
 * JSON with object keys sorted (DynamoDB and S3 return attributes in different orders). A long
 * beyond 2^53 (a bigint) is its digits, as a sink writes it: equal longs give equal text whichever
 * side read them (canonical longs: a safe integer is never a bigint).
 */
export function canonicalJson(value: unknown): string {
  if (typeof value === 'bigint') return String(value);
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'undefined';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

function groupBy(rows: readonly Record<string, unknown>[], keyColumns: readonly string[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const row of rows) {
    const key = keyColumns.length > 0 ? canonicalJson(keyColumns.map((c) => row[c] ?? null)) : canonicalJson(row);
    let list = out.get(key);
    if (!list) out.set(key, (list = []));
    list.push(canonicalJson(row));
  }
  return out;
}

export function compareRows(
  expected: readonly Record<string, unknown>[], actual: readonly Record<string, unknown>[], keyColumns: readonly string[],
): Diff {
  const diff = emptyDiff();
  const want = groupBy(expected, keyColumns);
  const got = groupBy(actual, keyColumns);
  const note = (text: string): void => { if (diff.examples.length < 6) diff.examples.push(text); };
  for (const [key, rows] of want) {
    const have = got.get(key) ?? [];
    // Multisets: each expected copy is matched by one equal copy at most, so an expected [A, B]
    // never passes as [A, A].
    const counts = new Map<string, number>();
    for (const v of rows) counts.set(v, (counts.get(v) ?? 0) + 1);
    const extra: string[] = [];
    for (const v of have) {
      const n = counts.get(v) ?? 0;
      if (n > 0) counts.set(v, n - 1); else extra.push(v);
    }
    const missing = [...counts].flatMap(([v, n]) => Array<string>(n).fill(v));
    const wrong = Math.min(missing.length, extra.length);
    if (wrong > 0) { diff.mismatched += wrong; note(`mismatched ${key}: expected ${missing[0]} got ${extra[0]}`); }
    if (missing.length > wrong) { diff.lost += missing.length - wrong; note(`lost ${key}${have.length > 0 ? ` (${have.length} of ${rows.length} copies)` : ''}`); }
    if (extra.length > wrong) { diff.duplicated += extra.length - wrong; note(`duplicated ${key} ×${have.length}`); }
  }
  for (const [key, rows] of got) {
    if (!want.has(key)) { diff.mismatched += rows.length; note(`unexpected ${rows[0]}`); }
  }
  return diff;
}

export function compareDeadLetters(
  expected: readonly DeadLetterRecord[], actual: readonly DeadLetterRecord[], options: { ignoreShard?: boolean } = {},
): Diff {
  // Each run has its own stream, so sequence numbers differ: a dead letter is its shard and bytes.
  const strip = (d: DeadLetterRecord): Record<string, unknown> => ({
    shardId: options.ignoreShard ? '' : d.shardId, reason: d.reason, dataBase64: d.dataBase64, partitionKey: d.partitionKey,
  });
  return compareRows(expected.map(strip), actual.map(strip), ['shardId', 'dataBase64']);
}
