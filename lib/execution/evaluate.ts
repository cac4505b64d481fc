import type { BoundExpr } from '../analysis/bound-expr.js';
import type { DataType } from '../plan/data-types.js';
import { isStruct } from '../plan/data-types.js';
import { StreamingQueryError } from '../errors/sluice-error.js';
import type { EvalContext } from './eval-context.js';
import { compareValues, valuesEqual } from './values.js';
import { formatTimestamp, isTimestampInRange } from '../core/timestamps.js';
import {
  addLong, ArithmeticOverflowError, checkedInt, INT_MAX, INT_MIN, longFromBigInt, longToDouble, multiplyLong, negateLong, remainderLong, stringifyWithLongs, subtractLong, type LongValue,
} from '../core/long.js';
import { AnsiDataError, castInvalidInput, divideByZero } from '../core/ansi-errors.js';
import { builtinImplementation } from './functions/index.js';
import { compileDecimalArithmetic } from './decimal-arithmetic.js';
import { compileDateArithmetic } from './functions/datetime-functions.js';
import { newTypeCast, stringToTimestamp } from './type-casts.js';
import { compileUserFunction } from './functions/user-function.js';
import { compileSplit } from './functions/regex-functions.js';
import { codePointLength } from './functions/code-points.js';

export type Row = unknown[];
export type Evaluator = (row: Row) => unknown;

/**
 * Compiles a bound expression into a closure over a positional row, once per query: the hot path
 * does no name lookups, no type switches and no allocation beyond the values it produces.
 */
export function compile(e: BoundExpr, ctx: EvalContext): Evaluator {
  switch (e.kind) {
    case 'ref': {
      const i = e.ordinal;
      if (e.path.length === 0) return (row) => row[i];
      const path = e.path;
      return (row) => {
        let v = row[i] as Record<string, unknown> | null;
        for (const field of path) {
          if (v === null || v === undefined) return null;
          v = v[field] as Record<string, unknown> | null;
        }
        return v ?? null;
      };
    }
    case 'literal': {
      const v = e.value;
      return () => v;
    }
    case 'cast':
      return compileCast(compile(e.child, ctx), e.child.type, e.type, e.try === true);
    case 'case': {
      const branches = e.branches.map(([c, v]) => [compile(c, ctx), compile(v, ctx)] as const);
      const otherwise = e.otherwise ? compile(e.otherwise, ctx) : () => null;
      return (row) => {
        for (const [cond, value] of branches) if (cond(row) === true) return value(row);
        return otherwise(row);
      };
    }
    case 'timeWindow': {
      // Scalar form (tumbling); sliding windows are generators, see compileGenerator.
      const time = compileWindowTime(e.time, ctx);
      const { windowMicros, startMicros } = e;
      // Consecutive rows mostly fall in the same window: they share its (never mutated) struct.
      let last: { start: number; end: number } | null = null;
      return (row) => {
        const t = time(row) as number | null;
        if (t === null) return null;
        // Inside the last window: the same struct, without the division of floorMod.
        if (last !== null && t >= last.start && t < last.end) return last;
        const start = t - floorMod(t - startMicros, windowMicros);
        if (last !== null && last.start === start) return last;
        return (last = { start, end: start + windowMicros });
      };
    }
    case 'sessionWindow': {
      const time = compile(e.time, ctx);
      const gap = compile(e.gap, ctx);
      return (row) => {
        const t = time(row) as number | null;
        const g = gap(row) as number | null;
        if (t === null || g === null) return null;
        return { start: t, end: t + g };
      };
    }
    case 'aggregate':
      throw new Error('aggregate functions are evaluated by the aggregation operator');
    case 'call':
      if (e.udf) return compileUserFunction(e.udf, e.args.map((a) => compile(a, ctx)), e);
      return compileCall(e.fn, e.args.map((a) => compile(a, ctx)), e, ctx);
    default: {
      const never: never = e;
      throw new Error(`Unknown expression ${JSON.stringify(never)}`);
    }
  }
}

/** Java's Math.floorMod for b > 0 (one `%`: on microsecond timestamps it is a slow fmod). */
export function floorMod(a: number, b: number): number {
  const r = a % b;
  return r < 0 ? r + b : r + 0; // + 0 turns -0 into 0
}

