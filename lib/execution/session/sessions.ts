import { bind } from '../../analysis/binder.js';
import type { Attribute } from '../../plan/attribute.js';
import { isStruct } from '../../plan/data-types.js';
import type { SessionWindow } from '../../plan/expressions.js';
import { MICROS_PER_DAY, parseInterval } from '../../plan/intervals.js';
import type { EvalContext } from '../eval-context.js';
import { compile, type Row } from '../evaluate.js';

/**
 * One session of one group, as stored: `[start, end)` in microseconds and the aggregate buffers.
 * Stored values are never mutated; merging builds new tuples.
 */
export type Session = readonly [start: number, end: number, buffers: readonly unknown[]];

/**
 * Spark's SessionWindowing rewrite for one row: the session `[t, t + gap)`, or null when the row
 * is filtered out before aggregation (NULL time, NULL or invalid gap, gap <= 0). A time column
 * that is itself a window struct uses its `window_time` (end - 1 µs), as Spark does.
 */
export function compileSessionOf(
  e: SessionWindow,
  input: readonly Attribute[],
  ctx: EvalContext,
): (row: Row) => { start: number; end: number } | null {
  const boundTime = bind(e.timeColumn, input);
  const timeEval = compile(boundTime, ctx);
  const time = isStruct(boundTime.type)
    ? (row: Row) => {
      const w = timeEval(row) as { end: number } | null;
      return w === null ? null : w.end - 1;
    }
    : (row: Row) => timeEval(row) as number | null;
  const gap = compile(bind(e.gap, input), ctx);
  return (row) => {
    const t = time(row);
    if (t === null || t === undefined) return null;
    const g = gapMicros(gap(row));
    if (g === null || g <= 0) return null;
    return { start: t, end: t + g };
  };
}

/** A gap value in microseconds: a number (interval micros) or an interval string (Spark casts it). */
export function gapMicros(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'string') {
    try {
      const i = parseInterval(value);
      return i.months * 31 * MICROS_PER_DAY + i.days * MICROS_PER_DAY + i.micros;
    } catch {
      return null; // Spark's cast of an invalid interval string gives NULL: the row is dropped.
    }
  }
  return null;
}

/**
 * Spark's MergingSessionsIterator over "stored sessions + this batch's sessions" of one group:
 * sorted by start (stored first on ties), a session whose start is `<=` the current end joins it
 * (touching sessions merge), extending the end and merging the buffers in start order.
 */
export function mergeSessions(
  stored: readonly Session[],
  fresh: readonly Session[],
  mergeBuffers: (a: readonly unknown[], b: readonly unknown[]) => unknown[],
): Session[] {
  const all = [...stored, ...fresh].sort((a, b) => a[0] - b[0]);
  const out: Session[] = [];
  let current: Session | null = null;
  for (const s of all) {
    if (current !== null && s[0] <= current[1]) {
      current = [current[0], Math.max(current[1], s[1]), mergeBuffers(current[2], s[2])];
    } else {
      if (current !== null) out.push(current);
      current = s;
    }
  }
  if (current !== null) out.push(current);
  return out;
}

/** How many stored sessions a replacement drops: Spark keys sessions by start and replaces same-start ones. */
export function countReplacedAway(before: readonly Session[], after: readonly Session[]): number {
  const starts = new Set(after.map((s) => s[0]));
  return before.filter((s) => !starts.has(s[0])).length;
}
