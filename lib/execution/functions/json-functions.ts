import { typeToString, type DataType } from '../../plan/data-types.js';
import { AnalysisError } from '../../errors/sluice-error.js';
import { Decimal, parseDecimal, toPrecision } from '../../core/decimal.js';
import { formatDate, parseDate } from '../../core/dates.js';
import { parseTimestamp } from '../../core/timestamps.js';
import { INT_MAX, INT_MIN, longFromBigInt, type LongValue } from '../../core/long.js';
import type { Evaluator, ScalarFunctionImplementation } from './implementation.js';
import { nullIntolerant } from './implementation.js';
import { JsonSyntaxError, parseJson, quoteJson, writeJson, type JsonNode } from './json-text.js';
import { asStrings, javaDoubleString } from './spark-values.js';

/** A type this JSON reader or writer does not handle yet: refused when the query is compiled, never a silent NULL. */
function unsupportedJsonType(fn: string, type: DataType): Error {
  return new AnalysisError(`${fn} does not support the type ${typeToString(type)} yet.`, { code: 'UNSUPPORTED_DATATYPE', errorClass: 'DATATYPE_MISMATCH.INVALID_JSON_SCHEMA' });
}

/** A JSON value that does not fit its field's type: the field is NULL (Spark's partial results). */
class FieldMismatch extends Error {}
const mismatch = (): never => { throw new FieldMismatch(); };

const SPECIAL_DOUBLES: Record<string, number> = { NaN: NaN, Infinity: Infinity, '+Infinity': Infinity, '-Infinity': -Infinity, INF: Infinity, '+INF': Infinity, '-INF': -Infinity };

/** Spark's JacksonParser converters: a JSON value read as a value of `type`. */
function converter(type: DataType): (node: JsonNode) => unknown {
  switch (type) {
    case 'int':
      return (n) => {
        if (n.k === 'null') return null;
        if (n.k !== 'number' || !n.integral) return mismatch();
        const v = Number(n.raw);
        return v < INT_MIN || v > INT_MAX ? mismatch() : v + 0;
      };
    case 'long':
      return (n) => {
        if (n.k === 'null') return null;
        if (n.k !== 'number' || !n.integral) return mismatch();
        return longFromBigInt(BigInt(n.raw)) ?? mismatch();
      };
    case 'double':
      return (n) => {
        if (n.k === 'null') return null;
        if (n.k === 'number') return Number(n.raw === 'NaN' ? NaN : n.raw);
        if (n.k === 'string' && SPECIAL_DOUBLES[n.v] !== undefined) return SPECIAL_DOUBLES[n.v];
        return mismatch();
      };
    case 'boolean':
      return (n) => (n.k === 'null' ? null : n.k === 'boolean' ? n.v : mismatch());
    case 'string':
      // Spark keeps a non-string value's JSON text for a string field.
      return (n) => (n.k === 'null' ? null : n.k === 'string' ? n.v : writeJson(n));
    case 'timestamp':
      return (n) => {
        if (n.k === 'null') return null;
        if (n.k === 'string') return parseTimestamp(n.v) ?? mismatch();
        if (n.k === 'number' && n.integral) return Number(n.raw) * 1_000_000;
        return mismatch();
      };
    case 'null':
      return () => null;
    case 'interval':
      return mismatch;
    case 'date':
      return (n) => (n.k === 'null' ? null : n.k === 'string' ? (parseDate(n.v) ?? mismatch()) : mismatch());
    case 'binary':
      throw unsupportedJsonType('from_json', type);
    default:
      if (type.kind === 'array') {
        const element = converter(type.element);
        return (n) => (n.k === 'null' ? null : n.k === 'array' ? n.items.map(element) : mismatch());
      }
      if (type.kind === 'decimal') {
        const { precision, scale } = type;
        return (n) => {
          if (n.k === 'null') return null;
          const value = n.k === 'number' ? parseDecimal(n.raw) : null;
          return (value && toPrecision(value, precision, scale)) ?? mismatch();
        };
      }
      if (type.kind === 'map') {
        if (type.key !== 'string') throw unsupportedJsonType('from_json', type);
        const value = converter(type.value);
        return (n) => (n.k === 'null' ? null : n.k === 'object' ? new Map(n.entries.map(([k, v]) => [k, value(v)])) : mismatch());
      }
      return structConverter(type.fields);
  }
}

