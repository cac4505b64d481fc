import type { BoundAggregate } from '../analysis/bound-expr.js';
import type { EvalContext } from './eval-context.js';
import { compile, type Evaluator, type Row } from './evaluate.js';
import { compareValues, encodeKey } from './values.js';
import { DEFAULT_RSD, HyperLogLogPlusPlus, precisionForRsd, type HllBuffer } from './hyperloglog.js';
import { compileValueHasher, hashHi, hashLo } from './xxhash64.js';
import { AnalysisError } from '../errors/sluice-error.js';
import { addLong, type LongValue } from '../core/long.js';
import { addDecimals, checkPrecision, Decimal, divideDecimals } from '../core/decimal.js';
import { isDecimal, type DecimalType } from '../plan/data-types.js';

/**
 * One aggregate function split Spark's way: a mutable per-batch partial buffer (`update`), an
 * immutable merge into the stored buffer (`merge`), and the final value (`evaluate`). Buffers are
 * plain JSON values so state can be persisted as is.
 */
export interface AggregateFunction {
  initial(): unknown;
  /** Folds one input row into a partial buffer, returning the (possibly same) buffer. */
  update(buffer: unknown, row: Row): unknown;
  /** Combines a stored buffer with a batch's partial buffer into a new buffer. */
  merge(stored: unknown, partial: unknown): unknown;
  evaluate(buffer: unknown): unknown;
}

/** count's `+ 1`: a plain add while the count is a safe integer, exact (and ARITHMETIC_OVERFLOW-checked) beyond. */
const countOne = (b: unknown): LongValue => ((b as number) < Number.MAX_SAFE_INTEGER ? (b as number) + 1 : addLong(b as LongValue, 1, 'count'));

export function makeAggregateFunction(agg: BoundAggregate, ctx: EvalContext): AggregateFunction {
  const arg: Evaluator = agg.args.length > 0 ? compile(agg.args[0]!, ctx) : () => 1;
  switch (agg.fn) {
    case 'count': {
      if (agg.distinct) return distinctCount(agg, ctx);
      const star = agg.args.length === 0;
      return {
        initial: () => 0,
        // A buffer restored or merged past 2^53 is a bigint: adding 1 to it must stay exact (and not throw).
        update: star ? (b) => countOne(b) : (b, row) => (arg(row) === null ? b : countOne(b)),
        merge: (s, p) => addLong(s as LongValue, p as LongValue, 'count'),
        evaluate: (b) => b,
      };
    }
    case 'sum':
      if (agg.type === 'long') return sumOfIntegers(arg);
      if (isDecimal(agg.type)) return sumOfDecimals(arg, agg.type, false);
      return {
        initial: () => null,
        update: (b, row) => {
          const v = arg(row) as number | null;
          return v === null ? b : b === null ? v : (b as number) + v;
        },
        merge: (s, p) => (p === null ? s : s === null ? p : (s as number) + (p as number)),
        evaluate: (b) => b,
      };
    case 'avg':
      if (isDecimal(agg.type)) return sumOfDecimals(arg, agg.type, true);
      return {
        initial: () => [0, 0],
        update: (b, row) => {
          const v = arg(row) as number | bigint | null;
          if (v === null) return b;
          const buf = b as [number, number];
          // Spark's average of longs sums as a double.
          buf[0] += typeof v === 'bigint' ? Number(v) : v;
          buf[1] += 1;
          return buf;
        },
        merge: (s, p) => [(s as number[])[0]! + (p as number[])[0]!, (s as number[])[1]! + (p as number[])[1]!],
        evaluate: (b) => ((b as number[])[1] === 0 ? null : (b as number[])[0]! / (b as number[])[1]!),
      };
    case 'min':
    case 'max': {
      const better = agg.fn === 'min' ? (a: unknown, b: unknown) => compareValues(a, b) < 0 : (a: unknown, b: unknown) => compareValues(a, b) > 0;
      const pick = (a: unknown, b: unknown): unknown => (a === null ? b : b === null ? a : better(b, a) ? b : a);
      return {
        initial: () => null,
        update: (b, row) => pick(b, arg(row) ?? null),
        merge: pick,
        evaluate: (b) => b,
      };
    }
    case 'first':
    case 'last': {
      // Buffer: [value, isSet]. first keeps the earliest, last the latest; ignoreNulls skips NULLs.
      const isFirst = agg.fn === 'first';
      const ignoreNulls = agg.ignoreNulls;
      return {
        initial: () => [null, false],
        update: (b, row) => {
          const buf = b as [unknown, boolean];
          const v = arg(row) ?? null;
          if (ignoreNulls && v === null) return buf;
          if (isFirst && buf[1]) return buf;
          return [v, true];
        },
        merge: (s, p) => {
          const sb = s as [unknown, boolean];
          const pb = p as [unknown, boolean];
          if (!pb[1]) return sb;
          if (!sb[1]) return pb;
          return isFirst ? sb : pb;
        },
        evaluate: (b) => (b as [unknown, boolean])[0],
      };
    }
    case 'collect_list':
      return {
        initial: () => [],
        update: (b, row) => {
          const v = arg(row) ?? null;
          if (v !== null) (b as unknown[]).push(v);
          return b;
        },
        merge: (s, p) => [...(s as unknown[]), ...(p as unknown[])],
        evaluate: (b) => [...(b as unknown[])],
      };
    case 'collect_set':
      return uniqueValues(arg, (b) => [...(b as unknown[][]).map((e) => e[1])]);
    case 'approx_count_distinct':
      return approxCountDistinct(agg, arg);
    default: {
      const never: never = agg.fn;
      throw new Error(`Unknown aggregate ${String(never)}`);
    }
  }
}

