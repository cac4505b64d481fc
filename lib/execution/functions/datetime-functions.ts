import type { BoundCall, BoundExpr } from '../../analysis/bound-expr.js';
import { AnsiDataError, castInvalidInput } from '../../core/ansi-errors.js';
import { civilFromDays, daysFromCivil, daysInMonth, daysOfMicros, MICROS_PER_DAY, parseDate } from '../../core/dates.js';
import { compileDatetimePattern, DatetimeParseError, DatetimePatternError, type DatetimePattern } from '../../core/datetime-pattern.js';
import { longToDouble, type LongValue } from '../../core/long.js';
import { stringToTimestamp } from '../type-casts.js';
import type { DataType } from '../../plan/data-types.js';
import { invalidDatetimePattern } from '../../plan/function-catalog/datetime-signatures.js';
import { nullIntolerant, type Evaluator, type ScalarFunctionImplementation } from './implementation.js';

/**
 * Date/time functions (signatures: lib/plan/function-catalog/datetime-signatures.ts), in the UTC
 * session time zone. Dates are days since the epoch, timestamps epoch microseconds. Where Spark 4
 * under ANSI mode raises (an unparsable string: CAST_INVALID_INPUT without a pattern,
 * CANNOT_PARSE_TIMESTAMP with one; make_date of an impossible date), so does Sluice; the try_
 * forms give NULL.
 */

const DEFAULT_TIMESTAMP_PATTERN = 'yyyy-MM-dd HH:mm:ss';

/** A date-like argument as days since the epoch (a string is cast to date, ANSI). */
function daysReader(type: DataType): (v: unknown) => number {
  if (type === 'date') return (v) => v as number;
  if (type === 'timestamp') return (v) => daysOfMicros(v as number);
  return (v) => {
    const days = parseDate(String(v));
    if (days === null) throw castInvalidInput(String(v), 'string', 'date');
    return days;
  };
}

/** A date-like argument as epoch microseconds (a string is cast to timestamp, ANSI). */
function microsReader(type: DataType): (v: unknown) => number | null {
  if (type === 'timestamp') return (v) => v as number;
  if (type === 'date') return (v) => (v as number) * MICROS_PER_DAY;
  return (v) => stringToTimestamp(String(v));
}

const argType = (call: BoundCall, i: number): DataType => call.args[i]!.type;

/** `f` of a time that a string cast gave (NULL for one it cannot hold: beyond the exact range, or without a date). */
const ifKnown = <T>(micros: number | null, f: (micros: number) => T): T | null => (micros === null ? null : f(micros));

/** Spark's CANNOT_PARSE_TIMESTAMP (SQLSTATE 22007). */
function cannotParseTimestamp(reason: string): AnsiDataError {
  return new AnsiDataError(
    `[CANNOT_PARSE_TIMESTAMP] ${reason}. Use \`try_to_timestamp\` to tolerate invalid input string and return NULL instead. SQLSTATE: 22007`,
    { code: 'CANNOT_PARSE_TIMESTAMP', errorClass: 'CANNOT_PARSE_TIMESTAMP', retryable: false, hint: 'fix the pattern or the producer, or use try_to_timestamp.' },
  );
}

/** A pattern argument: compiled once when it is a literal, per row otherwise. */
function patternOf(arg: BoundExpr | undefined, evaluate: Evaluator | undefined, fallback: string): (row: unknown[]) => DatetimePattern | null {
  const compile = (text: string): DatetimePattern => {
    try {
      return compileDatetimePattern(text);
    } catch (error) {
      if (error instanceof DatetimePatternError) throw invalidDatetimePattern(text, error.message);
      throw error;
    }
  };
  if (arg === undefined) {
    const fixed = compile(fallback);
    return () => fixed;
  }
  if (arg.kind === 'literal') {
    const fixed = arg.value === null ? null : compile(String(arg.value));
    return () => fixed;
  }
  const cache = new Map<string, DatetimePattern>();
  return (row) => {
    const text = evaluate!(row);
    if (text === null || text === undefined) return null;
    let p = cache.get(String(text));
    if (!p) cache.set(String(text), (p = compile(String(text))));
    return p;
  };
}

/** Parses a string with a pattern; a parse failure raises CANNOT_PARSE_TIMESTAMP, or gives NULL when tolerated. */
function parseWithPattern(pattern: DatetimePattern, text: string, tolerate: boolean): number | null {
  try {
    return pattern.parse(text);
  } catch (error) {
    if (!(error instanceof DatetimeParseError)) throw error;
    if (tolerate) return null;
    throw cannotParseTimestamp(error.message);
  }
}

