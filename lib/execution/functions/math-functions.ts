import type { DataType } from '../../plan/data-types.js';
import { divideByZero } from '../../core/ansi-errors.js';
import { INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, longFromBigInt, longToDouble, negateLong, overflow, remainderLong, type LongValue } from '../../core/long.js';
import type { Evaluator, ScalarFunctionImplementation } from './implementation.js';
import { nullIntolerant } from './implementation.js';
import { fixedDigitsExact, roundDouble, roundInteger, type RoundingMode } from './decimal-rounding.js';
import { coerced } from './spark-values.js';
import { compareValues } from '../values.js';

const asDouble = (v: unknown): number => longToDouble(v as LongValue);

/** A function of doubles: every argument widened to double first. */
function doubleFunction(name: string, f: (...x: number[]) => number | null): ScalarFunctionImplementation {
  return {
    name,
    compile: (args, call) => nullIntolerant(args.map((a, i) => coerced(a, call.args[i]!.type, 'double')), (values) => f(...(values as number[]))),
  };
}

/** Spark's UnaryLogExpression: NULL at or below the asymptote (0 for ln, log10, log2; -1 for log1p). */
const logAbove = (asymptote: number, f: (x: number) => number) => (x: number): number | null => (x <= asymptote ? null : f(x));

function rounding(name: string, mode: RoundingMode): ScalarFunctionImplementation {
  return {
    name,
    compile: (args, call) => {
      const scaleArg = call.args[1];
      const scale = scaleArg ? asDouble(scaleArg.kind === 'literal' ? scaleArg.value : 0) : 0;
      const t = call.type;
      const [x] = args as [Evaluator];
      if (t === 'double') return (row) => { const v = x(row); return v === null ? null : roundDouble(asDouble(v), scale, mode); };
      const bound = t === 'int' ? [BigInt(INT_MIN), BigInt(INT_MAX)] : [LONG_MIN, LONG_MAX];
      return (row) => {
        const v = x(row) as LongValue | null;
        if (v === null) return null;
        if (scale >= 0) return v;
        const r = roundInteger(BigInt(v), scale, mode);
        if (r < bound[0]! || r > bound[1]!) throw overflow(t === 'int' ? 'int' : 'long', name);
        return longFromBigInt(r);
      };
    },
  };
}

/** Java's (long) cast of a double, as Spark's Floor/Ceil use it: saturating, NaN to 0. */
function doubleToLong(d: number): LongValue {
  if (Number.isNaN(d)) return 0;
  if (Number.isSafeInteger(d)) return d + 0;
  if (d >= 2 ** 63) return LONG_MAX;
  if (d <= -(2 ** 63)) return LONG_MIN;
  return longFromBigInt(BigInt(d))!;
}

function floorOrCeil(name: string, f: (x: number) => number): ScalarFunctionImplementation {
  return {
    name,
    compile: (args, call) => {
      const [x] = args as [Evaluator];
      if (call.args[0]!.type === 'double') return (row) => { const v = x(row); return v === null ? null : doubleToLong(f(v as number)); };
      return x;
    },
  };
}

function abs(t: DataType, x: Evaluator): Evaluator {
  if (t === 'double') return (row) => { const v = x(row); return v === null ? null : Math.abs(v as number); };
  if (t === 'long') return (row) => { const v = x(row) as LongValue | null; return v === null ? null : v < 0 ? negateLong(v) : v; };
  return (row) => {
    const v = x(row) as number | null;
    if (v === null) return null;
    if (v === INT_MIN) throw overflow('int', 'abs');
    return Math.abs(v);
  };
}

/** Spark's ordering of doubles for greatest/least: NaN above every number. */
function compareForExtremum(a: unknown, b: unknown): number {
  const aNaN = typeof a === 'number' && Number.isNaN(a);
  const bNaN = typeof b === 'number' && Number.isNaN(b);
  if (aNaN || bNaN) return aNaN === bNaN ? 0 : aNaN ? 1 : -1;
  return compareValues(a, b);
}

function extremum(name: string, sign: 1 | -1): ScalarFunctionImplementation {
  return {
    name,
    compile: (args, call) => {
      const values = args.map((a, i) => coerced(a, call.args[i]!.type, call.type));
      return (row) => {
        let best: unknown = null;
        for (const value of values) {
          const v = value(row);
          if (v === null || v === undefined) continue;
          if (best === null || sign * compareForExtremum(v, best) > 0) best = v;
        }
        return best;
      };
    },
  };
}

function pmod(t: DataType, a: Evaluator, b: Evaluator): Evaluator {
  return nullIntolerant([a, b], ([x, y]) => {
    if (t === 'double') {
      const d = y as number;
      if (d === 0) throw divideByZero();
      const r = (x as number) % d;
      return r < 0 ? (r + d) % d : r;
    }
    if (y === 0) throw divideByZero();
    const r = remainderLong(x as LongValue, y as LongValue);
    if (r >= 0) return r;
    const big = BigInt(r) + BigInt(y as LongValue);
    return longFromBigInt(big % BigInt(y as LongValue))!;
  });
}

