/**
 * Comparing a run's final sink contents with the expected ones, row by row, by result key:
 *
 * - lost:        an expected row whose key is missing (or fewer copies than expected);
 * - duplicated:  more copies of a key than expected;
 * - mismatched:  a key present with other values, or a key that should not be there at all.
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

/** JSON with object keys sorted (DynamoDB and S3 return attributes in different orders). */
export function canonicalJson(value: unknown): string {
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
    if (have.length < rows.length) { diff.lost += rows.length - have.length; note(`lost ${key}`); }
    if (have.length > rows.length) { diff.duplicated += have.length - rows.length; note(`duplicated ${key} ×${have.length}`); }
    // Values: every copy present must be one of the expected values.
    const expectedValues = new Set(rows);
    const wrong = have.filter((v) => !expectedValues.has(v));
    if (wrong.length > 0) { diff.mismatched += Math.min(wrong.length, rows.length); note(`mismatched ${key}: expected ${rows[0]} got ${wrong[0]}`); }
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
