import { describe, expect, it } from 'vitest';
import { bind } from '../../lib/analysis/binder.js';
import { compile } from '../../lib/execution/evaluate.js';
import { newEvalContext } from '../../lib/execution/eval-context.js';
import { newAttribute } from '../../lib/plan/attribute.js';
import type { Column } from '../../lib/plan/column.js';
import type { DataType } from '../../lib/plan/data-types.js';
import * as F from '../../lib/plan/functions.js';
import { daysFromCivil, formatDate } from '../../lib/core/dates.js';
import { formatTimestamp, parseTimestamp } from '../../lib/core/timestamps.js';

/** Evaluates `c` over one row whose columns are `s` (string), `d` (date), `t` (timestamp), `n` (int). */
const input = [newAttribute('s', 'string'), newAttribute('d', 'date'), newAttribute('t', 'timestamp'), newAttribute('n', 'int')];
function run(c: Column, row: { s?: string | null; d?: string | null; t?: string | null; n?: number | null }, batchMs = 0): { value: unknown; type: DataType } {
  const bound = bind(c.expr, input);
  const ctx = newEvalContext();
  ctx.batchTimestampMs = batchMs;
  const value = compile(bound, ctx)([
    row.s ?? null,
    row.d == null ? null : daysFromCivil(...(row.d.split('-').map(Number) as [number, number, number])),
    row.t == null ? null : parseTimestamp(row.t),
    row.n ?? null,
  ]);
  return { value, type: bound.type };
}
const asDate = (r: { value: unknown }): string | null => (r.value === null ? null : formatDate(r.value as number));
const asTs = (r: { value: unknown }): string | null => (r.value === null ? null : formatTimestamp(r.value as number));

