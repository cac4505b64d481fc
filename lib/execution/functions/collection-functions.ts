import { IllegalArgumentError } from '../../errors/sluice-error.js';
import { longToDouble, type LongValue } from '../../core/long.js';
import type { Evaluator, ScalarFunctionImplementation } from './implementation.js';
import { nullIntolerant } from './implementation.js';
import { coerced, sparkString } from './spark-values.js';
import { compareValues, encodeKey, valuesEqual } from '../values.js';
import type { DataType } from '../../plan/data-types.js';

type Values = readonly unknown[];
const isNull = (v: unknown): boolean => v === null || v === undefined;
const int = (v: unknown): number => longToDouble(v as LongValue);
const elementOf = (t: DataType): DataType => (typeof t === 'object' && t.kind === 'array' ? t.element : 'null');

/** Spark's ordering of array elements: NaN above every number (compareValues has no NaN order). */
function compareElements(a: unknown, b: unknown): number {
  const aNaN = typeof a === 'number' && Number.isNaN(a);
  const bNaN = typeof b === 'number' && Number.isNaN(b);
  if (aNaN || bNaN) return aNaN === bNaN ? 0 : aNaN ? 1 : -1;
  return compareValues(a, b);
}

/** Array elements brought to the call's element type (array<int> with array<long>, a value of a wider type). */
function arrayTo(arg: Evaluator, from: DataType, to: DataType): Evaluator {
  const [fromElement, toElement] = [elementOf(from), elementOf(to)];
  if (fromElement === toElement || fromElement === 'null') return arg;
  const convert = coerced((row) => row[0], fromElement, toElement);
  return (row) => {
    const v = arg(row) as Values | null;
    return v === null || v === undefined ? null : v.map((x) => convert([x]));
  };
}

/** Distinct values in first-seen order; NULL kept once; NaN equal to NaN (Spark's SQLOpenHashSet). */
function distinct(values: Values): unknown[] {
  const seen = new Set<string>();
  const out: unknown[] = [];
  for (const v of values) {
    const key = encodeKey([v ?? null]);
    if (!seen.has(key)) { seen.add(key); out.push(v ?? null); }
  }
  return out;
}

function indexOfZero(): IllegalArgumentError {
  return new IllegalArgumentError('[INVALID_INDEX_OF_ZERO] The index 0 is invalid. An index shall be either < 0 or > 0 (the first element has index 1). SQLSTATE: 22003', { code: 'INVALID_INDEX_OF_ZERO', errorClass: 'INVALID_INDEX_OF_ZERO' });
}

function elementAt(name: string, tolerant: boolean): ScalarFunctionImplementation {
  return {
    name,
    compile: (args) => nullIntolerant(args, ([a, i]) => {
      const array = a as Values;
      const index = int(i);
      if (index === 0) {
        if (tolerant) return null;
        throw indexOfZero();
      }
      const at = index > 0 ? index - 1 : array.length + index;
      if (at < 0 || at >= array.length) {
        if (tolerant) return null;
        throw new IllegalArgumentError(
          `[INVALID_ARRAY_INDEX_IN_ELEMENT_AT] The index ${index} is out of bounds. The array has ${array.length} elements. Use \`try_element_at\` to tolerate accessing element at invalid index and return NULL instead. If necessary set "spark.sql.ansi.enabled" to "false" to bypass this error. SQLSTATE: 22003`,
          { code: 'INVALID_ARRAY_INDEX_IN_ELEMENT_AT', errorClass: 'INVALID_ARRAY_INDEX_IN_ELEMENT_AT' },
        );
      }
      return array[at] ?? null;
    }),
  };
}

