/** PySpark-style function builders: `import { col, window, count } from 'sluice'`. */
import { Column, toColumn, toExpr, literalExpr, type ColumnLike, type ColumnOrValue, type LiteralValue } from './column.js';
import { defaultName, type AggregateFunctionName, type Expr } from './expressions.js';
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
/** Splits around matches of a Java regex (as Spark: trailing empty strings kept); at most `limit` parts when limit > 0. */
export const split = (c: ColumnLike, pattern: string, limit = -1): Column => fn('split', toColumn(c), pattern, limit);
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

// ---- Scalar functions of the catalog (lib/plan/function-catalog): strings, regular expressions,
// math, NULL handling, JSON, arrays, hashes. Parameters PySpark takes as plain values (patterns,
// lengths, paths) take values here; ColumnLike parameters take a Column or a column name.
type StrOrCol = string | Column;

export const ltrim = (c: ColumnLike): Column => fn('ltrim', toColumn(c));
export const rtrim = (c: ColumnLike): Column => fn('rtrim', toColumn(c));
export const btrim = (c: ColumnLike, trimChars?: ColumnOrValue): Column => (trimChars === undefined ? fn('btrim', toColumn(c)) : fn('btrim', toColumn(c), trimChars));
export const lpad = (c: ColumnLike, len: number, pad = ' '): Column => fn('lpad', toColumn(c), len, pad);
export const rpad = (c: ColumnLike, len: number, pad = ' '): Column => fn('rpad', toColumn(c), len, pad);
export const instr = (c: ColumnLike, substr: string): Column => fn('instr', toColumn(c), substr);
/** 1-based position of `substr` in `c` at or after `pos`; 0 when absent. */
export const locate = (substr: string, c: ColumnLike, pos = 1): Column => fn('locate', substr, toColumn(c), pos);
export const replace = (c: ColumnLike, search: StrOrCol, replacement: StrOrCol = ''): Column => fn('replace', toColumn(c), search, replacement);
/** A string's characters, or an array's elements, in reverse order. */
export const reverse = (c: ColumnLike): Column => fn('reverse', toColumn(c));
export const initcap = (c: ColumnLike): Column => fn('initcap', toColumn(c));
export const repeat = (c: ColumnLike, n: number | Column): Column => fn('repeat', toColumn(c), n);
export const translate = (c: ColumnLike, matching: string, replacement: string): Column => fn('translate', toColumn(c), matching, replacement);
export const substring_index = (c: ColumnLike, delim: string, count: number): Column => fn('substring_index', toColumn(c), delim, count);
export const left = (c: ColumnLike, len: number | Column): Column => fn('left', toColumn(c), len);
export const right = (c: ColumnLike, len: number | Column): Column => fn('right', toColumn(c), len);
export const ascii = (c: ColumnLike): Column => fn('ascii', toColumn(c));
export const startswith = (c: ColumnLike, prefix: StrOrCol): Column => fn('startswith', toColumn(c), prefix);
export const endswith = (c: ColumnLike, suffix: StrOrCol): Column => fn('endswith', toColumn(c), suffix);
export const contains = (c: ColumnLike, part: StrOrCol): Column => fn('contains', toColumn(c), part);
export const split_part = (c: ColumnLike, delim: StrOrCol, partNum: number | Column): Column => fn('split_part', toColumn(c), delim, partNum);
export const char_length = (c: ColumnLike): Column => fn('char_length', toColumn(c));
export const octet_length = (c: ColumnLike): Column => fn('octet_length', toColumn(c));
export const levenshtein = (l: ColumnLike, r: ColumnLike): Column => fn('levenshtein', toColumn(l), toColumn(r));

/** Group `idx` (default 1) of the first match of a Java regex; '' when nothing matches. */
export const regexp_extract = (c: ColumnLike, pattern: string, idx = 1): Column => fn('regexp_extract', toColumn(c), pattern, idx);
export const regexp_extract_all = (c: ColumnLike, pattern: StrOrCol, idx = 1): Column => fn('regexp_extract_all', toColumn(c), pattern, idx);
/** Every match of a Java regex replaced; `$1`/`${name}` in the replacement are groups, as in Java. */
export const regexp_replace = (c: ColumnLike, pattern: StrOrCol, replacement: StrOrCol): Column => fn('regexp_replace', toColumn(c), pattern, replacement);
export const regexp_like = (c: ColumnLike, pattern: StrOrCol): Column => fn('regexp_like', toColumn(c), pattern);
export const regexp_count = (c: ColumnLike, pattern: StrOrCol): Column => fn('regexp_count', toColumn(c), pattern);
export const regexp_substr = (c: ColumnLike, pattern: StrOrCol): Column => fn('regexp_substr', toColumn(c), pattern);
export const regexp_instr = (c: ColumnLike, pattern: StrOrCol, idx = 0): Column => fn('regexp_instr', toColumn(c), pattern, idx);