function structConverter(fields: readonly { name: string; type: DataType }[]): (node: JsonNode) => unknown {
  const converters = new Map(fields.map((f) => [f.name, converter(f.type)]));
  return (n) => {
    if (n.k === 'null') return null;
    if (n.k !== 'object') return mismatch();
    const out: Record<string, unknown> = Object.fromEntries(fields.map((f) => [f.name, null]));
    for (const [key, value] of n.entries) {
      const convert = converters.get(key);
      if (!convert) continue;
      try {
        out[key] = convert(value);
      } catch (error) {
        if (!(error instanceof FieldMismatch)) throw error;
        out[key] = null;
      }
    }
    return out;
  };
}

/**
 * from_json in Spark's default PERMISSIVE mode: malformed text gives a struct of NULLs (NULL for
 * an array schema), a field of the wrong type is NULL and the others are kept.
 */
function fromJson(type: DataType): (text: string) => unknown {
  const convert = converter(type);
  const whenMalformed = typeof type === 'object' && type.kind === 'struct' ? (): unknown => Object.fromEntries(type.fields.map((f) => [f.name, null])) : (): unknown => null;
  return (text) => {
    let node: JsonNode;
    try {
      node = parseJson(text);
    } catch (error) {
      if (error instanceof JsonSyntaxError) return whenMalformed();
      throw error;
    }
    try {
      return convert(node);
    } catch (error) {
      if (error instanceof FieldMismatch) return whenMalformed();
      throw error;
    }
  };
}

/** ISO-8601 with milliseconds and a zone, Spark's default JSON timestampFormat (session time zone UTC). */
function jsonTimestamp(micros: number): string {
  return new Date(Math.floor(micros / 1000)).toISOString();
}

/** to_json's writer (Jackson, ignoreNullFields): NULL struct fields are left out. */
function jsonWriter(type: DataType): (v: unknown) => string {
  switch (type) {
    case 'string': return (v) => quoteJson(String(v));
    case 'double': return (v) => (Number.isFinite(v) ? javaDoubleString(v as number) : `"${javaDoubleString(v as number)}"`);
    case 'timestamp': return (v) => quoteJson(jsonTimestamp(v as number));
    case 'int': case 'long': case 'boolean': case 'interval': return (v) => String(v as LongValue | boolean);
    case 'null': return () => 'null';
    case 'date': return (v) => quoteJson(formatDate(v as number));
    case 'binary': throw unsupportedJsonType('to_json', type);
    default:
      if (type.kind === 'decimal') return (v) => (v as Decimal).toString();
      if (type.kind === 'map') {
        const value = jsonWriter(type.value);
        return (v) => `{${[...(v as Map<unknown, unknown>)].map(([k, x]) => `${quoteJson(String(k))}:${x === null || x === undefined ? 'null' : value(x)}`).join(',')}}`;
      }
      if (type.kind === 'array') {
        const element = jsonWriter(type.element);
        return (v) => `[${(v as unknown[]).map((x) => (x === null || x === undefined ? 'null' : element(x))).join(',')}]`;
      }
      {
        const fields = type.fields.map((f) => [f.name, quoteJson(f.name), jsonWriter(f.type)] as const);
        return (v) => {
          const parts: string[] = [];
          for (const [name, key, write] of fields) {
            const x = (v as Record<string, unknown>)[name];
            if (x !== null && x !== undefined) parts.push(`${key}:${write(x)}`);
          }
          return `{${parts.join(',')}}`;
        };
      }
  }
}

type PathStep = { readonly key: string } | { readonly index: number } | { readonly wildcard: true };