/** f(array, value) with the value brought to the array's element type; NULL for a NULL array or value. */
function withValue(name: string, f: (array: Values, value: unknown) => unknown): ScalarFunctionImplementation {
  return {
    name,
    compile: (args, call) => {
      const arrayType = call.args[0]!.type;
      const element = name === 'array_contains' || name === 'array_position' ? commonElement(call.args[0]!.type, call.args[1]!.type) : elementOf(call.type);
      const a = arrayTo(args[0]!, arrayType, { kind: 'array', element });
      const v = coerced(args[1]!, call.args[1]!.type, element);
      return nullIntolerant([a, v], ([array, value]) => f(array as Values, value));
    },
  };
}

function commonElement(arrayType: DataType, valueType: DataType): DataType {
  const e = elementOf(arrayType);
  if (e === 'null') return valueType;
  if (valueType === 'null' || e === valueType) return e;
  return e === 'double' || valueType === 'double' ? 'double' : e === 'long' || valueType === 'long' ? 'long' : e;
}

/** f(a, b) on two arrays brought to the call's element type. */
function twoArrays(name: string, f: (a: Values, b: Values) => unknown): ScalarFunctionImplementation {
  return {
    name,
    compile: (args, call) => {
      const target = name === 'arrays_overlap' ? commonArray(call.args[0]!.type, call.args[1]!.type) : call.type;
      const [a, b] = args.map((x, i) => arrayTo(x, call.args[i]!.type, target));
      return nullIntolerant([a!, b!], ([x, y]) => f(x as Values, y as Values));
    },
  };
}

function commonArray(a: DataType, b: DataType): DataType {
  return { kind: 'array', element: commonElement(a, elementOf(b)) };
}

const contains = (array: Values, value: unknown): boolean => array.some((x) => !isNull(x) && valuesEqual(x, value));

