import type { Evaluator, ScalarFunctionImplementation } from './implementation.js';
import { coerced } from './spark-values.js';
import { valuesEqual } from '../values.js';
import type { DataType } from '../../plan/data-types.js';
import { commonType } from '../../plan/function-catalog/type-rules.js';

const isNull = (v: unknown): boolean => v === null || v === undefined;

/** Each argument brought to the call's type. */
function toCallType(args: readonly Evaluator[], types: readonly DataType[], t: DataType): Evaluator[] {
  return args.map((a, i) => coerced(a, types[i]!, t));
}

/** The first non-NULL of two (nvl, ifnull). */
function firstNonNull(name: string): ScalarFunctionImplementation {
  return {
    name,
    compile: (args, call) => {
      const [a, b] = toCallType(args, call.args.map((x) => x.type), call.type);
      return (row) => { const v = a!(row); return isNull(v) ? b!(row) : v; };
    },
  };
}

/** Equality after both sides are brought to one type (1 and 1.0 are equal, as in Spark). */
function equalsAfterCoercion(args: readonly Evaluator[], types: readonly DataType[]): [Evaluator, Evaluator] {
  const t = commonType('=', types);
  const [a, b] = toCallType(args, types, t);
  return [a!, b!];
}

/** NULL-handling functions (signatures: lib/plan/function-catalog/null-signatures.ts). */
export const NULL_FUNCTIONS: readonly ScalarFunctionImplementation[] = [
  firstNonNull('nvl'),
  firstNonNull('ifnull'),
  {
    name: 'nvl2',
    compile: ([test, ...rest], call) => {
      const [ifNotNull, ifNull] = toCallType(rest, call.args.slice(1).map((x) => x.type), call.type);
      return (row) => (isNull(test!(row)) ? ifNull!(row) : ifNotNull!(row));
    },
  },
  {
    name: 'nullif',
    compile: (args, call) => {
      const [a, b] = equalsAfterCoercion(args, call.args.map((x) => x.type));
      const [original] = args;
      return (row) => {
        const x = a(row);
        if (isNull(x)) return null;
        const y = b(row);
        return !isNull(y) && valuesEqual(x, y) ? null : original!(row);
      };
    },
  },
  {
    // Spark's In: NULL for a NULL value, and NULL rather than false when no element matched but one is NULL.
    name: 'in',
    compile: (args, call) => {
      const types = call.args.map((x) => x.type);
      const [value, ...list] = toCallType(args, types, commonType('in', types));
      return (row) => {
        const v = value!(row);
        if (isNull(v)) return null;
        let sawNull = false;
        for (const item of list) {
          const x = item(row);
          if (isNull(x)) sawNull = true;
          else if (x === v || valuesEqual(x, v)) return true;
        }
        return sawNull ? null : false;
      };
    },
  },
  {
    name: 'equal_null',
    compile: (args, call) => {
      const [a, b] = equalsAfterCoercion(args, call.args.map((x) => x.type));
      return (row) => {
        const x = a(row);
        const y = b(row);
        return isNull(x) || isNull(y) ? isNull(x) && isNull(y) : valuesEqual(x, y);
      };
    },
  },
  // Spark's IsNaN is never NULL: a NULL input is not NaN.
  { name: 'isnan', compile: ([x]) => (row) => { const v = x!(row); return typeof v === 'number' && Number.isNaN(v); } },
  {
    name: 'nanvl',
    compile: (args, call) => {
      const [a, b] = toCallType(args, call.args.map((x) => x.type), 'double');
      return (row) => {
        const v = a!(row);
        if (isNull(v)) return null;
        return Number.isNaN(v) ? b!(row) : v;
      };
    },
  },
  {
    name: 'zeroifnull',
    compile: ([x], call) => {
      const a = coerced(x!, call.args[0]!.type, call.type);
      return (row) => { const v = a(row); return isNull(v) ? 0 : v; };
    },
  },
  { name: 'nullifzero', compile: ([x]) => (row) => { const v = x!(row); return isNull(v) || v === 0 ? null : v; } },
];
