import { AnalysisError } from '../../errors/sluice-error.js';
import { isArray, isNumeric, isStruct, typeToString, type DataType } from '../data-types.js';
import { argumentTypeError } from './errors.js';
import type { ArgumentInfo } from './signature.js';

/** Argument-type rules shared by the function families (Spark's ImplicitTypeCasts, reduced to Sluice's types). */

const NUMERIC_RANK: Record<string, number> = { int: 1, long: 2, double: 3 };

/** Atomic types Spark casts to a string argument implicitly (numbers, booleans, timestamps). */
export function requireStringLike(fn: string, args: readonly ArgumentInfo[], index: number): void {
  const t = args[index]!.type;
  if (t === 'string' || t === 'null' || isNumeric(t) || t === 'boolean' || t === 'timestamp') return;
  throw argumentTypeError(fn, index, t, '"STRING"');
}

export function requireStrings(fn: string, args: readonly ArgumentInfo[], from = 0, to = args.length): void {
  for (let i = from; i < to; i++) requireStringLike(fn, args, i);
}

export function requireIntegral(fn: string, args: readonly ArgumentInfo[], index: number): void {
  const t = args[index]!.type;
  if (t === 'int' || t === 'long' || t === 'null') return;
  throw argumentTypeError(fn, index, t, '"INT"');
}

export function requireNumeric(fn: string, args: readonly ArgumentInfo[], index: number): void {
  const t = args[index]!.type;
  // Spark would also cast a numeric string to DOUBLE here; Sluice asks for an explicit cast.
  if (isNumeric(t) || t === 'null') return;
  throw argumentTypeError(fn, index, t, '"NUMERIC"');
}

export function requireArray(fn: string, args: readonly ArgumentInfo[], index: number): DataType {
  const t = args[index]!.type;
  if (isArray(t)) return t.element;
  if (t === 'null') return 'null';
  throw argumentTypeError(fn, index, t, '"ARRAY"');
}

/** A literal argument's value (patterns, scales), or undefined when it is not a literal. */
export function literalOf(args: readonly ArgumentInfo[], index: number): unknown {
  return args[index]?.literal?.value;
}

/**
 * The type several values are brought to (coalesce, greatest, nvl): Spark's findWiderTypeForTwo
 * for Sluice's types: NULL gives way to anything, numbers widen, equal types stay; otherwise the
 * call is refused with Spark's DATA_DIFF_TYPES.
 */
export function commonType(fn: string, types: readonly DataType[]): DataType {
  let result: DataType = 'null';
  for (const t of types) {
    if (t === 'null') continue;
    if (result === 'null') { result = t; continue; }
    const a: number | undefined = NUMERIC_RANK[result as string];
    const b: number | undefined = NUMERIC_RANK[t as string];
    if (a !== undefined && b !== undefined) { result = a >= b ? result : t; continue; }
    if (typeToString(result) === typeToString(t)) continue;
    if (isArray(result) && isArray(t)) { result = { kind: 'array', element: commonType(fn, [result.element, t.element]) }; continue; }
    if (isStruct(result) || isStruct(t) || isArray(result) || isArray(t)) throw dataDiffTypes(fn, types);
    // Spark brings a string and an atomic value to STRING.
    if (result === 'string' || t === 'string') { result = 'string'; continue; }
    throw dataDiffTypes(fn, types);
  }
  return result;
}

function dataDiffTypes(fn: string, types: readonly DataType[]): AnalysisError {
  return new AnalysisError(
    `[DATATYPE_MISMATCH.DATA_DIFF_TYPES] Cannot resolve "${fn}(...)" due to data type mismatch: Input to \`${fn}\` should all be the same type, but it's [${types.map((t) => `"${typeToString(t).toUpperCase()}"`).join(', ')}].`,
    { code: 'DATATYPE_MISMATCH', errorClass: 'DATATYPE_MISMATCH.DATA_DIFF_TYPES' },
  );
}
