import { AnalysisError } from '../../errors/sluice-error.js';
import type { DataType } from '../data-types.js';
import { argumentTypeError } from './errors.js';
import type { ArgumentInfo, ScalarFunctionSignature } from './signature.js';

/**
 * Signatures of the date/time functions (implementations: lib/execution/functions/datetime-functions.ts).
 * A string argument where a date or timestamp is expected is cast, as Spark's implicit casts do.
 */

const DATE_LIKE: readonly DataType[] = ['date', 'timestamp', 'string', 'null'];
const INTEGRAL: readonly DataType[] = ['int', 'long', 'null'];

function expect(fn: string, args: readonly ArgumentInfo[], index: number, accepted: readonly DataType[], required: string): void {
  const arg = args[index];
  if (arg !== undefined && !accepted.includes(arg.type as DataType)) throw argumentTypeError(fn, index, arg.type, required);
}

/** A pattern argument must be a string; a literal one is checked when the query is built. */
function expectFormat(fn: string, args: readonly ArgumentInfo[], index: number): void {
  expect(fn, args, index, ['string', 'null'], '"STRING"');
}

type Rule = (fn: string, args: readonly ArgumentInfo[]) => void;

const dateLike = (...indexes: number[]): Rule => (fn, args) => {
  for (const i of indexes) expect(fn, args, i, DATE_LIKE, '"DATE" or "TIMESTAMP"');
};

function signature(name: string, minArgs: number, maxArgs: number, result: DataType, check: Rule = () => undefined, nondeterministic = false): ScalarFunctionSignature {
  return {
    name, minArgs, maxArgs, ...(nondeterministic ? { nondeterministic } : {}),
    resultType: (args) => {
      check(name, args);
      return result;
    },
  };
}

const integralAt = (index: number): Rule => (fn, args) => expect(fn, args, index, INTEGRAL, '"INT"');

const both = (a: Rule, b: Rule): Rule => (fn, args) => { a(fn, args); b(fn, args); };

/** date_trunc's unit is its first argument; Spark gives NULL for an unknown one, so only its type is checked. */
const truncCheck: Rule = (fn, args) => { expectFormat(fn, args, 0); dateLike(1)(fn, args); };

const parseCheck: Rule = (fn, args) => { expect(fn, args, 0, DATE_LIKE, '"STRING"'); expectFormat(fn, args, 1); };

export const DATETIME_SIGNATURES: readonly ScalarFunctionSignature[] = [
  signature('to_timestamp', 1, 2, 'timestamp', parseCheck),
  signature('try_to_timestamp', 1, 2, 'timestamp', parseCheck),
  signature('to_date', 1, 2, 'date', parseCheck),
  signature('date_trunc', 2, 2, 'timestamp', truncCheck),
  signature('trunc', 2, 2, 'date', (fn, args) => { dateLike(0)(fn, args); expectFormat(fn, args, 1); }),
  signature('date_format', 2, 2, 'string', (fn, args) => { dateLike(0)(fn, args); expectFormat(fn, args, 1); }),
  signature('from_unixtime', 1, 2, 'string', (fn, args) => { expect(fn, args, 0, ['int', 'long', 'double', 'null'], '"BIGINT"'); expectFormat(fn, args, 1); }),
  // No argument: the batch's time, fixed within a batch like current_timestamp().
  signature('unix_timestamp', 0, 2, 'long', parseCheck),
  signature('current_date', 0, 0, 'date'),
  signature('curdate', 0, 0, 'date'),
  signature('date_add', 2, 2, 'date', both(dateLike(0), integralAt(1))),
  signature('date_sub', 2, 2, 'date', both(dateLike(0), integralAt(1))),
  signature('datediff', 2, 2, 'int', dateLike(0, 1)),
  signature('add_months', 2, 2, 'date', both(dateLike(0), integralAt(1))),
  signature('months_between', 2, 3, 'double', (fn, args) => { dateLike(0, 1)(fn, args); expect(fn, args, 2, ['boolean', 'null'], '"BOOLEAN"'); }),
  signature('last_day', 1, 1, 'date', dateLike(0)),
  signature('next_day', 2, 2, 'date', (fn, args) => { dateLike(0)(fn, args); expectFormat(fn, args, 1); }),
  signature('make_date', 3, 3, 'date', (fn, args) => { for (const i of [0, 1, 2]) integralAt(i)(fn, args); }),
  ...['year', 'quarter', 'month', 'dayofmonth', 'day', 'dayofyear', 'dayofweek', 'weekday', 'weekofyear', 'hour', 'minute', 'second']
    .map((name) => signature(name, 1, 1, 'int', dateLike(0))),
  signature('unix_date', 1, 1, 'int', (fn, args) => expect(fn, args, 0, ['date', 'null'], '"DATE"')),
  signature('date_from_unix_date', 1, 1, 'date', integralAt(0)),
  ...['unix_seconds', 'unix_millis'].map((name) => signature(name, 1, 1, 'long', (fn, args) => expect(fn, args, 0, ['timestamp', 'null'], '"TIMESTAMP"'))),
  ...['timestamp_millis', 'timestamp_micros'].map((name) => signature(name, 1, 1, 'timestamp', integralAt(0))),
];

/** Spark's INVALID_PARAMETER_VALUE.DATETIME_UNIT-like refusal for a literal pattern it cannot compile. */
export function invalidDatetimePattern(pattern: string, reason: string): AnalysisError {
  return new AnalysisError(
    `[INVALID_DATETIME_PATTERN.WITH_SUGGESTION] Unrecognized datetime pattern: ${pattern}. ${reason}`,
    { code: 'INVALID_DATETIME_PATTERN', errorClass: 'INVALID_DATETIME_PATTERN.WITH_SUGGESTION' },
  );
}