// Expected values from PySpark 4.0.1 (local[1], session time zone UTC).
describe('date/time functions', () => {
  it('to_timestamp without a pattern casts (CAST_INVALID_INPUT under ANSI), with one parses it (CANNOT_PARSE_TIMESTAMP)', () => {
    expect(asTs(run(F.to_timestamp('s'), { s: '2024-01-02 03:04:05' }))).toBe('2024-01-02 03:04:05');
    expect(asTs(run(F.to_timestamp('s', 'dd/MM/yyyy HH:mm'), { s: '02/01/2024 03:04' }))).toBe('2024-01-02 03:04:00');
    expect(() => run(F.to_timestamp('s'), { s: 'garbage' })).toThrow(/\[CAST_INVALID_INPUT\] The value 'garbage' of the type "STRING" cannot be cast to "TIMESTAMP"/);
    expect(() => run(F.to_timestamp('s', 'yyyy-MM-dd'), { s: '2024-13-02' }))
      .toThrow("[CANNOT_PARSE_TIMESTAMP] Text '2024-13-02' could not be parsed: Invalid value for MonthOfYear (valid values 1 - 12): 13. Use `try_to_timestamp`");
    expect(run(F.try_to_timestamp('s', 'yyyy-MM-dd'), { s: 'garbage' }).value).toBeNull();
    expect(run(F.to_timestamp('s'), { s: null }).value).toBeNull();
  });

  it('to_date: a cast without a pattern (impossible dates are malformed), a parse with one', () => {
    expect(asDate(run(F.to_date('s'), { s: '2024-2-3 junk' }))).toBe('2024-02-03');
    expect(() => run(F.to_date('s'), { s: '2024-02-30' })).toThrow(/CAST_INVALID_INPUT.*"DATE"/);
    expect(asDate(run(F.to_date('s', 'MM/dd/yyyy'), { s: '05/06/2024' }))).toBe('2024-05-06');
    expect(asDate(run(F.to_date('t'), { t: '2024-01-01 23:59:59' }))).toBe('2024-01-01');
    expect(run(F.to_date('s'), {}).type).toBe('date');
  });

  it('date_format with Spark pattern letters', () => {
    expect(run(F.date_format('t', 'yyyy-MM-dd HH:mm:ss.SSS EEE E MMM MMMM a hh D'), { t: '2024-01-02 03:04:05.123456' }).value)
      .toBe('2024-01-02 03:04:05.123 Tue Tue Jan January AM 03 2');
    expect(run(F.date_format('d', "yyyy/MM/dd 'day'"), { d: '2024-05-06' }).value).toBe('2024/05/06 day');
  });

  it('from_unixtime and unix_timestamp', () => {
    expect(run(F.from_unixtime(F.lit(0)), {}).value).toBe('1970-01-01 00:00:00');
    expect(run(F.from_unixtime(F.lit(86400), 'yyyy/MM/dd'), {}).value).toBe('1970/01/02');
    expect(run(F.unix_timestamp('s'), { s: '2024-01-01 00:00:00' }).value).toBe(1704067200);
    expect(run(F.unix_timestamp('s', 'MM/dd/yyyy'), { s: '01/01/2024' }).value).toBe(1704067200);
    expect(() => run(F.unix_timestamp('s'), { s: 'garbage' })).toThrow("[CANNOT_PARSE_TIMESTAMP] Text 'garbage' could not be parsed at index 0.");
    expect(run(F.unix_timestamp(), {}, 1_700_000_000_500).value).toBe(1_700_000_000);
  });

  it('date_trunc by unit; an unknown unit gives NULL', () => {
    expect(asTs(run(F.date_trunc('hour', 't'), { t: '2024-01-02 03:04:05' }))).toBe('2024-01-02 03:00:00');
    expect(asTs(run(F.date_trunc('week', 't'), { t: '2024-01-04 03:04:05' }))).toBe('2024-01-01 00:00:00');
    expect(asTs(run(F.date_trunc('quarter', 't'), { t: '2024-05-04 03:04:05' }))).toBe('2024-04-01 00:00:00');
    expect(asTs(run(F.date_trunc('MM', 't'), { t: '2024-05-04 03:04:05' }))).toBe('2024-05-01 00:00:00');
    expect(run(F.date_trunc('bogus', 't'), { t: '2024-05-04 03:04:05' }).value).toBeNull();
    expect(asDate(run(F.trunc('d', 'MM'), { d: '2024-05-06' }))).toBe('2024-05-01');
  });

  it('field extraction from dates, timestamps and strings', () => {
    const t = '2024-05-06 01:02:03.9';
    expect(run(F.year('d'), { d: '2024-05-06' }).value).toBe(2024);
    expect(run(F.month('t'), { t }).value).toBe(5);
    expect(run(F.dayofmonth('s'), { s: '2024-05-06' }).value).toBe(6);
    expect(run(F.hour('t'), { t }).value).toBe(1);
    expect(run(F.minute('s'), { s: '2024-05-06 01:02:03' }).value).toBe(2);
    expect(run(F.second('t'), { t }).value).toBe(3);
    expect(run(F.dayofweek('d'), { d: '2024-05-06' }).value).toBe(2);
    expect(run(F.hour('d'), { d: '2024-01-01' }).value).toBe(0);
    expect(run(F.weekofyear('d'), { d: '2024-01-01' }).value).toBe(1);
    expect(run(F.dayofyear('d'), { d: '2024-02-01' }).value).toBe(32);
    expect(run(F.quarter('d'), { d: '2024-05-01' }).value).toBe(2);
    expect(run(F.weekday('d'), { d: '2024-05-06' }).value).toBe(0);
    expect(() => run(F.year('s'), { s: 'garbage' })).toThrow(/CAST_INVALID_INPUT.*"DATE"/);
    expect(run(F.year('d'), {}).value).toBeNull();
  });

  it('date arithmetic: date_add, date_sub, datediff, add_months, last_day, next_day, make_date, months_between', () => {
    expect(asDate(run(F.date_add('d', 1), { d: '2024-01-31' }))).toBe('2024-02-01');
    expect(asDate(run(F.date_add('d', -1), { d: '2024-01-01' }))).toBe('2023-12-31');
    expect(asDate(run(F.date_sub('s', 1), { s: '2024-01-01' }))).toBe('2023-12-31');
    expect(run(F.datediff(F.lit('2024-03-01'), 'd'), { d: '2024-02-01' }).value).toBe(29);
    expect(asDate(run(F.add_months('d', 1), { d: '2024-01-31' }))).toBe('2024-02-29');
    expect(asDate(run(F.last_day('d'), { d: '2024-02-10' }))).toBe('2024-02-29');
    expect(asDate(run(F.next_day('d', 'Mon'), { d: '2024-05-06' }))).toBe('2024-05-13');
    expect(asDate(run(F.make_date(2024, 2, 29), {}))).toBe('2024-02-29');
    expect(() => run(F.make_date(2023, 2, 29), {}))
      .toThrow("[DATETIME_FIELD_OUT_OF_BOUNDS] Invalid date 'February 29' as '2023' is not a leap year.");
    expect(run(F.months_between(F.to_timestamp(F.lit('2024-03-31 00:00:00')), F.to_timestamp(F.lit('2024-02-29 00:00:00'))), {}).value).toBe(1);
    expect(asDate(run(F.col('d').plus(1), { d: '2024-01-31' }))).toBe('2024-02-01');
  });

  it('current_date is the batch day', () => {
    expect(asDate(run(F.current_date(), {}, Date.UTC(2024, 4, 6, 23, 59)))).toBe('2024-05-06');
  });

  it('refuses a non-date argument and an unknown pattern letter before running', () => {
    expect(() => run(F.year('n'), {})).toThrow(/DATATYPE_MISMATCH\.UNEXPECTED_INPUT_TYPE.*"year\(\.\.\.\)".*"DATE" or "TIMESTAMP" type, however it has the type "INT"/);
    expect(() => run(F.date_format('t', 'yyyy-bb'), {})).toThrow(/INVALID_DATETIME_PATTERN/);
  });
});