/** to_timestamp / try_to_timestamp / to_date / unix_timestamp's parse of their first argument, in micros. */
function compileToMicros(args: readonly Evaluator[], call: BoundCall, tolerate: boolean, defaultPattern: string | null): Evaluator {
  const [value, format] = args;
  const type = argType(call, 0);
  if (type !== 'string') {
    const read = microsReader(type);
    return nullIntolerant([value!], ([v]) => read(v));
  }
  if (format === undefined && defaultPattern === null) {
    // Without a pattern, Spark casts the string: CAST_INVALID_INPUT under ANSI.
    return nullIntolerant([value!], ([v]) => {
      try {
        return stringToTimestamp(String(v));
      } catch (error) {
        if (tolerate && error instanceof AnsiDataError) return null;
        throw error;
      }
    });
  }
  const pattern = patternOf(call.args[1], format, defaultPattern ?? DEFAULT_TIMESTAMP_PATTERN);
  return (row) => {
    const v = value!(row);
    if (v === null || v === undefined) return null;
    const p = pattern(row);
    return p === null ? null : parseWithPattern(p, String(v), tolerate);
  };
}

function dateFunction(name: string, f: (days: number) => unknown): ScalarFunctionImplementation {
  return {
    name,
    compile: (args, call) => {
      const read = daysReader(argType(call, 0));
      return nullIntolerant(args, ([v]) => ifKnown(read(v), f));
    },
  };
}

function timeFunction(name: string, f: (micros: number) => number): ScalarFunctionImplementation {
  return {
    name,
    compile: (args, call) => {
      const read = microsReader(argType(call, 0));
      return nullIntolerant(args, ([v]) => ifKnown(read(v), f));
    },
  };
}

const floorDiv = (a: number, b: number): number => Math.floor(a / b);
const microsOfDay = (micros: number): number => micros - floorDiv(micros, MICROS_PER_DAY) * MICROS_PER_DAY;

/** Days since the epoch of the Monday on or before `days` (1970-01-01 was a Thursday). */
const mondayOf = (days: number): number => days - ((((days + 3) % 7) + 7) % 7);

function addMonths(days: number, months: number): number {
  const { year, month, day } = civilFromDays(days);
  const total = year * 12 + (month - 1) + months;
  const y = Math.floor(total / 12);
  const m = total - y * 12 + 1;
  return daysFromCivil(y, m, Math.min(day, daysInMonth(y, m)));
}

/** Spark's trunc/date_trunc units at day granularity or coarser; null for an unknown unit. */
function truncateDays(days: number, unit: string): number | null {
  const { year, month } = civilFromDays(days);
  switch (unit) {
    case 'YEAR': case 'YYYY': case 'YY': return daysFromCivil(year, 1, 1);
    case 'QUARTER': return daysFromCivil(year, month - ((month - 1) % 3), 1);
    case 'MONTH': case 'MM': case 'MON': return daysFromCivil(year, month, 1);
    case 'WEEK': return mondayOf(days);
    default: return null;
  }
}

const TIME_UNITS: Readonly<Record<string, number>> = {
  DAY: MICROS_PER_DAY, DD: MICROS_PER_DAY, HOUR: 3_600_000_000, MINUTE: 60_000_000, SECOND: 1_000_000, MILLISECOND: 1000, MICROSECOND: 1,
};

function truncateMicros(micros: number, unit: string): number | null {
  const step = TIME_UNITS[unit];
  if (step !== undefined) return micros - (((micros % step) + step) % step);
  const days = truncateDays(daysOfMicros(micros), unit);
  return days === null ? null : days * MICROS_PER_DAY;
}

function datetimeFieldOutOfBounds(year: number, month: number, day: number): AnsiDataError {
  const monthName = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'][month - 1];
  const reason = month < 1 || month > 12
    ? `Invalid value for MonthOfYear (valid values 1 - 12): ${month}`
    : day === 29 && month === 2 ? `Invalid date 'February 29' as '${year}' is not a leap year`
      : day < 1 || day > 31 ? `Invalid value for DayOfMonth (valid values 1 - 28/31): ${day}` : `Invalid date '${monthName!.toUpperCase()} ${day}'`;
  return new AnsiDataError(
    `[DATETIME_FIELD_OUT_OF_BOUNDS] ${reason}. If necessary set "spark.sql.ansi.enabled" to "false" to bypass this error. SQLSTATE: 22023`,
    { code: 'DATETIME_FIELD_OUT_OF_BOUNDS', errorClass: 'DATETIME_FIELD_OUT_OF_BOUNDS', retryable: false, hint: 'check the year, month and day columns.' },
  );
}

const WEEKDAY_NAMES: Readonly<Record<string, number>> = {
  MO: 0, MON: 0, MONDAY: 0, TU: 1, TUE: 1, TUESDAY: 1, WE: 2, WED: 2, WEDNESDAY: 2, TH: 3, THU: 3, THURSDAY: 3,
  FR: 4, FRI: 4, FRIDAY: 4, SA: 5, SAT: 5, SATURDAY: 5, SU: 6, SUN: 6, SUNDAY: 6,
};

