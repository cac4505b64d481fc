import { arrayOf, type DataType } from '../data-types.js';
import type { ScalarFunctionSignature } from './signature.js';
import { requireIntegral, requireStrings } from './type-rules.js';

/** String arguments, then integral ones from index `firstInt`. */
function regex(name: string, minArgs: number, maxArgs: number, result: DataType, firstInt = Infinity): ScalarFunctionSignature {
  return {
    name, minArgs, maxArgs,
    resultType: (args) => {
      args.forEach((_, i) => (i >= firstInt ? requireIntegral(name, args, i) : requireStrings(name, args, i, i + 1)));
      return result;
    },
  };
}

/** Signatures of LIKE and the Java-regex functions (implementations: lib/execution/functions/regex-functions.ts). */
export const REGEX_SIGNATURES: readonly ScalarFunctionSignature[] = [
  regex('like', 2, 3, 'boolean'),
  regex('ilike', 2, 3, 'boolean'),
  regex('rlike', 2, 2, 'boolean'),
  regex('regexp_like', 2, 2, 'boolean'),
  regex('regexp', 2, 2, 'boolean'),
  regex('regexp_extract', 2, 3, 'string', 2),
  regex('regexp_extract_all', 2, 3, arrayOf('string'), 2),
  regex('regexp_replace', 3, 4, 'string', 3),
  regex('regexp_count', 2, 2, 'int'),
  regex('regexp_substr', 2, 2, 'string'),
  regex('regexp_instr', 2, 3, 'int', 2),
];