function formatNumber(x: number, decimals: number): string | null {
  if (decimals < 0) return null;
  if (!Number.isFinite(x)) return Number.isNaN(x) ? '\uFFFD' : x > 0 ? '\u221E' : '-\u221E';
  const [whole, fraction] = fixedDigitsExact(x, decimals, 'HALF_EVEN').split('.');
  const grouped = whole!.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  // Java's DecimalFormat keeps the sign of a negative number that rounds to zero ('-0.00').
  const negative = x < 0 || Object.is(x, -0);
  return `${negative ? '-' : ''}${grouped}${fraction === undefined ? '' : `.${fraction}`}`;
}

/** Math functions (signatures: lib/plan/function-catalog/math-signatures.ts). */
export const MATH_FUNCTIONS: readonly ScalarFunctionImplementation[] = [
  rounding('round', 'HALF_UP'),
  rounding('bround', 'HALF_EVEN'),
  floorOrCeil('floor', Math.floor),
  floorOrCeil('ceil', Math.ceil),
  floorOrCeil('ceiling', Math.ceil),
  { name: 'abs', compile: ([x], call) => abs(call.type, x!) },
  {
    name: 'negative',
    compile: ([x], call) => {
      if (call.type === 'double') return (row) => { const v = x!(row); return v === null ? null : -(v as number); };
      if (call.type === 'long') return (row) => { const v = x!(row); return v === null ? null : negateLong(v as LongValue); };
      return (row) => { const v = x!(row) as number | null; if (v === null) return null; if (v === INT_MIN) throw overflow('int', 'negation'); return 0 - v; };
    },
  },
  { name: 'positive', compile: ([x]) => x! },
  doubleFunction('sqrt', Math.sqrt),
  doubleFunction('cbrt', Math.cbrt),
  doubleFunction('exp', Math.exp),
  doubleFunction('expm1', Math.expm1),
  doubleFunction('ln', logAbove(0, Math.log)),
  doubleFunction('log10', logAbove(0, Math.log10)),
  doubleFunction('log2', logAbove(0, Math.log2)),
  doubleFunction('log1p', logAbove(-1, Math.log1p)),
  // log(x) is ln(x); log(base, x) is NULL when either is not positive.
  doubleFunction('log', (a, b) => (b === undefined ? (a! <= 0 ? null : Math.log(a!)) : a! <= 0 || b <= 0 ? null : Math.log(b) / Math.log(a!))),
  doubleFunction('sin', Math.sin),
  doubleFunction('cos', Math.cos),
  doubleFunction('tan', Math.tan),
  doubleFunction('asin', Math.asin),
  doubleFunction('acos', Math.acos),
  doubleFunction('atan', Math.atan),
  doubleFunction('sinh', Math.sinh),
  doubleFunction('cosh', Math.cosh),
  doubleFunction('tanh', Math.tanh),
  doubleFunction('degrees', (x) => x! * (180 / Math.PI)),
  doubleFunction('radians', (x) => (x! / 180) * Math.PI),
  // Java's Math.rint: to the nearest integer, ties to even.
  doubleFunction('rint', (x) => roundDouble(x!, 0, 'HALF_EVEN')),
  doubleFunction('signum', (x) => (Number.isNaN(x!) || x === 0 ? x! : Math.sign(x!))),
  doubleFunction('sign', (x) => (Number.isNaN(x!) || x === 0 ? x! : Math.sign(x!))),
  doubleFunction('pow', (a, b) => a! ** b!),
  doubleFunction('power', (a, b) => a! ** b!),
  // Spark's Atan2 adds 0.0 to both, so -0.0 counts as 0.0.
  doubleFunction('atan2', (y, x) => Math.atan2(y! + 0, x! + 0)),
  doubleFunction('hypot', (a, b) => Math.hypot(a!, b!)),
  doubleFunction('e', () => Math.E),
  doubleFunction('pi', () => Math.PI),
  {
    name: 'pmod',
    compile: (args, call) => {
      const [a, b] = args.map((x, i) => coerced(x, call.args[i]!.type, call.type));
      return pmod(call.type, a!, b!);
    },
  },
  {
    // Spark's FormatNumber: '#,###,###,##0.00' (d decimals), HALF_EVEN; a negative d gives NULL.
    name: 'format_number',
    compile: (args, call) => nullIntolerant([coerced(args[0]!, call.args[0]!.type, 'double'), args[1]!], ([x, d]) => formatNumber(x as number, asDouble(d))),
  },
  extremum('greatest', 1),
  extremum('least', -1),
];