/** A window over a window struct uses its `window_time` (end - 1 µs), as Spark does. */
function compileWindowTime(time: BoundExpr, ctx: EvalContext): (row: Row) => number | null {
  const f = compile(time, ctx);
  if (isStruct(time.type)) {
    return (row) => {
      const w = f(row) as { end: number } | null;
      return w === null ? null : w.end - 1;
    };
  }
  return f as (row: Row) => number | null;
}

/** Every window `[start, start + window)` that contains the row's time, latest first. */
export function compileWindowGenerator(e: Extract<BoundExpr, { kind: 'timeWindow' }>, ctx: EvalContext): (row: Row) => unknown[] {
  const time = compileWindowTime(e.time, ctx);
  const { windowMicros, slideMicros, startMicros } = e;
  return (row) => {
    const t = time(row);
    if (t === null) return [];
    const lastStart = t - floorMod(t - startMicros, slideMicros);
    const out: unknown[] = [];
    for (let start = lastStart; start + windowMicros > t; start -= slideMicros) {
      out.push({ start, end: start + windowMicros });
    }
    return out;
  };
}

/** For a generator (`explode`, sliding window): the list of values one row expands into. */
export function compileGenerator(e: BoundExpr, ctx: EvalContext): (row: Row) => unknown[] {
  if (e.kind === 'timeWindow') return compileWindowGenerator(e, ctx);
  if (e.kind === 'call' && e.fn === 'explode') {
    const arr = compile(e.args[0]!, ctx);
    return (row) => (arr(row) as unknown[] | null) ?? [];
  }
  throw new Error(`not a generator: ${e.kind}`);
}

type Args = readonly Evaluator[];

function numericBinary<T = number>(op: (a: T, b: T) => unknown, args: Args): Evaluator {
  const [a, b] = args as [Evaluator, Evaluator];
  return (row) => {
    const x = a(row);
    if (x === null) return null;
    const y = b(row);
    if (y === null) return null;
    return op(x as T, y as T);
  };
}

function comparison(test: (c: number) => boolean, args: Args): Evaluator {
  const [a, b] = args as [Evaluator, Evaluator];
  return (row) => {
    const x = a(row);
    if (x === null) return null;
    const y = b(row);
    if (y === null) return null;
    if (typeof x === 'number' && typeof y === 'number') return test(x < y ? -1 : x > y ? 1 : 0);
    return test(compareValues(x, y));
  };
}

function intResult(t: DataType, v: number): number {
  return t === 'int' || t === 'long' ? Math.trunc(v) : v;
}

/** Operands of type long read as doubles (a double operation with a long beyond 2^53, a bigint). */
function longsAsDoubles(types: readonly DataType[], args: Args): Args {
  return args.map((a, i) => (types[i] === 'long' ? (row: Row) => { const v = a(row); return typeof v === 'bigint' ? Number(v) : v; } : a));
}

/**
 * What a zero divisor gives: Spark 4's ANSI mode raises DIVIDE_BY_ZERO for `/` and `%` (all
 * numeric types), its `try_divide` and `try_mod` give NULL.
 */
function zeroDivisor(tolerate: boolean): () => null {
  return tolerate ? () => null : () => { throw divideByZero(); };
}

/**
 * `+ - * %` (and try_mod) on numbers: longs exact (bigint beyond 2^53) and ints checked, ARITHMETIC_OVERFLOW past
 * their range as in Spark 4's ANSI mode; doubles as IEEE. Other operand types (timestamps,
 * intervals) keep the plain operators.
 */
function integralOrDoubleArithmetic(fn: string, t: DataType, types: readonly DataType[], args: Args): Evaluator {
  const onZero = zeroDivisor(fn === 'try_mod');
  const integral = types.every((x) => x === 'int' || x === 'long' || x === 'null');
  if (t === 'long' && integral) {
    switch (fn) {
      case '+': return numericBinary<LongValue>((x, y) => addLong(x, y), args);
      case '-': return numericBinary<LongValue>((x, y) => subtractLong(x, y), args);
      case '*': return numericBinary<LongValue>((x, y) => multiplyLong(x, y), args);
      default: return numericBinary<LongValue>((x, y) => (y === 0 ? onZero() : remainderLong(x, y)), args);
    }
  }
  if (t === 'int' && integral) {
    switch (fn) {
      case '+': return numericBinary((x, y) => checkedInt(x + y, 'addition'), args);
      case '-': return numericBinary((x, y) => checkedInt(x - y, 'subtraction'), args);
      case '*': return numericBinary((x, y) => checkedInt(x * y, 'multiplication'), args);
      default: return numericBinary((x, y) => (y === 0 ? onZero() : (x % y) + 0), args);
    }
  }
  const operands = longsAsDoubles(types, args);
  switch (fn) {
    case '+': return numericBinary((x, y) => x + y, operands);
    case '-': return numericBinary((x, y) => x - y, operands);
    case '*': return numericBinary((x, y) => x * y, operands);
    default: return numericBinary((x, y) => (y === 0 ? onZero() : intResult(t, x % y)), operands);
  }
}