/** ISO-8601 week of the year (weeks start on Monday, week 1 holds the year's first Thursday). */
function isoWeek(days: number): number {
  const thursday = mondayOf(days) + 3;
  const { year } = civilFromDays(thursday);
  return Math.floor((thursday - daysFromCivil(year, 1, 1)) / 7) + 1;
}

/** Spark's months_between: whole months when both days are the same day or both month ends, else by 31-day months. */
function monthsBetween(a: number, b: number, roundOff: boolean): number {
  const da = daysOfMicros(a);
  const db = daysOfMicros(b);
  const x = civilFromDays(da);
  const y = civilFromDays(db);
  const months = (x.year - y.year) * 12 + (x.month - y.month);
  const lastA = x.day === daysInMonth(x.year, x.month);
  const lastB = y.day === daysInMonth(y.year, y.month);
  if (x.day === y.day || (lastA && lastB)) return months;
  // Whole seconds of the day: Spark drops the fraction (checked against PySpark 4.0.1 by spark-diff).
  const secondsInDay = (m: number): number => Math.floor(microsOfDay(m) / 1_000_000);
  const diff = (x.day - y.day) * 86_400 + secondsInDay(a) - secondsInDay(b);
  const result = months + diff / (31 * 86_400);
  return roundOff ? Math.round(result * 1e8) / 1e8 : result;
}