/** Rounds HALF_UP (away from zero at .5) on the decimal value, as Spark does: round(2.675, 2) = 2.68. */
export const round = (c: ColumnLike, scale = 0): Column => fn('round', toColumn(c), scale);
/** Rounds HALF_EVEN (banker's rounding). */
export const bround = (c: ColumnLike, scale = 0): Column => fn('bround', toColumn(c), scale);
export const floor = (c: ColumnLike): Column => fn('floor', toColumn(c));
export const ceil = (c: ColumnLike): Column => fn('ceil', toColumn(c));
export const ceiling = ceil;
export const abs = (c: ColumnLike): Column => fn('abs', toColumn(c));
export const sqrt = (c: ColumnLike): Column => fn('sqrt', toColumn(c));
export const cbrt = (c: ColumnLike): Column => fn('cbrt', toColumn(c));
export const exp = (c: ColumnLike): Column => fn('exp', toColumn(c));
/** `log(x)` is the natural logarithm; `log(base, x)` as in PySpark. NULL for arguments <= 0. */
export function log(arg1: ColumnLike | number, arg2?: ColumnLike): Column {
  if (arg2 === undefined) return fn('ln', toColumn(arg1 as ColumnLike));
  return fn('log', typeof arg1 === 'number' ? arg1 : toColumn(arg1), toColumn(arg2));
}
export const ln = (c: ColumnLike): Column => fn('ln', toColumn(c));
export const log10 = (c: ColumnLike): Column => fn('log10', toColumn(c));
export const log2 = (c: ColumnLike): Column => fn('log2', toColumn(c));
export const log1p = (c: ColumnLike): Column => fn('log1p', toColumn(c));
export const pow = (base: ColumnLike | number, exponent: ColumnLike | number): Column => fn('pow', numberOrColumn(base), numberOrColumn(exponent));
export const power = pow;
export const signum = (c: ColumnLike): Column => fn('signum', toColumn(c));
export const sign = signum;
export const sin = (c: ColumnLike): Column => fn('sin', toColumn(c));
export const cos = (c: ColumnLike): Column => fn('cos', toColumn(c));
export const tan = (c: ColumnLike): Column => fn('tan', toColumn(c));
export const atan2 = (y: ColumnLike | number, x: ColumnLike | number): Column => fn('atan2', numberOrColumn(y), numberOrColumn(x));
export const degrees = (c: ColumnLike): Column => fn('degrees', toColumn(c));
export const radians = (c: ColumnLike): Column => fn('radians', toColumn(c));
/** The non-negative remainder. */
export const pmod = (dividend: ColumnLike | number, divisor: ColumnLike | number): Column => fn('pmod', numberOrColumn(dividend), numberOrColumn(divisor));
/** The largest non-NULL value (NULL only when all are NULL); at least two columns. */
export const greatest = (...cs: ColumnLike[]): Column => fn('greatest', ...cs.map(toColumn));
export const least = (...cs: ColumnLike[]): Column => fn('least', ...cs.map(toColumn));

export const nvl = (c: ColumnLike, replacement: ColumnLike): Column => fn('nvl', toColumn(c), toColumn(replacement));
export const ifnull = (c: ColumnLike, replacement: ColumnLike): Column => fn('ifnull', toColumn(c), toColumn(replacement));
/** `ifNotNull` when `c` is not NULL, else `ifNull`. */
export const nvl2 = (c: ColumnLike, ifNotNull: ColumnLike, ifNull: ColumnLike): Column => fn('nvl2', toColumn(c), toColumn(ifNotNull), toColumn(ifNull));
export const nullif = (c: ColumnLike, other: ColumnLike): Column => fn('nullif', toColumn(c), toColumn(other));
export const equal_null = (c: ColumnLike, other: ColumnLike): Column => fn('equal_null', toColumn(c), toColumn(other));
export const isnan = (c: ColumnLike): Column => fn('isnan', toColumn(c));
export const nanvl = (c: ColumnLike, replacement: ColumnLike): Column => fn('nanvl', toColumn(c), toColumn(replacement));
export const zeroifnull = (c: ColumnLike): Column => fn('zeroifnull', toColumn(c));
export const nullifzero = (c: ColumnLike): Column => fn('nullifzero', toColumn(c));

