import type { ScalarFunctionSignature } from './signature.js';
import { COLLECTION_SIGNATURES } from './collection-signatures.js';
import { HASH_SIGNATURES } from './hash-signatures.js';
import { JSON_SIGNATURES } from './json-signatures.js';
import { MATH_SIGNATURES } from './math-signatures.js';
import { NULL_SIGNATURES } from './null-signatures.js';
import { REGEX_SIGNATURES } from './regex-signatures.js';
import { STRING_SIGNATURES } from './string-signatures.js';
import { DATETIME_SIGNATURES } from './datetime-signatures.js';
import type { UserFunction } from '../user-function.js';
import { registeredUserFunction } from './user-functions.js';

export type { ArgumentInfo, ScalarFunctionSignature } from './signature.js';
export { argumentTypeError, wrongNumberOfArguments } from './errors.js';
export { registerUserFunction, registeredUserFunction, unregisterUserFunction } from './user-functions.js';

/**
 * Built-in scalar functions beyond the operators the binder types itself. Add a family by adding
 * its signature list here and its implementation list to lib/execution/functions/index.ts.
 */
const FAMILIES: readonly (readonly ScalarFunctionSignature[])[] = [
  STRING_SIGNATURES, REGEX_SIGNATURES, MATH_SIGNATURES, NULL_SIGNATURES, JSON_SIGNATURES, COLLECTION_SIGNATURES, HASH_SIGNATURES,
  DATETIME_SIGNATURES,
];

const BY_NAME: ReadonlyMap<string, ScalarFunctionSignature> = indexByName(FAMILIES.flat());

export function builtinSignature(name: string): ScalarFunctionSignature | undefined {
  return BY_NAME.get(name.toLowerCase());
}

/** Functions whose value differs between calls on the same input: kept out of join rewrites. */
const NONDETERMINISTIC_OPERATORS: ReadonlySet<string> = new Set(['monotonically_increasing_id', 'rand', 'randn', 'uuid']);

/** `udf`: the UDF a call carries (DataFrame API); a call by name may also be a registered one (SQL). */
export function isNondeterministicFunction(name: string, udf?: UserFunction): boolean {
  if (udf) return !udf.deterministic;
  return NONDETERMINISTIC_OPERATORS.has(name) || builtinSignature(name)?.nondeterministic === true
    || registeredUserFunction(name)?.deterministic === false;
}

export function builtinFunctionNames(): readonly string[] {
  return [...BY_NAME.keys()];
}

function indexByName(signatures: readonly ScalarFunctionSignature[]): Map<string, ScalarFunctionSignature> {
  const map = new Map<string, ScalarFunctionSignature>();
  for (const s of signatures) {
    if (map.has(s.name)) throw new Error(`scalar function ${s.name} is declared twice`);
    map.set(s.name, s);
  }
  return map;
}