export const DATETIME_FUNCTIONS: readonly ScalarFunctionImplementation[] = [
  { name: 'to_timestamp', compile: (args, call) => compileToMicros(args, call, false, null) },
  { name: 'try_to_timestamp', compile: (args, call) => compileToMicros(args, call, true, null) },
  {
    name: 'to_date',
    compile: (args, call) => {
      if (argType(call, 0) === 'string' && args.length === 1) {
        const read = daysReader('string');
        return nullIntolerant(args, ([v]) => read(v));
      }
      const micros = compileToMicros(args, call, false, null);
      return (row) => {
        const m = micros(row);
        return m === null ? null : daysOfMicros(m as number);
      };
    },
  },
  {
    name: 'unix_timestamp',
    compile: (args, call, ctx) => {
      if (args.length === 0) return () => Math.floor(ctx.batchTimestampMs / 1000);
      const micros = compileToMicros(args, call, false, DEFAULT_TIMESTAMP_PATTERN);
      // Spark divides the micros by 10^6 (toward zero): 1969-12-31 23:59:59.5 gives 0.
      return (row) => {
        const m = micros(row);
        return m === null ? null : Math.trunc((m as number) / 1_000_000) + 0;
      };
    },
  },
  {
    name: 'from_unixtime',
    compile: (args, call) => {
      const pattern = patternOf(call.args[1], args[1], DEFAULT_TIMESTAMP_PATTERN);
      const [seconds] = args;
      return (row) => {
        const s = seconds!(row);
        if (s === null || s === undefined) return null;
        const p = pattern(row);
        return p === null ? null : p.format(Math.trunc(longToDouble(s as LongValue)) * 1_000_000);
      };
    },
  },
  {
    name: 'date_format',
    compile: (args, call) => {
      const read = microsReader(argType(call, 0));
      const pattern = patternOf(call.args[1], args[1], DEFAULT_TIMESTAMP_PATTERN);
      const [value] = args;
      return (row) => {
        const v = value!(row);
        if (v === null || v === undefined) return null;
        const p = pattern(row);
        return p === null ? null : ifKnown(read(v), (micros) => p.format(micros));
      };
    },
  },
  {
    name: 'date_trunc',
    compile: (args, call) => {
      const read = microsReader(argType(call, 1));
      return nullIntolerant(args, ([unit, v]) => ifKnown(read(v), (micros) => truncateMicros(micros, String(unit).toUpperCase())));
    },
  },
  {
    name: 'trunc',
    compile: (args, call) => {
      const read = daysReader(argType(call, 0));
      return nullIntolerant(args, ([v, unit]) => truncateDays(read(v), String(unit).toUpperCase()));
    },
  },
  { name: 'current_date', compile: (_args, _call, ctx) => () => Math.floor(ctx.batchTimestampMs / 86_400_000) },
  { name: 'curdate', compile: (_args, _call, ctx) => () => Math.floor(ctx.batchTimestampMs / 86_400_000) },
  {
    name: 'date_add',
    compile: (args, call) => {
      const read = daysReader(argType(call, 0));
      return nullIntolerant(args, ([v, n]) => read(v) + longToDouble(n as LongValue));
    },
  },
  {
    name: 'date_sub',
    compile: (args, call) => {
      const read = daysReader(argType(call, 0));
      return nullIntolerant(args, ([v, n]) => read(v) - longToDouble(n as LongValue));
    },
  },
  {
    name: 'datediff',
    compile: (args, call) => {
      const end = daysReader(argType(call, 0));
      const start = daysReader(argType(call, 1));
      return nullIntolerant(args, ([a, b]) => end(a) - start(b));
    },
  },
  {
    name: 'add_months',
    compile: (args, call) => {
      const read = daysReader(argType(call, 0));
      return nullIntolerant(args, ([v, n]) => addMonths(read(v), longToDouble(n as LongValue)));
    },
  },
  {
    name: 'months_between',
    compile: (args, call) => {
      const a = microsReader(argType(call, 0));
      const b = microsReader(argType(call, 1));
      return nullIntolerant(args, ([x, y, roundOff]) => ifKnown(a(x), (ma) => ifKnown(b(y), (mb) => monthsBetween(ma, mb, roundOff !== false))));
    },
  },
  dateFunction('last_day', (days) => {
    const { year, month } = civilFromDays(days);
    return daysFromCivil(year, month, daysInMonth(year, month));
  }),
  {
    name: 'next_day',
    compile: (args, call) => {
      const read = daysReader(argType(call, 0));
      return nullIntolerant(args, ([v, name]) => {
        const target = WEEKDAY_NAMES[String(name).trim().toUpperCase()];
        if (target === undefined) {
          throw new AnsiDataError(`[ILLEGAL_DAY_OF_WEEK] Illegal input for day of week: ${String(name)}. SQLSTATE: 22009`, {
            code: 'ILLEGAL_DAY_OF_WEEK', errorClass: 'ILLEGAL_DAY_OF_WEEK', retryable: false,
          });
        }
        const days = read(v);
        const weekday = (((days + 3) % 7) + 7) % 7;
        return days + (((target - weekday + 6) % 7) + 1);
      });
    },
  },
  {
    name: 'make_date',
    compile: (args) => nullIntolerant(args, ([y, m, d]) => {
      const [year, month, day] = [y, m, d].map((x) => longToDouble(x as LongValue)) as [number, number, number];
      if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) throw datetimeFieldOutOfBounds(year, month, day);
      return daysFromCivil(year, month, day);
    }),
  },
  dateFunction('year', (days) => civilFromDays(days).year),
  dateFunction('quarter', (days) => Math.ceil(civilFromDays(days).month / 3)),
  dateFunction('month', (days) => civilFromDays(days).month),
  dateFunction('dayofmonth', (days) => civilFromDays(days).day),
  dateFunction('day', (days) => civilFromDays(days).day),
  dateFunction('dayofyear', (days) => days - daysFromCivil(civilFromDays(days).year, 1, 1) + 1),
  // Spark: dayofweek 1 = Sunday ... 7 = Saturday; weekday 0 = Monday ... 6 = Sunday.
  dateFunction('dayofweek', (days) => ((((days + 4) % 7) + 7) % 7) + 1),
  dateFunction('weekday', (days) => (((days + 3) % 7) + 7) % 7),
  dateFunction('weekofyear', isoWeek),
  timeFunction('hour', (micros) => Math.floor(microsOfDay(micros) / 3_600_000_000)),
  timeFunction('minute', (micros) => Math.floor(microsOfDay(micros) / 60_000_000) % 60),
  timeFunction('second', (micros) => Math.floor(microsOfDay(micros) / 1_000_000) % 60),
  dateFunction('unix_date', (days) => days),
  { name: 'date_from_unix_date', compile: (args) => nullIntolerant(args, ([n]) => longToDouble(n as LongValue)) },
  { name: 'unix_seconds', compile: (args) => nullIntolerant(args, ([m]) => floorDiv(m as number, 1_000_000)) },
  { name: 'unix_millis', compile: (args) => nullIntolerant(args, ([m]) => floorDiv(m as number, 1000)) },
  { name: 'timestamp_millis', compile: (args) => nullIntolerant(args, ([n]) => longToDouble(n as LongValue) * 1000) },
  { name: 'timestamp_micros', compile: (args) => nullIntolerant(args, ([n]) => longToDouble(n as LongValue)) },
];

/** `date + n`, `n + date`, `date - n` (Spark's DateAdd/DateSub); null for other operand types. */
export function compileDateArithmetic(fn: string, resultType: DataType, argTypes: readonly DataType[], args: readonly Evaluator[]): Evaluator | null {
  if (resultType !== 'date' || args.length !== 2) return null;
  const sign = fn === '-' ? -1 : 1;
  const dateFirst = argTypes[0] === 'date';
  return nullIntolerant(args, ([a, b]) => (dateFirst ? (a as number) + sign * longToDouble(b as LongValue) : (b as number) + longToDouble(a as LongValue)));
}
