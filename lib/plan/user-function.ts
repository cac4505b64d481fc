import { parseDataType, typeToString, type DataType } from './data-types.js';

/**
 * A user-defined scalar function (Spark's UDF): a TypeScript function with a declared return
 * type. It travels inside the expression that calls it (a DataFrame's `slug(col('title'))`), or
 * is registered by name for SQL text (`session.udf.register`), so a deployed query carries its
 * UDFs in its own module: nothing is looked up outside the query at run time.
 */
export interface UserFunction {
  /** The name in column names and messages; lowercased for lookup by name. */
  readonly name: string;
  // Arguments arrive as engine values; `any` lets users type their parameters (s: string).
  readonly fn: (...args: any[]) => unknown;
  readonly returnType: DataType;
  /** False after `.asNondeterministic()`: never pushed through a join or inferred as a join filter. */
  readonly deterministic: boolean;
}

export function userFunction(name: string, fn: UserFunction['fn'], returnType: DataType | string, deterministic = true): UserFunction {
  if (typeof fn !== 'function') throw new TypeError(`udf ${name}: expected a function, got ${typeof fn}`);
  return Object.freeze({ name, fn, returnType: typeof returnType === 'string' ? parseDataType(returnType) : returnType, deterministic });
}

/** Spark's rendering in FAILED_EXECUTE_UDF: `slug: (string) => string`. */
export function describeUserFunction(f: UserFunction, argumentTypes: readonly DataType[]): string {
  return `\`${f.name}\`: (${argumentTypes.map(typeToString).join(', ')}) => ${typeToString(f.returnType)}`;
}
