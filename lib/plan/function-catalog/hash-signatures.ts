import type { ScalarFunctionSignature } from './signature.js';
import { requireIntegral, requireStrings } from './type-rules.js';

/** Signatures of hash functions (implementations: lib/execution/functions/hash-functions.ts). */
export const HASH_SIGNATURES: readonly ScalarFunctionSignature[] = [
  { name: 'md5', minArgs: 1, maxArgs: 1, resultType: (args) => { requireStrings('md5', args); return 'string'; } },
  { name: 'sha1', minArgs: 1, maxArgs: 1, resultType: (args) => { requireStrings('sha1', args); return 'string'; } },
  { name: 'sha', minArgs: 1, maxArgs: 1, resultType: (args) => { requireStrings('sha', args); return 'string'; } },
  { name: 'sha2', minArgs: 2, maxArgs: 2, resultType: (args) => { requireStrings('sha2', args, 0, 1); requireIntegral('sha2', args, 1); return 'string'; } },
  { name: 'crc32', minArgs: 1, maxArgs: 1, resultType: (args) => { requireStrings('crc32', args); return 'long'; } },
  { name: 'hex', minArgs: 1, maxArgs: 1, resultType: (args) => { requireStrings('hex', args); return 'string'; } },
  { name: 'hash', minArgs: 1, maxArgs: Infinity, resultType: () => 'int' },
  { name: 'xxhash64', minArgs: 1, maxArgs: Infinity, resultType: () => 'long' },
];
