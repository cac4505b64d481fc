/**
 * Spark's result types for decimal arithmetic (DecimalPrecision with
 * spark.sql.decimalOperations.allowPrecisionLoss = true, its default): an int or long operand
 * counts as decimal(10,0) / decimal(20,0), an integer literal as the digits it has; a result
 * beyond 38 digits keeps its integral digits and gives up scale, down to 6.
 */
import { decimalOf, isDecimal, type DataType, type DecimalType } from './data-types.js';

const MAX_PRECISION = 38;
const MINIMUM_ADJUSTED_SCALE = 6;

/** The decimal an integral operand counts as; `literal` is its value when it is a literal. */
export function asDecimalType(t: DataType, literal?: unknown): DecimalType | null {
  if (isDecimal(t)) return t;
  if ((t === 'int' || t === 'long') && (typeof literal === 'number' || typeof literal === 'bigint')) {
    const digits = String(literal).replace('-', '').length;
    return decimalOf(Math.max(digits, 1), 0);
  }
  if (t === 'int') return decimalOf(10, 0);
  if (t === 'long') return decimalOf(20, 0);
  return null;
}

function bounded(precision: number, scale: number): DecimalType {
  if (precision <= MAX_PRECISION) return decimalOf(precision, scale);
  const integral = precision - scale;
  const minScale = Math.min(scale, MINIMUM_ADJUSTED_SCALE);
  return decimalOf(MAX_PRECISION, Math.max(MAX_PRECISION - integral, minScale));
}

/** The result type of `a op b` for decimal operands (op one of + - * / %). */
export function decimalResultType(op: string, a: DecimalType, b: DecimalType): DecimalType {
  const { precision: p1, scale: s1 } = a;
  const { precision: p2, scale: s2 } = b;
  switch (op) {
    case '+':
    case '-': {
      const scale = Math.max(s1, s2);
      return bounded(Math.max(p1 - s1, p2 - s2) + scale + 1, scale);
    }
    case '*':
      return bounded(p1 + p2 + 1, s1 + s2);
    case '/':
    case 'try_divide': {
      const scale = Math.max(MINIMUM_ADJUSTED_SCALE, s1 + p2 + 1);
      return bounded(p1 - s1 + s2 + scale, scale);
    }
    default: {
      // % and try_mod
      const scale = Math.max(s1, s2);
      return bounded(Math.min(p1 - s1, p2 - s2) + scale, scale);
    }
  }
}
