import { argumentTypeError } from './errors.js';
import type { ArgumentInfo, ScalarFunctionSignature } from './signature.js';
import { requireIntegral, requireStrings } from './type-rules.js';
import type { DataType } from '../data-types.js';

/** A function of strings (implicitly cast) to `result`; integral parameters at `ints`. */
function strings(name: string, minArgs: number, maxArgs: number, result: DataType, ints: readonly number[] = []): ScalarFunctionSignature {
  return {
    name, minArgs, maxArgs,
    resultType: (args) => {
      args.forEach((_, i) => (ints.includes(i) ? requireIntegral(name, args, i) : requireStrings(name, args, i, i + 1)));
      return result;
    },
  };
}

/** reverse: a string, or an array (Spark's Reverse takes both). */
function reverseType(args: readonly ArgumentInfo[]): DataType {
  const t = args[0]!.type;
  if (typeof t === 'object' && t.kind === 'array') return t;
  if (typeof t === 'object') throw argumentTypeError('reverse', 0, t, '("STRING" or "ARRAY")');
  requireStrings('reverse', args);
  return 'string';
}

/** Signatures of string functions (implementations: lib/execution/functions/string-functions.ts). */
export const STRING_SIGNATURES: readonly ScalarFunctionSignature[] = [
  { name: 'concat_ws', minArgs: 1, maxArgs: Infinity, resultType: () => 'string' },
  strings('ltrim', 1, 2, 'string'),
  strings('rtrim', 1, 2, 'string'),
  strings('btrim', 1, 2, 'string'),
  strings('lpad', 2, 3, 'string', [1]),
  strings('rpad', 2, 3, 'string', [1]),
  strings('instr', 2, 2, 'int'),
  strings('locate', 2, 3, 'int', [2]),
  strings('position', 2, 3, 'int', [2]),
  strings('replace', 2, 3, 'string'),
  { name: 'reverse', minArgs: 1, maxArgs: 1, resultType: reverseType },
  strings('initcap', 1, 1, 'string'),
  strings('repeat', 2, 2, 'string', [1]),
  strings('translate', 3, 3, 'string'),
  strings('substring_index', 3, 3, 'string', [2]),
  strings('left', 2, 2, 'string', [1]),
  strings('right', 2, 2, 'string', [1]),
  strings('ascii', 1, 1, 'int'),
  strings('chr', 1, 1, 'string', [0]),
  strings('char', 1, 1, 'string', [0]),
  strings('startswith', 2, 2, 'boolean'),
  strings('endswith', 2, 2, 'boolean'),
  strings('contains', 2, 2, 'boolean'),
  strings('split_part', 3, 3, 'string', [2]),
  strings('ucase', 1, 1, 'string'),
  strings('lcase', 1, 1, 'string'),
  strings('char_length', 1, 1, 'int'),
  strings('character_length', 1, 1, 'int'),
  strings('octet_length', 1, 1, 'int'),
  strings('bit_length', 1, 1, 'int'),
  strings('space', 1, 1, 'string', [0]),
  strings('levenshtein', 2, 2, 'int'),
];
