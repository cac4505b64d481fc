import type { ScalarFunctionSignature } from './signature.js';

/** Signatures of string functions (implementations: lib/execution/functions/string-functions.ts). */
export const STRING_SIGNATURES: readonly ScalarFunctionSignature[] = [
  { name: 'concat_ws', minArgs: 1, maxArgs: Infinity, resultType: () => 'string' },
];
