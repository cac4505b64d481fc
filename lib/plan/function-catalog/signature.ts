import type { DataType } from '../data-types.js';

/** What the analyzer sees of one argument: its type and, when it is a literal, its value. */
export interface ArgumentInfo {
  readonly type: DataType;
  readonly literal?: { readonly value: unknown };
}

/**
 * The analysis half of a scalar function: arity and result type. Its evaluation half lives in
 * lib/execution/functions (the same name in both tables, checked by a test), because the analyzer
 * sits below the execution layer and must not import it.
 */
export interface ScalarFunctionSignature {
  readonly name: string;
  /** Inclusive bounds on the number of arguments; `maxArgs: Infinity` for variadic functions. */
  readonly minArgs: number;
  readonly maxArgs: number;
  /** The result type; throws `argumentTypeError(...)` when an argument's type is not accepted. */
  readonly resultType: (args: readonly ArgumentInfo[]) => DataType;
  /** Differs between calls with the same input (rand, uuid): never pushed through a join or deduplicated on. */
  readonly nondeterministic?: boolean;
}