function compileCall(fn: string, args: Args, e: Extract<BoundExpr, { kind: 'call' }>, ctx: EvalContext): Evaluator {
  const t = e.type;
  switch (fn) {
    case '+':
    case '-':
    case '*':
    case '%':
    case 'try_mod':
      if (fn === '-' && args.length === 1) {
        const [a] = args as [Evaluator];
        const decimal = compileDecimalArithmetic(fn, t, e.args.map((x) => x.type), args);
        if (decimal !== null) return decimal;
        // Integers have no -0 (Spark's -(0) is 0); doubles keep it.
        if (t === 'long') return (row) => { const x = a(row); return x === null ? null : negateLong(x as LongValue); };
        if (t === 'int') return (row) => { const x = a(row); return x === null ? null : checkedInt(0 - (x as number), 'negation'); };
        return (row) => { const x = a(row); return x === null ? null : t === 'double' ? -(x as number) : 0 - (x as number); };
      }
      return compileDecimalArithmetic(fn, t, e.args.map((x) => x.type), args)
        ?? compileDateArithmetic(fn, t, e.args.map((x) => x.type), args)
        ?? integralOrDoubleArithmetic(fn, t, e.args.map((x) => x.type), args);
    case '/':
    case 'try_divide': {
      const decimal = compileDecimalArithmetic(fn, t, e.args.map((x) => x.type), args);
      if (decimal !== null) return decimal;
      const onZero = zeroDivisor(fn === 'try_divide');
      return numericBinary((x, y) => (y === 0 ? onZero() : x / y), longsAsDoubles(e.args.map((x) => x.type), args));
    }
    case '=': {
      const [a, b] = args as [Evaluator, Evaluator];
      return (row) => {
        const x = a(row);
        const y = b(row);
        if (x === null || y === null) return null;
        return x === y || valuesEqual(x, y);
      };
    }
    case '<=>': {
      const [a, b] = args as [Evaluator, Evaluator];
      return (row) => valuesEqual(a(row), b(row));
    }
    case '!=': {
      const eq = compileCall('=', args, e, ctx);
      return (row) => {
        const v = eq(row);
        return v === null ? null : !v;
      };
    }
    case '<': return comparison((c) => c < 0, args);
    case '<=': return comparison((c) => c <= 0, args);
    case '>': return comparison((c) => c > 0, args);
    case '>=': return comparison((c) => c >= 0, args);
    case 'between': {
      const [v, lo, hi] = args as [Evaluator, Evaluator, Evaluator];
      const ge = comparison((c) => c >= 0, [v, lo]);
      const le = comparison((c) => c <= 0, [v, hi]);
      return (row) => and3(ge(row), le(row));
    }
    case 'and': {
      const [a, b] = args as [Evaluator, Evaluator];
      return (row) => {
        const x = a(row);
        if (x === false) return false;
        return and3(x, b(row));
      };
    }
    case 'or': {
      const [a, b] = args as [Evaluator, Evaluator];
      return (row) => {
        const x = a(row);
        if (x === true) return true;
        const y = b(row);
        if (y === true) return true;
        return x === null || y === null ? null : false;
      };
    }
    case 'not': {
      const [a] = args as [Evaluator];
      return (row) => {
        const x = a(row);
        return x === null ? null : !x;
      };
    }
    case 'isnull': { const [a] = args as [Evaluator]; return (row) => a(row) === null; }
    case 'isnotnull': { const [a] = args as [Evaluator]; return (row) => a(row) !== null; }
    case 'timestamp_seconds': {
      const [a] = args as [Evaluator];
      return (row) => {
        const x = a(row) as LongValue | null;
        if (x === null) return null;
        const micros = Math.round(longToDouble(x) * 1_000_000);
        return isTimestampInRange(micros) ? micros : null;
      };
    }
    case 'unix_micros': { const [a] = args as [Evaluator]; return (row) => a(row); }
    case 'current_timestamp': return () => ctx.batchTimestampMs * 1000;
    case 'monotonically_increasing_id': return () => ctx.nextRowId++;
    case 'window_time': {
      const [a] = args as [Evaluator];
      return (row) => {
        const w = a(row) as { end: number } | null;
        return w === null ? null : w.end - 1;
      };
    }
    // A Java regular expression, split as Java's String.split (lib/execution/functions/regex-functions.ts).
    case 'split': return compileSplit(args, e);
    case 'explode':
      throw new Error('explode is a generator: only allowed in select()');
    case 'size': {
      const [a] = args as [Evaluator];
      return (row) => {
        const v = a(row) as unknown[] | null;
        // Spark 4 (ANSI mode) gives NULL for size(NULL); -1 was the legacy answer.
        return v === null ? null : v.length;
      };
    }
    case 'array': return (row) => args.map((a) => a(row));
    case 'upper': { const [a] = args as [Evaluator]; return (row) => mapString(a(row), (s) => s.toUpperCase()); }
    case 'lower': { const [a] = args as [Evaluator]; return (row) => mapString(a(row), (s) => s.toLowerCase()); }
    // Spark's trim removes spaces (U+0020) only, not tabs or line breaks.
    case 'trim': { const [a] = args as [Evaluator]; return (row) => mapString(a(row), (s) => s.replace(/^ +| +$/g, '')); }
    // Spark counts characters (code points), not UTF-16 units.
    case 'length': { const [a] = args as [Evaluator]; return (row) => { const s = a(row); return s === null ? null : codePointLength(String(s)); }; }
    case 'concat': return (row) => {
      const parts = args.map((a) => a(row));
      return parts.some((x) => x === null) ? null : parts.map(String).join('');
    };
    case 'substring': {
      const [a, pos, len] = args as [Evaluator, Evaluator, Evaluator];
      return (row) => {
        const s = a(row) as string | null;
        if (s === null) return null;
        const p = pos(row) as number;
        const start = p > 0 ? p - 1 : p < 0 ? Math.max(0, s.length + p) : 0;
        return s.substr(start, len(row) as number);
      };
    }
    case 'coalesce': return (row) => {
      for (const a of args) {
        const v = a(row);
        if (v !== null) return v;
      }
      return null;
    };
    case 'get_field': {
      const [a, name] = args as [Evaluator, Evaluator];
      return (row) => {
        const s = a(row) as Record<string, unknown> | null;
        return s === null ? null : (s[name(row) as string] ?? null);
      };
    }
    default: {
      const implementation = builtinImplementation(fn);
      if (!implementation) throw new StreamingQueryError(`Function ${fn} cannot be evaluated here`, { code: 'UNSUPPORTED_FUNCTION' });
      return implementation.compile(args, e, ctx);
    }
  }
}

