/** PySpark-style function builders: `import { col, window, count } from 'sluice'`. */
import { Column, toColumn, toExpr, literalExpr, type ColumnLike, type ColumnOrValue, type LiteralValue } from './column.js';
import type { AggregateFunctionName, Expr } from './expressions.js';
import { durationToMicros } from './intervals.js';
import { timeWindowExpr } from './window-expressions.js';
import { parseExpression } from '../sql/index.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';

export const col = (name: string): Column => toColumn(name);
export const column = col;
export const lit = (value: LiteralValue): Column => new Column(literalExpr(value));
/** An expression: SQL text (`expr('amount * 2 AS x')`, as in Spark) or an expression tree. */
export const expr = (e: Expr | string): Column => new Column(typeof e === 'string' ? parseExpression(e) : e);
/** Spark's try_divide: `/` that gives NULL for a zero divisor instead of DIVIDE_BY_ZERO. */
export const try_divide = (left: ColumnOrValue, right: ColumnOrValue): Column => fn('try_divide', left, right);
/** Spark's try_mod: `%` that gives NULL for a zero divisor instead of DIVIDE_BY_ZERO. */
export const try_mod = (left: ColumnOrValue, right: ColumnOrValue): Column => fn('try_mod', left, right);

function fn(name: string, ...args: ColumnOrValue[]): Column {
  return new Column({ kind: 'call', fn: name, args: args.map(toExpr) });
}

function agg(name: AggregateFunctionName, args: ColumnLike[], distinct = false, ignoreNulls = false): Column {
  return new Column({
    kind: 'aggregate',
    fn: name,
    args: args.filter((a) => a !== '*').map((a) => toColumn(a).expr),
    distinct,
    ignoreNulls,
  });
}

export const count = (c: ColumnLike = '*'): Column => agg('count', [c]);
export const countDistinct = (...cs: ColumnLike[]): Column => agg('count', cs, true);
export const sum = (c: ColumnLike): Column => agg('sum', [c]);
export const avg = (c: ColumnLike): Column => agg('avg', [c]);
export const mean = avg;
export const min = (c: ColumnLike): Column => agg('min', [c]);
export const max = (c: ColumnLike): Column => agg('max', [c]);
export const first = (c: ColumnLike, ignoreNulls = false): Column => agg('first', [c], false, ignoreNulls);
export const last = (c: ColumnLike, ignoreNulls = false): Column => agg('last', [c], false, ignoreNulls);
export const collect_list = (c: ColumnLike): Column => agg('collect_list', [c]);
export const collect_set = (c: ColumnLike): Column => agg('collect_set', [c]);
/**
 * Spark's HyperLogLog++ estimate of the number of distinct non-NULL values, with relative
 * standard deviation `rsd` (default 0.05: 512 registers). Small counts (below ~900 at the default)
 * use linear counting and are exact or off by a few.
 */
export function approx_count_distinct(c: ColumnLike, rsd?: number): Column {
  if (rsd === undefined) return agg('approx_count_distinct', [c]);
  // Spark's precision p = ceil(2 log2(1.106 / rsd)) must be 4..18 (see execution/hyperloglog.ts).
  const p = Number.isFinite(rsd) && rsd > 0 ? Math.ceil((2 * Math.log(1.106 / rsd)) / Math.LN2) : NaN;
  if (!(p >= 4)) {
    throw new IllegalArgumentError(`approx_count_distinct: HLL++ requires at least 4 bits for addressing. Use a lower error, at most 39% (rsd ${rsd}).`, { code: 'INVALID_RSD' });
  }
  if (p > 18) {
    throw new IllegalArgumentError(`approx_count_distinct: HLL++ supports at most 18 bits for addressing. Use a larger error, at least 0.22% (rsd ${rsd}).`, { code: 'INVALID_RSD' });
  }
  return new Column({ kind: 'aggregate', fn: 'approx_count_distinct', args: [toColumn(c).expr, literalExpr(rsd)], distinct: false, ignoreNulls: false });
}

export const timestamp_seconds = (c: ColumnLike): Column => fn('timestamp_seconds', toColumn(c));
export const unix_micros = (c: ColumnLike): Column => fn('unix_micros', toColumn(c));
export const current_timestamp = (): Column => fn('current_timestamp');
export const split = (c: ColumnLike, pattern: string): Column => fn('split', toColumn(c), pattern);
export const explode = (c: ColumnLike): Column => fn('explode', toColumn(c));
export const size = (c: ColumnLike): Column => fn('size', toColumn(c));
export const array = (...cs: ColumnLike[]): Column => fn('array', ...cs.map(toColumn));
export const upper = (c: ColumnLike): Column => fn('upper', toColumn(c));
export const lower = (c: ColumnLike): Column => fn('lower', toColumn(c));
export const concat = (...cs: ColumnLike[]): Column => fn('concat', ...cs.map(toColumn));
export const length = (c: ColumnLike): Column => fn('length', toColumn(c));
export const substring = (c: ColumnLike, pos: number, len: number): Column => fn('substring', toColumn(c), pos, len);
export const trim = (c: ColumnLike): Column => fn('trim', toColumn(c));
/** Spark's concat_ws: the values (or array elements) joined by `sep`, NULLs skipped. */
export const concat_ws = (sep: string, ...cs: ColumnLike[]): Column => fn('concat_ws', sep, ...cs.map(toColumn));
export const coalesce = (...cs: ColumnLike[]): Column => fn('coalesce', ...cs.map(toColumn));
export const window_time = (c: ColumnLike): Column => fn('window_time', toColumn(c));
export const monotonically_increasing_id = (): Column => fn('monotonically_increasing_id');

/** `when(cond, value).when(...).otherwise(value)`. */
export function when(condition: Column, value: ColumnOrValue): Column {
  return new Column({ kind: 'case', branches: [[condition.expr, toExpr(value)]], otherwise: null });
}

/**
 * Tumbling (`slide` omitted) or sliding event-time windows, half-open `[start, end)`.
 * Durations are interval strings (`'10 minutes'`) or integers in microseconds.
 */
export function window(
  timeColumn: ColumnLike,
  windowDuration: string | number,
  slideDuration?: string | number,
  startTime?: string | number,
): Column {
  return new Column(timeWindowExpr(toColumn(timeColumn).expr, windowDuration, slideDuration, startTime));
}

/** Session windows: a session closes after `gap` without events (a duration, or a per-row Column). */
export function session_window(timeColumn: ColumnLike, gap: string | Column): Column {
  const gapExpr: Expr = typeof gap === 'string'
    ? { kind: 'literal', value: durationToMicros(gap, 'gap'), type: 'interval' }
    : gap.expr;
  return new Column({ kind: 'sessionWindow', timeColumn: toColumn(timeColumn).expr, gap: gapExpr });
}
