import { AnalysisError } from '../../errors/sluice-error.js';
import { arrayOf, isArray, structOf, type DataType } from '../data-types.js';
import { argumentTypeError } from './errors.js';
import type { ArgumentInfo, ScalarFunctionSignature } from './signature.js';
import { commonType, literalOf, requireArray, requireIntegral, requireStrings } from './type-rules.js';

/** The array argument's type itself (array_distinct, sort_array, ...). */
const sameArray = (name: string, rest: (args: readonly ArgumentInfo[]) => void = () => undefined) => (args: readonly ArgumentInfo[]): DataType => {
  const element = requireArray(name, args, 0);
  rest(args);
  return arrayOf(element);
};

/** An array and a value of its element type (array_contains, array_position, array_remove). */
function arrayAndValue(name: string, result: (element: DataType) => DataType): ScalarFunctionSignature {
  return {
    name, minArgs: 2, maxArgs: 2,
    resultType: (args) => {
      const element = requireArray(name, args, 0);
      return result(commonType(name, [element, args[1]!.type]));
    },
  };
}

/** Two arrays, brought to one element type (array_union, arrays_overlap, ...). */
function twoArrays(name: string, result: (t: DataType) => DataType): ScalarFunctionSignature {
  return {
    name, minArgs: 2, maxArgs: 2,
    resultType: (args) => {
      requireArray(name, args, 0);
      requireArray(name, args, 1);
      return result(commonType(name, [args[0]!.type, args[1]!.type]));
    },
  };
}

function elementAt(name: string): ScalarFunctionSignature {
  return {
    name, minArgs: 2, maxArgs: 2,
    resultType: (args) => {
      const element = requireArray(name, args, 0);
      requireIntegral(name, args, 1);
      return element;
    },
  };
}

/** Signatures of array functions (implementations: lib/execution/functions/collection-functions.ts). */
export const COLLECTION_SIGNATURES: readonly ScalarFunctionSignature[] = [
  arrayAndValue('array_contains', () => 'boolean'),
  arrayAndValue('array_position', () => 'long'),
  arrayAndValue('array_remove', (t) => arrayOf(t)),
  arrayAndValue('array_append', (t) => arrayOf(t)),
  arrayAndValue('array_prepend', (t) => arrayOf(t)),
  elementAt('element_at'),
  elementAt('try_element_at'),
  { name: 'array_distinct', minArgs: 1, maxArgs: 1, resultType: sameArray('array_distinct') },
  { name: 'array_compact', minArgs: 1, maxArgs: 1, resultType: sameArray('array_compact') },
  { name: 'array_sort', minArgs: 1, maxArgs: 1, resultType: sameArray('array_sort') },
  {
    name: 'sort_array', minArgs: 1, maxArgs: 2,
    resultType: sameArray('sort_array', (args) => {
      if (args[1] && args[1].type !== 'boolean') throw argumentTypeError('sort_array', 1, args[1].type, '"BOOLEAN"');
    }),
  },
  { name: 'slice', minArgs: 3, maxArgs: 3, resultType: sameArray('slice', (args) => { requireIntegral('slice', args, 1); requireIntegral('slice', args, 2); }) },
  { name: 'array_max', minArgs: 1, maxArgs: 1, resultType: (args) => requireArray('array_max', args, 0) },
  { name: 'array_min', minArgs: 1, maxArgs: 1, resultType: (args) => requireArray('array_min', args, 0) },
  { name: 'cardinality', minArgs: 1, maxArgs: 1, resultType: (args) => { requireArray('cardinality', args, 0); return 'int'; } },
  {
    name: 'array_join', minArgs: 2, maxArgs: 3,
    resultType: (args) => {
      requireArray('array_join', args, 0);
      requireStrings('array_join', args, 1);
      return 'string';
    },
  },
  {
    name: 'flatten', minArgs: 1, maxArgs: 1,
    resultType: (args) => {
      const inner = requireArray('flatten', args, 0);
      if (!isArray(inner)) throw argumentTypeError('flatten', 0, args[0]!.type, '"ARRAY" of "ARRAY"');
      return inner;
    },
  },
  { name: 'array_repeat', minArgs: 2, maxArgs: 2, resultType: (args) => { requireIntegral('array_repeat', args, 1); return arrayOf(args[0]!.type); } },
  {
    // named_struct(name1, value1, ...): the names must be string literals (struct() builds one).
    name: 'named_struct', minArgs: 2, maxArgs: Infinity,
    resultType: (args) => {
      if (args.length % 2 !== 0) throw new AnalysisError(`[WRONG_NUM_ARGS.WITHOUT_SUGGESTION] The \`named_struct\` requires 2n (n > 0) parameters but the actual number is ${args.length}.`, { code: 'WRONG_NUM_ARGS', errorClass: 'WRONG_NUM_ARGS.WITHOUT_SUGGESTION' });
      const fields = [];
      for (let i = 0; i < args.length; i += 2) {
        const name = literalOf(args, i);
        if (typeof name !== 'string') throw new AnalysisError('[DATATYPE_MISMATCH.CREATE_NAMED_STRUCT_WITHOUT_FOLDABLE_STRING] Cannot resolve "named_struct(...)": only foldable STRING expressions are allowed to appear at odd position.', { code: 'DATATYPE_MISMATCH', errorClass: 'DATATYPE_MISMATCH.CREATE_NAMED_STRUCT_WITHOUT_FOLDABLE_STRING' });
        fields.push({ name, type: args[i + 1]!.type });
      }
      return structOf(fields);
    },
  },
  twoArrays('arrays_overlap', () => 'boolean'),
  twoArrays('array_union', (t) => t),
  twoArrays('array_intersect', (t) => t),
  twoArrays('array_except', (t) => t),
];
