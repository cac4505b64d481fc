import { Column, toColumn, type ColumnLike } from './column.js';
import type { DataType } from './data-types.js';
import { userFunction, type UserFunction } from './user-function.js';

/**
 * A UDF ready to call on columns: `slug(col('title'))` or `slug('title')` gives a Column.
 * `asNondeterministic()` and `withName()` return new UDFs, as in Spark.
 */
export interface UserDefinedFunction {
  (...columns: ColumnLike[]): Column;
  readonly definition: UserFunction;
  asNondeterministic(): UserDefinedFunction;
  /** The name in column names (`slug(title)`) and messages; the default is the function's own name, else `UDF`. */
  withName(name: string): UserDefinedFunction;
}

/**
 * Spark's `udf(f, returnType)`: a TypeScript function applied row by row. It receives engine
 * values (NULL as null, timestamps as microseconds since the epoch, longs beyond 2^53 as bigint)
 * and must return a value of `returnType` (a timestamp may be a Date) or null. A throw, or a
 * value of another type, is FAILED_EXECUTE_UDF: the input record is dead-lettered with it.
 */
export function udf(fn: UserFunction['fn'], returnType: DataType | string = 'string'): UserDefinedFunction {
  return callable(userFunction(fn.name || 'UDF', fn, returnType));
}

export function callable(definition: UserFunction): UserDefinedFunction {
  const apply = (...columns: ColumnLike[]): Column =>
    new Column({ kind: 'call', fn: definition.name, args: columns.map((c) => toColumn(c).expr), udf: definition });
  return Object.assign(apply, {
    definition,
    asNondeterministic: () => callable(userFunction(definition.name, definition.fn, definition.returnType, false)),
    withName: (name: string) => callable(userFunction(name, definition.fn, definition.returnType, definition.deterministic)),
  });
}