describe('date/time edge cases checked on PySpark 4.0.1', () => {
  it('months_between drops the seconds’ fraction; weekofyear is ISO; unix_timestamp truncates toward zero', () => {
    // spark-diff types/date-arithmetic: months_between(2024-01-02 03:04:05.123456, 2024-01-31) = -0.93136014
    expect(run(F.months_between('t', 'd'), { t: '2024-01-02 03:04:05.123456', d: '2024-01-31' }).value).toBe(-0.93136014);
    expect(run(F.months_between(F.to_timestamp(F.lit('2024-03-15 12:00:00')), F.to_timestamp(F.lit('2024-02-01 00:00:00'))), {}).value).toBe(1.46774194);
    expect(run(F.months_between('d', F.to_date(F.lit('2024-02-01')), false), { d: '2024-03-15' }).value).toBeCloseTo(1.4516129032258065, 15);
    expect(run(F.weekofyear('d'), { d: '2021-01-03' }).value).toBe(53);
    expect(run(F.weekofyear('d'), { d: '2020-12-31' }).value).toBe(53);
    expect(run(F.unix_timestamp('t'), { t: '1969-12-31 23:59:59.5' }).value).toBe(0);
    expect(run(F.from_unixtime(F.lit(-1)), {}).value).toBe('1969-12-31 23:59:59');
  });

  it('formats hour-of-day variants and quarters; parses short fields and two-digit years', () => {
    expect(run(F.date_format('t', 'h:mm a, EEEE d MMMM yyyy, k K Q'), { t: '2024-01-02 15:04:05' }).value).toBe('3:04 PM, Tuesday 2 January 2024, 15 3 1');
    expect(asTs(run(F.to_timestamp('s', 'yyyy-M-d'), { s: '2024-1-2' }))).toBe('2024-01-02 00:00:00');
    expect(asTs(run(F.to_timestamp('s', 'yy-MM-dd'), { s: '24-01-02' }))).toBe('2024-01-02 00:00:00');
    expect(asTs(run(F.to_timestamp('s', 'yyyy-MM-dd HH:mm:ss.SSS'), { s: '2024-01-02 03:04:05.12' }))).toBe('2024-01-02 03:04:05.12');
    expect(() => run(F.to_timestamp('s', 'yyyy-MM-dd HH:mm'), { s: '2024-01-02' })).toThrow("Text '2024-01-02' could not be parsed at index 10");
    expect(() => run(F.make_date(2024, 13, 1), {})).toThrow('[DATETIME_FIELD_OUT_OF_BOUNDS] Invalid value for MonthOfYear (valid values 1 - 12): 13.');
    expect(() => run(F.next_day('d', 'xx'), { d: '2024-05-06' })).toThrow('[ILLEGAL_DAY_OF_WEEK] Illegal input for day of week: xx.');
  });
});