function and3(x: unknown, y: unknown): boolean | null {
  if (x === false || y === false) return false;
  if (x === null || y === null) return null;
  return true;
}

function mapString(v: unknown, f: (s: string) => string): string | null {
  return v === null ? null : f(String(v));
}

/**
 * CAST under Spark 4's ANSI rules: a malformed string raises CAST_INVALID_INPUT and a value out of
 * the target's range CAST_OVERFLOW; `tolerate` (try_cast) gives NULL for both instead.
 */
export function compileCast(child: Evaluator, from: DataType, to: DataType, tolerate = false): Evaluator {
  if (from === to) return child;
  const convert = castFunction(from, to);
  if (tolerate) {
    return (row) => {
      const v = child(row);
      if (v === null) return null;
      try {
        return convert(v);
      } catch (error) {
        if (error instanceof AnsiDataError) return null;
        throw error;
      }
    };
  }
  return (row) => {
    const v = child(row);
    return v === null ? null : convert(v);
  };
}

/**
 * A string as an integral value, as Spark's UTF8String.toLong: surrounding whitespace and control
 * characters ignored, an optional sign, digits, and an optional fraction of digits that is
 * truncated; anything else, or a value outside the target's range, is malformed.
 */
function stringToIntegral(text: string, to: 'int' | 'long'): LongValue {
  const match = /^[\s\x00-\x1f]*([+-]?)(\d*)(?:\.(\d*))?[\s\x00-\x1f]*$/.exec(text);
  if (!match || (match[2] === '' && (match[3] ?? '') === '')) throw castInvalidInput(text, 'string', to === 'int' ? 'int' : 'bigint');
  const value = longFromBigInt(BigInt(`${match[1]}${match[2] || '0'}`));
  if (value === null || (to === 'int' && (typeof value === 'bigint' || value < INT_MIN || value > INT_MAX))) {
    throw castInvalidInput(text, 'string', to === 'int' ? 'int' : 'bigint');
  }
  return value === 0 ? 0 : value; // no -0 among integers
}

