/**
 * Casts to and from date, decimal and binary under Spark 4's ANSI rules: a malformed string raises
 * CAST_INVALID_INPUT, a decimal that does not fit its type NUMERIC_VALUE_OUT_OF_RANGE, a decimal
 * beyond the integral target CAST_OVERFLOW (try_cast turns these into NULL, in evaluate.ts).
 */
import { castInvalidInput } from '../core/ansi-errors.js';
import { formatDate, MICROS_PER_DAY, daysOfMicros, parseDate } from '../core/dates.js';
import {
  checkPrecision, Decimal, decimalFromDouble, decimalFromInteger, decimalToInteger, numericValueOutOfRange, parseDecimal,
} from '../core/decimal.js';
import { ArithmeticOverflowError, INT_MAX, INT_MIN, longFromBigInt } from '../core/long.js';
import { isDecimal, typeToString, type DataType } from '../plan/data-types.js';
import { castStringToTimestamp } from '../core/timestamp-cast.js';
import { isTimestampInRange } from '../core/timestamps.js';

/**
 * Spark's string-to-timestamp cast (lib/core/timestamp-cast.ts): a malformed string raises
 * CAST_INVALID_INPUT under ANSI; a time outside the range held exactly, or a time without a date
 * (Spark takes the current date), gives NULL.
 */
export function stringToTimestamp(text: string): number | null {
  const parsed = castStringToTimestamp(text);
  if (parsed.kind === 'malformed') throw castInvalidInput(text, 'string', 'timestamp');
  return parsed.kind === 'micros' && isTimestampInRange(parsed.micros) ? parsed.micros : null;
}

type Convert = (v: unknown) => unknown;

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();

/** The conversion for a cast that involves date, decimal or binary; null for the other casts. */
export function newTypeCast(from: DataType, to: DataType): Convert | null {
  if (to === 'date') return castToDate(from);
  if (isDecimal(to)) return castToDecimal(from, to.precision, to.scale);
  if (to === 'binary' && from === 'string') return (v) => utf8.encode(v as string);
  if (from === 'binary' && to === 'string') return (v) => fromUtf8.decode(v as Uint8Array);
  if (from === 'date') {
    if (to === 'string') return (v) => formatDate(v as number);
    if (to === 'timestamp') return (v) => (v as number) * MICROS_PER_DAY;
  }
  if (isDecimal(from)) return castFromDecimal(to);
  return null;
}

function castToDate(from: DataType): Convert | null {
  if (from === 'string') {
    return (v) => {
      const days = parseDate(v as string);
      if (days === null) throw castInvalidInput(v as string, 'string', 'date');
      return days;
    };
  }
  if (from === 'timestamp') return (v) => daysOfMicros(v as number);
  if (from === 'date') return (v) => v;
  return null;
}

function castToDecimal(from: DataType, precision: number, scale: number): Convert | null {
  const fit = (d: Decimal): Decimal => checkPrecision(d, precision, scale);
  if (from === 'string') {
    return (v) => {
      const d = parseDecimal(v as string);
      if (d === null) throw castInvalidInput(v as string, 'string', `decimal(${precision},${scale})`);
      return fit(d);
    };
  }
  if (from === 'int' || from === 'long') return (v) => fit(decimalFromInteger(v as number | bigint));
  if (from === 'double') {
    return (v) => {
      const d = decimalFromDouble(v as number);
      if (d === null) throw numericValueOutOfRange(String(v), precision, scale);
      return fit(d);
    };
  }
  if (from === 'boolean') return (v) => fit(decimalFromInteger(v ? 1 : 0));
  if (isDecimal(from)) return (v) => fit(v as Decimal);
  return null;
}

function castFromDecimal(to: DataType): Convert | null {
  switch (to) {
    case 'double': return (v) => (v as Decimal).toNumber();
    case 'string': return (v) => (v as Decimal).toString();
    case 'boolean': return (v) => (v as Decimal).unscaled !== 0n;
    case 'long':
    case 'int':
      return (v) => {
        const whole = decimalToInteger(v as Decimal);
        const long = longFromBigInt(whole);
        if (long === null || (to === 'int' && (typeof long === 'bigint' || long < INT_MIN || long > INT_MAX))) {
          throw new ArithmeticOverflowError(`[CAST_OVERFLOW] The value ${(v as Decimal).toString()}BD of the type "${typeToString(decimalTypeOf(v as Decimal)).toUpperCase()}" cannot be cast to "${to === 'int' ? 'INT' : 'BIGINT'}" due to an overflow.`, {
            code: 'CAST_OVERFLOW', errorClass: 'CAST_OVERFLOW', retryable: false, hint: 'use try_cast, or a wider type.',
          });
        }
        return long;
      };
    default:
      return null;
  }
}

function decimalTypeOf(v: Decimal): DataType {
  return { kind: 'decimal', precision: Math.max(v.digits(), v.scale), scale: v.scale };
}
