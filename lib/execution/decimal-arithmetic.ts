/**
 * Arithmetic with decimal operands (result types: lib/plan/decimal-rules.ts). A decimal result is
 * exact, then fitted to its type's scale (HALF_UP) and checked against its precision:
 * NUMERIC_VALUE_OUT_OF_RANGE past it, as Spark 4 under ANSI mode; a zero divisor raises
 * DIVIDE_BY_ZERO (try_divide/try_mod give NULL). A double result reads the decimals as doubles.
 */
import {
  addDecimals, checkPrecision, Decimal, decimalFromInteger, divideDecimals, multiplyDecimals, remainderDecimals, subtractDecimals,
} from '../core/decimal.js';
import { divideByZero } from '../core/ansi-errors.js';
import { isDecimal, type DataType } from '../plan/data-types.js';

type Evaluator = (row: unknown[]) => unknown;

function toDecimal(v: unknown): Decimal {
  return v instanceof Decimal ? v : decimalFromInteger(v as number | bigint);
}

function toDouble(v: unknown): number {
  return v instanceof Decimal ? v.toNumber() : Number(v);
}

/** The evaluator for `fn` when an operand or the result is a decimal; null otherwise. */
export function compileDecimalArithmetic(fn: string, resultType: DataType, argTypes: readonly DataType[], args: readonly Evaluator[]): Evaluator | null {
  if (!isDecimal(resultType) && !argTypes.some(isDecimal)) return null;
  if (args.length === 1) {
    if (fn !== '-' || !isDecimal(resultType)) return null;
    const [a] = args as [Evaluator];
    return (row) => {
      const x = a(row) as Decimal | null;
      return x === null ? null : new Decimal(-x.unscaled, x.scale);
    };
  }
  const [a, b] = args as [Evaluator, Evaluator];
  const tolerateZero = fn === 'try_divide' || fn === 'try_mod';
  const binary = (op: (x: unknown, y: unknown) => unknown): Evaluator => (row) => {
    const x = a(row);
    if (x === null || x === undefined) return null;
    const y = b(row);
    if (y === null || y === undefined) return null;
    return op(x, y);
  };
  if (!isDecimal(resultType)) {
    const ops: Record<string, (x: number, y: number) => number | null> = {
      '+': (x, y) => x + y, '-': (x, y) => x - y, '*': (x, y) => x * y,
      '/': (x, y) => (y === 0 ? zero(tolerateZero) : x / y), '%': (x, y) => (y === 0 ? zero(tolerateZero) : x % y),
    };
    const op = ops[fn === 'try_divide' ? '/' : fn === 'try_mod' ? '%' : fn]!;
    return binary((x, y) => op(toDouble(x), toDouble(y)));
  }
  const { precision, scale } = resultType;
  const fit = (d: Decimal): Decimal => checkPrecision(d, precision, scale);
  switch (fn) {
    case '+': return binary((x, y) => fit(addDecimals(toDecimal(x), toDecimal(y))));
    case '-': return binary((x, y) => fit(subtractDecimals(toDecimal(x), toDecimal(y))));
    case '*': return binary((x, y) => fit(multiplyDecimals(toDecimal(x), toDecimal(y))));
    case '/':
    case 'try_divide':
      return binary((x, y) => {
        const d = toDecimal(y);
        return d.unscaled === 0n ? zero(tolerateZero) : fit(divideDecimals(toDecimal(x), d, scale));
      });
    default:
      return binary((x, y) => {
        const d = toDecimal(y);
        return d.unscaled === 0n ? zero(tolerateZero) : fit(remainderDecimals(toDecimal(x), d));
      });
  }
}

function zero(tolerate: boolean): null {
  if (tolerate) return null;
  throw divideByZero();
}