/** Array functions (signatures: lib/plan/function-catalog/collection-signatures.ts). */
export const COLLECTION_FUNCTIONS: readonly ScalarFunctionImplementation[] = [
  // Spark's ArrayContains: NULL when not found but the array holds a NULL.
  withValue('array_contains', (array, value) => (contains(array, value) ? true : array.some(isNull) ? null : false)),
  withValue('array_position', (array, value) => array.findIndex((x) => !isNull(x) && valuesEqual(x, value)) + 1),
  withValue('array_remove', (array, value) => array.filter((x) => isNull(x) || !valuesEqual(x, value))),
  { name: 'array_append', compile: (args, call) => {
    const a = arrayTo(args[0]!, call.args[0]!.type, call.type);
    const v = coerced(args[1]!, call.args[1]!.type, elementOf(call.type));
    return (row) => { const array = a(row) as Values | null; return isNull(array) ? null : [...array!, v(row) ?? null]; };
  } },
  { name: 'array_prepend', compile: (args, call) => {
    const a = arrayTo(args[0]!, call.args[0]!.type, call.type);
    const v = coerced(args[1]!, call.args[1]!.type, elementOf(call.type));
    return (row) => { const array = a(row) as Values | null; return isNull(array) ? null : [v(row) ?? null, ...array!]; };
  } },
  elementAt('element_at', false),
  elementAt('try_element_at', true),
  { name: 'array_distinct', compile: (args) => nullIntolerant(args, ([a]) => distinct(a as Values)) },
  { name: 'array_compact', compile: (args) => nullIntolerant(args, ([a]) => (a as Values).filter((x) => !isNull(x))) },
  // array_sort: ascending, NULLs last.
  { name: 'array_sort', compile: (args) => nullIntolerant(args, ([a]) => [...(a as Values)].sort((x, y) => (isNull(x) ? (isNull(y) ? 0 : 1) : isNull(y) ? -1 : compareElements(x, y)))) },
  {
    // sort_array: ascending with NULLs first, or descending with NULLs last.
    name: 'sort_array',
    compile: (args) => nullIntolerant(args, ([a, asc]) => {
      const sorted = [...(a as Values)].sort((x, y) => (isNull(x) ? (isNull(y) ? 0 : -1) : isNull(y) ? 1 : compareElements(x, y)));
      return asc === false ? sorted.reverse() : sorted;
    }),
  },
  {
    name: 'slice',
    compile: (args) => nullIntolerant(args, ([a, s, l]) => {
      const array = a as Values;
      const start = int(s);
      const length = int(l);
      if (start === 0) throw new IllegalArgumentError('[INVALID_PARAMETER_VALUE.START] The value of parameter(s) `start` in `slice` is invalid: Expects a positive or a negative value for `start`, but got 0. SQLSTATE: 22023', { code: 'INVALID_PARAMETER_VALUE', errorClass: 'INVALID_PARAMETER_VALUE.START' });
      if (length < 0) throw new IllegalArgumentError(`[INVALID_PARAMETER_VALUE.LENGTH] The value of parameter(s) \`length\` in \`slice\` is invalid: Expects \`length\` greater than or equal to 0, but got ${length}. SQLSTATE: 22023`, { code: 'INVALID_PARAMETER_VALUE', errorClass: 'INVALID_PARAMETER_VALUE.LENGTH' });
      const from = start > 0 ? start - 1 : array.length + start;
      if (from < 0 || from >= array.length) return [];
      return array.slice(from, from + length);
    }),
  },
  { name: 'array_max', compile: (args) => nullIntolerant(args, ([a]) => (a as Values).reduce<unknown>((m, x) => (isNull(x) ? m : m === null || compareElements(x, m) > 0 ? x : m), null)) },
  { name: 'array_min', compile: (args) => nullIntolerant(args, ([a]) => (a as Values).reduce<unknown>((m, x) => (isNull(x) ? m : m === null || compareElements(x, m) < 0 ? x : m), null)) },
  // Under ANSI mode (Spark 4's default) size/cardinality of NULL is NULL.
  { name: 'cardinality', compile: (args) => nullIntolerant(args, ([a]) => (a as Values).length) },
  {
    name: 'array_join',
    compile: (args, call) => {
      const element = elementOf(call.args[0]!.type);
      const [array, delimiter] = args;
      const nullReplacement = args[2];
      return (row) => {
        const a = array!(row) as Values | null;
        const d = delimiter!(row);
        if (isNull(a) || isNull(d)) return null;
        const replacement = nullReplacement ? nullReplacement(row) : undefined;
        if (replacement === null) return null;
        const parts: string[] = [];
        for (const x of a!) {
          if (!isNull(x)) parts.push(sparkString(x, element));
          else if (replacement !== undefined) parts.push(String(replacement));
        }
        return parts.join(String(d));
      };
    },
  },
  { name: 'flatten', compile: (args) => nullIntolerant(args, ([a]) => ((a as Values).some(isNull) ? null : (a as Values[]).flat())) },
  {
    name: 'array_repeat',
    compile: ([v, n]) => (row) => {
      const count = n!(row);
      if (isNull(count)) return null;
      const value = v!(row) ?? null;
      return Array.from({ length: Math.max(0, int(count)) }, () => value);
    },
  },
  {
    name: 'named_struct',
    compile: (args, call) => {
      const fields = (call.type as { fields: readonly { name: string }[] }).fields.map((f, i) => [f.name, args[2 * i + 1]!] as const);
      return (row) => {
        const out: Record<string, unknown> = {};
        for (const [name, value] of fields) out[name] = value(row) ?? null;
        return out;
      };
    },
  },
  twoArrays('arrays_overlap', (a, b) => {
    if (a.some((x) => !isNull(x) && contains(b, x))) return true;
    return a.length > 0 && b.length > 0 && (a.some(isNull) || b.some(isNull)) ? null : false;
  }),
  twoArrays('array_union', (a, b) => distinct([...a, ...b])),
  twoArrays('array_intersect', (a, b) => {
    const inB = new Set(b.map((x) => encodeKey([x ?? null])));
    return distinct(a).filter((x) => inB.has(encodeKey([x])));
  }),
  twoArrays('array_except', (a, b) => {
    const inB = new Set(b.map((x) => encodeKey([x ?? null])));
    return distinct(a).filter((x) => !inB.has(encodeKey([x])));
  }),
];
