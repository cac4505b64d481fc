import type { ScalarFunctionImplementation } from './implementation.js';
import { STRING_FUNCTIONS } from './string-functions.js';
import { DATETIME_FUNCTIONS } from './datetime-functions.js';

export type { ScalarFunctionImplementation } from './implementation.js';
export { nullIntolerant } from './implementation.js';

/** Implementations of lib/plan/function-catalog's signatures, one family per file. */
const FAMILIES: readonly (readonly ScalarFunctionImplementation[])[] = [
  STRING_FUNCTIONS,
  DATETIME_FUNCTIONS,
];

const BY_NAME: ReadonlyMap<string, ScalarFunctionImplementation> = new Map(FAMILIES.flat().map((f) => [f.name, f]));

export function builtinImplementation(name: string): ScalarFunctionImplementation | undefined {
  return BY_NAME.get(name.toLowerCase());
}

export function implementedFunctionNames(): readonly string[] {
  return [...BY_NAME.keys()];
}
