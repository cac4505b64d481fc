import { AnalysisError } from '../../errors/sluice-error.js';
import type { DataType } from '../data-types.js';
import type { ArgumentInfo, ScalarFunctionSignature } from './signature.js';
import { commonType, literalOf, requireIntegral, requireNumeric } from './type-rules.js';

const numericArgs = (name: string, args: readonly ArgumentInfo[]): void => args.forEach((_, i) => requireNumeric(name, args, i));

/** A function of doubles (numbers widened) to a double: sqrt, exp, log, sin, pow, ... */
function doubles(name: string, minArgs = 1, maxArgs = minArgs): ScalarFunctionSignature {
  return { name, minArgs, maxArgs, resultType: (args) => { numericArgs(name, args); return 'double'; } };
}

/** The type of the first argument (int, long or double; NULL as int, as Spark's NullType to IntegerType). */
function sameAsInput(name: string, minArgs = 1, maxArgs = minArgs): ScalarFunctionSignature {
  return { name, minArgs, maxArgs, resultType: (args) => { numericArgs(name, args); return args[0]!.type === 'null' ? 'int' : args[0]!.type; } };
}

/** round/bround: the scale must be a constant integer, as Spark's `scale` must be foldable. */
function rounding(name: string): ScalarFunctionSignature {
  return {
    name, minArgs: 1, maxArgs: 2,
    resultType: (args) => {
      requireNumeric(name, args, 0);
      if (args.length === 2) {
        requireIntegral(name, args, 1);
        if (args[1]!.literal === undefined || literalOf(args, 1) === null) {
          throw new AnalysisError(
            `[DATATYPE_MISMATCH.NON_FOLDABLE_INPUT] Cannot resolve "${name}(...)" due to data type mismatch: the input \`scale\` should be a foldable "INT" expression; however, got a column.`,
            { code: 'DATATYPE_MISMATCH', errorClass: 'DATATYPE_MISMATCH.NON_FOLDABLE_INPUT' },
          );
        }
      }
      return args[0]!.type === 'null' ? 'double' : args[0]!.type;
    },
  };
}

/** floor/ceil: a long (Spark's Floor and Ceil of int, long and double are BIGINT). */
function toLong(name: string): ScalarFunctionSignature {
  return { name, minArgs: 1, maxArgs: 1, resultType: (args) => { numericArgs(name, args); return 'long' as DataType; } };
}

function extremum(name: string): ScalarFunctionSignature {
  return {
    name, minArgs: 2, maxArgs: Infinity,
    resultType: (args) => commonType(name, args.map((a) => a.type)),
  };
}

/** Signatures of math functions (implementations: lib/execution/functions/math-functions.ts). */
export const MATH_SIGNATURES: readonly ScalarFunctionSignature[] = [
  rounding('round'),
  rounding('bround'),
  toLong('floor'),
  toLong('ceil'),
  toLong('ceiling'),
  sameAsInput('abs'),
  sameAsInput('negative'),
  sameAsInput('positive'),
  ...['sqrt', 'cbrt', 'exp', 'expm1', 'ln', 'log10', 'log2', 'log1p', 'sin', 'cos', 'tan', 'asin', 'acos', 'atan', 'sinh', 'cosh', 'tanh', 'degrees', 'radians', 'rint', 'signum', 'sign']
    .map((name) => doubles(name)),
  doubles('log', 1, 2),
  doubles('pow', 2),
  doubles('power', 2),
  doubles('atan2', 2),
  doubles('hypot', 2),
  doubles('e', 0),
  doubles('pi', 0),
  {
    name: 'pmod', minArgs: 2, maxArgs: 2,
    resultType: (args) => { numericArgs('pmod', args); return commonType('pmod', args.map((a) => a.type)); },
  },
  {
    name: 'format_number', minArgs: 2, maxArgs: 2,
    resultType: (args) => { requireNumeric('format_number', args, 0); requireIntegral('format_number', args, 1); return 'string'; },
  },
  extremum('greatest'),
  extremum('least'),
];