/** Spark's JsonPathParser: `$`, then `.name`, `['name']`, `[n]` or `[*]`; anything else: no path (NULL). */
export function parseJsonPath(path: string): PathStep[] | null {
  if (!path.startsWith('$')) return null;
  const steps: PathStep[] = [];
  let i = 1;
  while (i < path.length) {
    if (path[i] === '.') {
      const m = /^\.([^.[]+)/.exec(path.slice(i));
      if (!m) return null;
      steps.push(m[1] === '*' ? { wildcard: true } : { key: m[1]! });
      i += m[0].length;
    } else if (path[i] === '[') {
      const m = /^\[(?:'([^']*)'|(\d+)|(\*))\]/.exec(path.slice(i));
      if (!m) return null;
      steps.push(m[1] !== undefined ? { key: m[1] } : m[2] !== undefined ? { index: Number(m[2]) } : { wildcard: true });
      i += m[0].length;
    } else {
      return null;
    }
  }
  return steps;
}

function follow(nodes: JsonNode[], step: PathStep): JsonNode[] {
  const out: JsonNode[] = [];
  for (const n of nodes) {
    if ('key' in step) {
      if (n.k === 'object') { const hit = n.entries.find(([k]) => k === step.key); if (hit) out.push(hit[1]); }
    } else if ('index' in step) {
      if (n.k === 'array' && n.items[step.index] !== undefined) out.push(n.items[step.index]!);
    } else if (n.k === 'array') out.push(...n.items);
  }
  return out;
}

function getJsonObject(text: string, steps: PathStep[]): string | null {
  let nodes: JsonNode[];
  try {
    nodes = [parseJson(text)];
  } catch (error) {
    if (error instanceof JsonSyntaxError) return null;
    throw error;
  }
  for (const step of steps) nodes = follow(nodes, step);
  const wildcard = steps.some((s) => 'wildcard' in s);
  if (nodes.length === 0) return null;
  if (nodes.length > 1 || (wildcard && nodes.length === 1 && steps[steps.length - 1] && 'wildcard' in steps[steps.length - 1]!)) {
    return writeJson({ k: 'array', items: nodes });
  }
  const only = nodes[0]!;
  return only.k === 'null' ? null : only.k === 'string' ? only.v : writeJson(only);
}

function parsedOrNull(text: string): JsonNode | null {
  try {
    return parseJson(text);
  } catch (error) {
    if (error instanceof JsonSyntaxError) return null;
    throw error;
  }
}

/** JSON functions (signatures: lib/plan/function-catalog/json-signatures.ts). */
export const JSON_FUNCTIONS: readonly ScalarFunctionImplementation[] = [
  {
    name: 'from_json',
    compile: (args, call) => {
      const parse = fromJson(call.type);
      return nullIntolerant(asStrings(args.slice(0, 1), [call.args[0]!.type]), ([text]) => parse(String(text)));
    },
  },
  {
    name: 'to_json',
    compile: (args, call) => {
      const write = jsonWriter(call.args[0]!.type);
      return nullIntolerant(args, ([v]) => write(v));
    },
  },
  {
    name: 'get_json_object',
    compile: (args, call) => {
      const [json, path] = asStrings(args, call.args.map((a) => a.type)) as [Evaluator, Evaluator];
      const literal = call.args[1]!.kind === 'literal' ? call.args[1] as { value: unknown } : null;
      const fixed = literal && literal.value !== null ? parseJsonPath(String(literal.value)) : null;
      return nullIntolerant([json, path], ([text, p]) => {
        const steps = literal ? fixed : parseJsonPath(String(p));
        return steps === null ? null : getJsonObject(String(text), steps);
      });
    },
  },
  {
    name: 'json_array_length',
    compile: (args, call) => nullIntolerant(asStrings(args, [call.args[0]!.type]), ([text]) => {
      const n = parsedOrNull(String(text));
      return n?.k === 'array' ? n.items.length : null;
    }),
  },
  {
    name: 'json_object_keys',
    compile: (args, call) => nullIntolerant(asStrings(args, [call.args[0]!.type]), ([text]) => {
      const n = parsedOrNull(String(text));
      return n?.k === 'object' ? n.entries.map(([k]) => k) : null;
    }),
  },
];