/**
 * `sum` and `avg` of decimals, exact: the buffer is [sum, count] (a Decimal at the input's scale);
 * the result is fitted to the result type (avg: the quotient rounded HALF_UP to its scale), and a
 * result past its precision raises NUMERIC_VALUE_OUT_OF_RANGE as Spark 4 under ANSI mode.
 */
function sumOfDecimals(arg: Evaluator, type: DecimalType, average: boolean): AggregateFunction {
  const add = (a: Decimal | null, b: Decimal | null): Decimal | null => (a === null ? b : b === null ? a : addDecimals(a, b));
  return {
    initial: () => [null, 0],
    update: (b, row) => {
      const v = arg(row) as Decimal | null | undefined;
      if (v == null) return b;
      const [sum, count] = b as [Decimal | null, number];
      return [add(sum, v), count + 1];
    },
    merge: (s, p) => {
      const [ss, sc] = s as [Decimal | null, number];
      const [ps, pc] = p as [Decimal | null, number];
      return [add(ss, ps), sc + pc];
    },
    evaluate: (b) => {
      const [sum, count] = b as [Decimal | null, number];
      if (sum === null || count === 0) return null;
      const value = average ? divideDecimals(sum, new Decimal(BigInt(count), 0), type.scale) : sum;
      return checkPrecision(value, type.precision, type.scale);
    },
  };
}

/**
 * `sum` of ints or longs: a long, exact (a bigint beyond 2^53), and ARITHMETIC_OVERFLOW past the
 * int64 range, as Spark 4's Sum with ANSI mode on (its default). Doubles keep the IEEE sum.
 */
function sumOfIntegers(arg: Evaluator): AggregateFunction {
  const add = (b: unknown, v: unknown): unknown => {
    if (typeof b === 'number' && typeof v === 'number') {
      const r = b + v;
      if (Number.isSafeInteger(r)) return r;
    }
    return addLong(b as LongValue, v as LongValue, 'sum');
  };
  return {
    initial: () => null,
    update: (b, row) => {
      const v = arg(row);
      // `== null`: a row read without the column (a memory stream's short row) holds undefined.
      return v == null ? b : b == null ? v : add(b, v);
    },
    merge: (s, p) => (p == null ? s : s == null ? p : add(s, p)),
    evaluate: (b) => b,
  };
}

/** Buffer: `[encodedKey, value][]` sorted by key, so merging is deterministic and JSON-friendly. */
function uniqueValues(arg: Evaluator, evaluate: (b: unknown) => unknown): AggregateFunction {
  const add = (list: [string, unknown][], v: unknown): void => {
    if (v === null) return;
    const k = encodeKey([v]);
    if (!list.some((e) => e[0] === k)) list.push([k, v]);
  };
  return {
    initial: () => [],
    update: (b, row) => {
      add(b as [string, unknown][], arg(row) ?? null);
      return b;
    },
    merge: (s, p) => {
      const out = [...(s as [string, unknown][])];
      for (const [, v] of p as [string, unknown][]) add(out, v);
      return out;
    },
    evaluate,
  };
}

function distinctCount(agg: BoundAggregate, ctx: EvalContext): AggregateFunction {
  const args = agg.args.map((a) => compile(a, ctx));
  const values = uniqueValues((row) => {
    const vs = args.map((a) => a(row));
    return vs.some((v) => v === null) ? null : vs.length === 1 ? vs[0] : vs;
  }, (b) => (b as unknown[]).length);
  return values;
}

/** Spark's HLL++ `approx_count_distinct(col[, rsd])`: see hyperloglog.ts for the buffer. */
function approxCountDistinct(agg: BoundAggregate, arg: Evaluator): AggregateFunction {
  const rsdArg = agg.args[1];
  let rsd = DEFAULT_RSD;
  if (rsdArg !== undefined) {
    if (rsdArg.kind !== 'literal' || typeof rsdArg.value !== 'number') {
      throw new AnalysisError('approx_count_distinct: the relative standard deviation (rsd) must be a numeric literal.', { code: 'INVALID_RSD' });
    }
    rsd = rsdArg.value;
  }
  const p = precisionForRsd(rsd);
  if (typeof p === 'string') throw new AnalysisError(`approx_count_distinct: ${p}`, { code: 'INVALID_RSD' });
  const hll = new HyperLogLogPlusPlus(p);
  const hash = compileValueHasher(agg.args[0]!.type);
  return {
    initial: () => hll.initial(),
    update: (b, row) => {
      const v = arg(row);
      if (v === null || v === undefined) return b;
      hash(v, 0, 42);
      return hll.add(b as HllBuffer, hashHi, hashLo);
    },
    merge: (s, p) => hll.merge(s as HllBuffer, p as HllBuffer),
    evaluate: (b) => hll.estimate(b as HllBuffer),
  };
}
