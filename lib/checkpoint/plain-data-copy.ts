/** Thrown inside `copyPlainData` when a value is not plain data: the caller falls back. */
const NOT_PLAIN = Symbol('not plain data');
/** Deeper than this is not a log entry's shape (or is a cycle): structuredClone decides. */
const MAX_DEPTH = 32;

/**
 * A deep copy of plain data (objects with Object.prototype, dense arrays, primitives), equal to
 * what structuredClone gives for it at a fraction of its cost (structuredClone serializes and
 * deserializes). Anything else (a Map, a Date, a class instance, a cycle, a function) goes through
 * structuredClone, which copies or refuses it as before.
 */
export function copyPlainData<T>(value: T): T {
  try {
    return copy(value, 0) as T;
  } catch (error) {
    if (error === NOT_PLAIN) return structuredClone(value);
    throw error;
  }
}

function copy(value: unknown, depth: number): unknown {
  if (typeof value !== 'object' || value === null) {
    if (typeof value === 'function' || typeof value === 'symbol') throw NOT_PLAIN;
    return value;
  }
  if (depth >= MAX_DEPTH) throw NOT_PLAIN;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto === Array.prototype) {
    const array = value as unknown[];
    const out = new Array<unknown>(array.length);
    for (let i = 0; i < array.length; i++) {
      if (!(i in array)) throw NOT_PLAIN; // a hole: structuredClone keeps it
      out[i] = copy(array[i], depth + 1);
    }
    if (Object.keys(array).length !== array.length) throw NOT_PLAIN; // named properties on the array
    return out;
  }
  if (proto !== Object.prototype) throw NOT_PLAIN;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const v = copy((value as Record<string, unknown>)[key], depth + 1);
    if (key === '__proto__') Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
    else out[key] = v;
  }
  return out;
}
