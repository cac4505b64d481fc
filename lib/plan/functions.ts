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

// ---- Date/time functions (Spark's, UTC session time zone; lib/execution/functions/datetime-functions.ts) ----
/** Spark's to_timestamp: a string parsed as a timestamp, by `format` (Spark's datetime pattern) when given. */
export const to_timestamp = (c: ColumnLike, format?: string): Column => (format === undefined ? fn('to_timestamp', toColumn(c)) : fn('to_timestamp', toColumn(c), format));
/** Spark's try_to_timestamp: to_timestamp with NULL instead of CANNOT_PARSE_TIMESTAMP. */
export const try_to_timestamp = (c: ColumnLike, format?: string): Column => (format === undefined ? fn('try_to_timestamp', toColumn(c)) : fn('try_to_timestamp', toColumn(c), format));
export const to_date = (c: ColumnLike, format?: string): Column => (format === undefined ? fn('to_date', toColumn(c)) : fn('to_date', toColumn(c), format));
/** Spark's date_trunc: `unit` one of year, quarter, month, week, day, hour, minute, second, millisecond, microsecond. */
export const date_trunc = (unit: string, c: ColumnLike): Column => fn('date_trunc', unit, toColumn(c));
export const trunc = (c: ColumnLike, unit: string): Column => fn('trunc', toColumn(c), unit);
export const date_format = (c: ColumnLike, format: string): Column => fn('date_format', toColumn(c), format);
export const from_unixtime = (c: ColumnLike, format = 'yyyy-MM-dd HH:mm:ss'): Column => fn('from_unixtime', toColumn(c), format);
/** Spark's unix_timestamp: seconds since the epoch of `c` (a string parsed by `format`), or of the batch time without arguments. */
export const unix_timestamp = (c?: ColumnLike, format = 'yyyy-MM-dd HH:mm:ss'): Column => (c === undefined ? fn('unix_timestamp') : fn('unix_timestamp', toColumn(c), format));
export const current_date = (): Column => fn('current_date');
export const date_add = (c: ColumnLike, days: ColumnOrValue): Column => fn('date_add', toColumn(c), days);
export const date_sub = (c: ColumnLike, days: ColumnOrValue): Column => fn('date_sub', toColumn(c), days);
export const datediff = (end: ColumnLike, start: ColumnLike): Column => fn('datediff', toColumn(end), toColumn(start));
export const add_months = (c: ColumnLike, months: ColumnOrValue): Column => fn('add_months', toColumn(c), months);
export const months_between = (end: ColumnLike, start: ColumnLike, roundOff = true): Column => fn('months_between', toColumn(end), toColumn(start), roundOff);
export const last_day = (c: ColumnLike): Column => fn('last_day', toColumn(c));
export const next_day = (c: ColumnLike, dayOfWeek: string): Column => fn('next_day', toColumn(c), dayOfWeek);
export const make_date = (year: ColumnOrValue, month: ColumnOrValue, day: ColumnOrValue): Column => fn('make_date', year, month, day);
export const year = (c: ColumnLike): Column => fn('year', toColumn(c));
export const quarter = (c: ColumnLike): Column => fn('quarter', toColumn(c));
export const month = (c: ColumnLike): Column => fn('month', toColumn(c));
export const dayofmonth = (c: ColumnLike): Column => fn('dayofmonth', toColumn(c));
export const dayofyear = (c: ColumnLike): Column => fn('dayofyear', toColumn(c));
/** 1 = Sunday ... 7 = Saturday, as Spark. */
export const dayofweek = (c: ColumnLike): Column => fn('dayofweek', toColumn(c));
/** 0 = Monday ... 6 = Sunday, as Spark. */
export const weekday = (c: ColumnLike): Column => fn('weekday', toColumn(c));
export const weekofyear = (c: ColumnLike): Column => fn('weekofyear', toColumn(c));
export const hour = (c: ColumnLike): Column => fn('hour', toColumn(c));
export const minute = (c: ColumnLike): Column => fn('minute', toColumn(c));
export const second = (c: ColumnLike): Column => fn('second', toColumn(c));
export const unix_date = (c: ColumnLike): Column => fn('unix_date', toColumn(c));
export const date_from_unix_date = (c: ColumnLike): Column => fn('date_from_unix_date', toColumn(c));
export const unix_seconds = (c: ColumnLike): Column => fn('unix_seconds', toColumn(c));
export const unix_millis = (c: ColumnLike): Column => fn('unix_millis', toColumn(c));
export const timestamp_millis = (c: ColumnLike): Column => fn('timestamp_millis', toColumn(c));
export const timestamp_micros = (c: ColumnLike): Column => fn('timestamp_micros', toColumn(c));