/** Parses JSON text into `schema` (`'a INT, b STRING'` or `'struct<a:int>'`); malformed text gives a struct of NULLs. */
export const from_json = (c: ColumnLike, schema: string): Column => fn('from_json', toColumn(c), schema);
export const to_json = (c: ColumnLike): Column => fn('to_json', toColumn(c));
/** The value at a JSON path (`$.a.b[0]`) as text; NULL when absent or when the text is not JSON. */
export const get_json_object = (c: ColumnLike, path: string): Column => fn('get_json_object', toColumn(c), path);
export const json_array_length = (c: ColumnLike): Column => fn('json_array_length', toColumn(c));
export const json_object_keys = (c: ColumnLike): Column => fn('json_object_keys', toColumn(c));

export const array_contains = (c: ColumnLike, v: ColumnOrValue): Column => fn('array_contains', toColumn(c), v);
/** The element at a 1-based index (negative: from the end); an index out of range fails, as under Spark's ANSI mode. */
export const element_at = (c: ColumnLike, index: number | Column): Column => fn('element_at', toColumn(c), index);
export const try_element_at = (c: ColumnLike, index: number | Column): Column => fn('try_element_at', toColumn(c), index);
export const array_distinct = (c: ColumnLike): Column => fn('array_distinct', toColumn(c));
export function array_join(c: ColumnLike, delimiter: string, nullReplacement?: string): Column {
  return nullReplacement === undefined ? fn('array_join', toColumn(c), delimiter) : fn('array_join', toColumn(c), delimiter, nullReplacement);
}
export const array_position = (c: ColumnLike, v: ColumnOrValue): Column => fn('array_position', toColumn(c), v);
export const array_remove = (c: ColumnLike, v: ColumnOrValue): Column => fn('array_remove', toColumn(c), v);
export const array_append = (c: ColumnLike, v: ColumnOrValue): Column => fn('array_append', toColumn(c), v);
export const array_max = (c: ColumnLike): Column => fn('array_max', toColumn(c));
export const array_min = (c: ColumnLike): Column => fn('array_min', toColumn(c));
export const array_sort = (c: ColumnLike): Column => fn('array_sort', toColumn(c));
export const array_compact = (c: ColumnLike): Column => fn('array_compact', toColumn(c));
export const sort_array = (c: ColumnLike, asc = true): Column => fn('sort_array', toColumn(c), asc);
export const slice = (c: ColumnLike, start: number | Column, length: number | Column): Column => fn('slice', toColumn(c), start, length);
export const flatten = (c: ColumnLike): Column => fn('flatten', toColumn(c));
export const cardinality = (c: ColumnLike): Column => fn('cardinality', toColumn(c));
export const array_repeat = (c: ColumnLike, count: number | Column): Column => fn('array_repeat', toColumn(c), count);
export const arrays_overlap = (a: ColumnLike, b: ColumnLike): Column => fn('arrays_overlap', toColumn(a), toColumn(b));
export const array_union = (a: ColumnLike, b: ColumnLike): Column => fn('array_union', toColumn(a), toColumn(b));
export const array_intersect = (a: ColumnLike, b: ColumnLike): Column => fn('array_intersect', toColumn(a), toColumn(b));
export const array_except = (a: ColumnLike, b: ColumnLike): Column => fn('array_except', toColumn(a), toColumn(b));

/** A struct of the columns, each field named as the column (as Spark's struct()). */
export function struct(...cs: ColumnLike[]): Column {
  return fn('named_struct', ...cs.flatMap((c) => { const e = toColumn(c).expr; return [defaultName(e), new Column(e)]; }));
}
export const named_struct = (...namesAndValues: ColumnOrValue[]): Column => fn('named_struct', ...namesAndValues);
/** `x` with `d` decimals and thousands separators ('1,234.57'), rounded HALF_EVEN. */
export const format_number = (c: ColumnLike, d: number): Column => fn('format_number', toColumn(c), d);

export const md5 = (c: ColumnLike): Column => fn('md5', toColumn(c));
export const sha1 = (c: ColumnLike): Column => fn('sha1', toColumn(c));
/** SHA-2 of `numBits` 224, 256 (or 0), 384 or 512; other lengths give NULL. */
export const sha2 = (c: ColumnLike, numBits: number): Column => fn('sha2', toColumn(c), numBits);
export const crc32 = (c: ColumnLike): Column => fn('crc32', toColumn(c));
export const hex = (c: ColumnLike): Column => fn('hex', toColumn(c));
/** Spark's hash(): Murmur3 x86_32 with seed 42 over the columns, as an int (equal to Spark's for the same values). */
export const hash = (...cs: ColumnLike[]): Column => fn('hash', ...cs.map(toColumn));
export const xxhash64 = (...cs: ColumnLike[]): Column => fn('xxhash64', ...cs.map(toColumn));

function numberOrColumn(v: ColumnLike | number): ColumnOrValue {
  return typeof v === 'number' ? v : toColumn(v);
}