function castFunction(from: DataType, to: DataType): (v: unknown) => unknown {
  const special = newTypeCast(from, to);
  if (special !== null) return special;
  switch (to) {
    case 'long':
    case 'int':
      if (from === 'timestamp') return (v) => Math.floor((v as number) / 1_000_000);
      if (from === 'string') return (v) => stringToIntegral(v as string, to);
      if (from === 'boolean') return (v) => (v ? 1 : 0);
      if (to === 'int') return (v) => intOf(typeof v === 'bigint' ? v : Math.trunc(v as number));
      return (v) => (typeof v === 'bigint' ? v : integralOf(v as number));
    case 'double':
      if (from === 'timestamp') return (v) => (v as number) / 1_000_000;
      if (from === 'string') return (v) => stringToDouble(v as string);
      if (from === 'boolean') return (v) => (v ? 1 : 0);
      return (v) => Number(v);
    case 'string':
      if (from === 'timestamp') return (v) => formatTimestamp(v as number);
      if (typeof from === 'object') return (v) => stringifyWithLongs(v);
      return (v) => String(v);
    case 'timestamp':
      if (from === 'string') return (v) => stringToTimestamp(v as string);
      if (from === 'double') return (v) => inTimestampRange(Math.trunc((v as number) * 1_000_000));
      return (v) => inTimestampRange(longToDouble(v as LongValue) * 1_000_000);
    case 'boolean':
      if (from === 'string') return (v) => stringToBoolean(v as string);
      return (v) => v !== 0;
    default:
      return (v) => v;
  }
}

/**
 * A string as a double, as Spark's ANSI cast: a decimal or exponent number (a magnitude beyond the
 * double range is ±Infinity, as Java's parseDouble gives), or Spark's special spellings of NaN and
 * the infinities (any case); anything else is malformed.
 */
function stringToDouble(text: string): number {
  const trimmed = text.trim();
  const special = SPECIAL_DOUBLES[trimmed.toLowerCase()];
  if (special !== undefined) return special;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[dDfF]?$/.test(trimmed)) throw castInvalidInput(text, 'string', 'double');
  return Number(trimmed.replace(/[dDfF]$/, ''));
}

/** Spark's boolean spellings (StringUtils.isTrueString / isFalseString), trimmed, any case. */
const BOOLEAN_STRINGS: Readonly<Record<string, boolean>> = { t: true, true: true, y: true, yes: true, 1: true, f: false, false: false, n: false, no: false, 0: false };

function stringToBoolean(text: string): boolean {
  const value = BOOLEAN_STRINGS[text.trim().toLowerCase()];
  if (value === undefined) throw castInvalidInput(text, 'string', 'boolean');
  return value;
}

const SPECIAL_DOUBLES: Readonly<Record<string, number>> = {
  nan: Number.NaN, inf: Infinity, '+inf': Infinity, infinity: Infinity, '+infinity': Infinity, '-inf': -Infinity, '-infinity': -Infinity,
};

/** A time outside the range held exactly (see lib/core/timestamps.ts) casts to NULL. */
function inTimestampRange(micros: number): number | null {
  return isTimestampInRange(micros) ? micros : null;
}

/** A double's integral part as a long (exact: a double beyond 2^53 is an integer); ANSI's CAST_OVERFLOW beyond int64. */
function integralOf(v: number): LongValue {
  const n = Math.trunc(v);
  if (Number.isSafeInteger(n)) return n + 0;
  const exact = Number.isFinite(n) ? longFromBigInt(BigInt(n)) : null;
  if (exact === null) throw castOverflow(String(v), 'long');
  return exact;
}

function intOf(v: LongValue): number {
  if (typeof v === 'bigint' || v < INT_MIN || v > INT_MAX) throw castOverflow(String(v), 'int');
  return v;
}

function castOverflow(value: string, to: 'int' | 'long'): Error {
  return new ArithmeticOverflowError(`[CAST_OVERFLOW] The value ${value} cannot be cast to ${to} due to an overflow.`, {
    code: 'CAST_OVERFLOW', errorClass: 'CAST_OVERFLOW', retryable: false, hint: 'cast to double, or filter the values first.',
  });
}
