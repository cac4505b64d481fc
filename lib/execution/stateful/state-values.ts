import { LONG_MAX, LONG_MIN, INT_MAX, INT_MIN } from '../../core/long.js';
import { Decimal } from '../../core/decimal.js';
import { typeToString, type DataType } from '../../plan/data-types.js';
import { IllegalArgumentError } from '../../errors/sluice-error.js';

/**
 * State values and output rows of user code: checked and copied at the boundary, so that what a
 * memory run keeps is exactly what the DynamoDB store can write and read back (JSON, with bigint
 * for a long beyond 2^53), and a value the user mutates later does not change stored state.
 */

function isPlainObject(v: object): boolean {
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

/** Why `v` is not JSON-like, or null. */
function notJsonLike(v: unknown, path: string): string | null {
  if (v === null || typeof v === 'string' || typeof v === 'boolean' || typeof v === 'bigint') return null;
  if (typeof v === 'number') return Number.isFinite(v) ? null : `${path} is ${v}`;
  if (typeof v !== 'object') return `${path} is a ${typeof v}`;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const why = notJsonLike(v[i], `${path}[${i}]`);
      if (why) return why;
    }
    return null;
  }
  if (!isPlainObject(v)) return `${path} is a ${(v as object).constructor?.name ?? 'class instance'}`;
  for (const [k, x] of Object.entries(v)) {
    if (x === undefined) continue;
    const why = notJsonLike(x, `${path}.${k}`);
    if (why) return why;
  }
  return null;
}

function showValue(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x)) ?? String(v);
}

/** Why `v` does not fit `t` (NULL fits every type), or null. */
export function notOfType(v: unknown, t: DataType, path: string): string | null {
  if (v === null || v === undefined) return null;
  const bad = `${path} = ${showValue(v)} is not a ${typeToString(t)}`;
  if (typeof t === 'string') {
    switch (t) {
      case 'long':
        if (typeof v === 'bigint') return v >= LONG_MIN && v <= LONG_MAX ? null : bad;
        return Number.isSafeInteger(v) ? null : bad;
      case 'int':
        return Number.isInteger(v) && (v as number) >= INT_MIN && (v as number) <= INT_MAX ? null : bad;
      case 'double':
        return typeof v === 'number' ? null : bad;
      case 'timestamp':
      case 'date':
        return Number.isSafeInteger(v) ? null : bad;
      case 'binary':
        return v instanceof Uint8Array ? null : bad;
      case 'string':
        return typeof v === 'string' ? null : bad;
      case 'boolean':
        return typeof v === 'boolean' ? null : bad;
      default:
        return bad;
    }
  }
  if (t.kind === 'array') {
    if (!Array.isArray(v)) return bad;
    for (let i = 0; i < v.length; i++) {
      const why = notOfType(v[i], t.element, `${path}[${i}]`);
      if (why) return why;
    }
    return null;
  }
  if (t.kind === 'decimal') return v instanceof Decimal ? null : bad;
  if (t.kind === 'map') return v instanceof Map ? null : bad;
  if (typeof v !== 'object' || Array.isArray(v)) return bad;
  const record = v as Record<string, unknown>;
  const unknownField = Object.keys(record).find((k) => !t.fields.some((f) => f.name === k));
  if (unknownField !== undefined) return `${path} has a field '${unknownField}' that ${typeToString(t)} does not declare`;
  for (const f of t.fields) {
    const why = notOfType(record[f.name], f.type, `${path}.${f.name}`);
    if (why) return why;
  }
  return null;
}

function deepCopy<T>(v: T): T {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(deepCopy) as T;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) if (x !== undefined) out[k] = deepCopy(x);
  return out as T;
}

/** A copy of a state value about to be stored; refuses NULL, non-JSON values and values not of the declared type. */
export function storableValue<T>(value: T, stateName: string, type: DataType | null): T {
  if (value === null || value === undefined) {
    throw new IllegalArgumentError(`[ILLEGAL_STATE_STORE_VALUE.NULL_VALUE] Cannot write null value to state store for state=${stateName}.`, {
      code: 'NULL_STATE_VALUE', errorClass: 'ILLEGAL_STATE_STORE_VALUE.NULL_VALUE', hint: 'clear() the state instead of writing null.',
    });
  }
  const why = notJsonLike(value, stateName) ?? (type ? notOfType(value, type, stateName) : null);
  if (why) {
    throw new IllegalArgumentError(`State value for state=${stateName} cannot be stored: ${why}.`, {
      code: 'UNSTORABLE_STATE_VALUE',
      hint: 'state is written to DynamoDB as JSON: use plain objects, arrays, strings, numbers (bigint for longs beyond 2^53), booleans; '
        + 'timestamps as numbers; and the type the state variable declares.',
    });
  }
  return deepCopy(value);
}

/** A copy of a stored value for user code (mutating it does not change the state). */
export function readableValue<T>(value: T): T {
  return deepCopy(value);
}

/** A user output row as the engine's row, in `fields` order; refuses a value not of its column's type. */
export function outputRow(row: unknown, fields: readonly { name: string; type: DataType }[], operator: string): unknown[] {
  if (row === null || typeof row !== 'object' || Array.isArray(row)) {
    throw new IllegalArgumentError(`${operator} returned ${JSON.stringify(row)} where an output row (an object) was expected.`, {
      code: 'BAD_OUTPUT_ROW', hint: `return objects with the fields of the declared output schema (${fields.map((f) => f.name).join(', ')}).`,
    });
  }
  const record = row as Record<string, unknown>;
  return fields.map((f) => {
    const v = record[f.name] ?? null;
    const why = notOfType(v, f.type, f.name);
    if (why) {
      throw new IllegalArgumentError(`${operator} returned a row that does not fit its output schema: ${why}.`, {
        code: 'BAD_OUTPUT_ROW', hint: 'return values of the declared output types (timestamps in microseconds, longs as integers or bigint).',
      });
    }
    return deepCopy(v);
  });
}
