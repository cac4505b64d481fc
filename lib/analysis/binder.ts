import type { Attribute } from '../plan/attribute.js';
import {
  arrayOf, isArray, isNumeric, isStruct, typeToString, WINDOW_STRUCT, type DataType,
} from '../plan/data-types.js';
import { assertNever, type Expr } from '../plan/expressions.js';
import { AnalysisError } from '../errors/sluice-error.js';
import type { BoundExpr } from './bound-expr.js';
import { builtinSignature, registeredUserFunction, wrongNumberOfArguments } from '../plan/function-catalog/index.js';

/** Finds the attribute a (possibly qualified, possibly dotted) name refers to. */
export function resolveName(name: string, input: readonly Attribute[]): { attribute: Attribute; ordinal: number; path: string[] } {
  if (name.startsWith('#')) {
    // Internal positional reference by attribute id (USING joins, withColumn after a join).
    const id = Number(name.slice(1));
    const ordinal = input.findIndex((a) => a.id === id);
    if (ordinal >= 0) return { attribute: input[ordinal]!, ordinal, path: [] };
  }
  const parts = name.split('.');
  const candidates: { ordinal: number; path: string[] }[] = [];
  const match = (a: Attribute, n: string): boolean => a.name.toLowerCase() === n.toLowerCase();
  // Qualified first (`L.key`), then plain (`window.start` = column window, field start).
  if (parts.length > 1) {
    input.forEach((a, i) => {
      if (a.qualifier !== null && a.qualifier.toLowerCase() === parts[0]!.toLowerCase() && match(a, parts[1]!)) {
        candidates.push({ ordinal: i, path: parts.slice(2) });
      }
    });
  }
  if (candidates.length === 0) {
    input.forEach((a, i) => {
      if (match(a, parts[0]!)) candidates.push({ ordinal: i, path: parts.slice(1) });
    });
  }
  if (candidates.length === 0) {
    const suggestions = input.map((a) => `\`${a.name}\``).join(', ');
    throw new AnalysisError(
      `[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column or function parameter with name \`${name}\` cannot be resolved. Did you mean one of the following? [${suggestions}].`,
      { code: 'UNRESOLVED_COLUMN', errorClass: 'UNRESOLVED_COLUMN.WITH_SUGGESTION', hint: `use one of the columns ${suggestions}.` },
    );
  }
  const distinct = [...new Set(candidates.map((c) => input[c.ordinal]!.id))];
  if (distinct.length > 1) {
    throw new AnalysisError(
      `[AMBIGUOUS_REFERENCE] Reference \`${name}\` is ambiguous, could be: [${candidates.map((c) => `\`${input[c.ordinal]!.qualifier ?? '?'}\`.\`${input[c.ordinal]!.name}\``).join(', ')}].`,
      { code: 'AMBIGUOUS_REFERENCE', errorClass: 'AMBIGUOUS_REFERENCE', hint: 'give each side of the join an alias (df.as("L")) and qualify the column ("L.key").' },
    );
  }
  const chosen = candidates[0]!;
  return { attribute: input[chosen.ordinal]!, ordinal: chosen.ordinal, path: chosen.path };
}

function fieldType(type: DataType, path: readonly string[], name: string): DataType {
  let t = type;
  for (const field of path) {
    if (!isStruct(t)) {
      throw new AnalysisError(`Cannot read field \`${field}\` of \`${name}\`: it is ${typeToString(t)}, not a struct.`, { code: 'FIELD_NOT_FOUND' });
    }
    const f = t.fields.find((x) => x.name.toLowerCase() === field.toLowerCase());
    if (!f) {
      throw new AnalysisError(`[FIELD_NOT_FOUND] No such struct field \`${field}\` in ${t.fields.map((x) => `\`${x.name}\``).join(', ')}.`, { code: 'FIELD_NOT_FOUND', errorClass: 'FIELD_NOT_FOUND' });
    }
    t = f.type;
  }
  return t;
}

const NUMERIC_RANK: Record<string, number> = { null: 0, int: 1, long: 2, double: 3 };

export function widerNumeric(a: DataType, b: DataType): DataType {
  const ra = NUMERIC_RANK[a as string] ?? -1;
  const rb = NUMERIC_RANK[b as string] ?? -1;
  if (ra < 0 || rb < 0) return 'double';
  const r = Math.max(ra, rb);
  return r === 0 ? 'int' : (['null', 'int', 'long', 'double'][r] as DataType);
}

function typeMismatch(fn: string, args: readonly BoundExpr[], expected: string): AnalysisError {
  return new AnalysisError(
    `[DATATYPE_MISMATCH] Cannot resolve "${fn}(${args.map((a) => typeToString(a.type)).join(', ')})": ${expected}.`,
    { code: 'DATATYPE_MISMATCH', errorClass: 'DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE' },
  );
}

function callType(fn: string, args: readonly BoundExpr[]): DataType {
  const [a, b] = args;
  switch (fn) {
    case '+':
    case '-':
      if (fn === '-' && args.length === 1) {
        // Spark's UnaryMinus: a number or an interval, negated.
        if (a!.type === 'interval' || isNumericOrNull(a!.type)) return a!.type;
        throw typeMismatch(fn, args, 'the operand must be numeric or an interval');
      }
      if (a!.type === 'timestamp' && b!.type === 'interval') return 'timestamp';
      if (a!.type === 'interval' && b!.type === 'timestamp' && fn === '+') return 'timestamp';
      if (a!.type === 'timestamp' && b!.type === 'timestamp' && fn === '-') return 'interval';
      if (a!.type === 'interval' && b!.type === 'interval') return 'interval';
      if (!isNumericOrNull(a!.type) || !isNumericOrNull(b!.type)) throw typeMismatch(fn, args, 'the operands must be numeric, or a timestamp and an interval');
      return widerNumeric(a!.type, b!.type);
    case '*':
    case '%':
      if (!isNumericOrNull(a!.type) || !isNumericOrNull(b!.type)) throw typeMismatch(fn, args, 'the operands must be numeric');
      return widerNumeric(a!.type, b!.type);
    case 'try_mod':
      if (!isNumericOrNull(a!.type) || !isNumericOrNull(b!.type)) throw typeMismatch(fn, args, 'the operands must be numeric');
      return widerNumeric(a!.type, b!.type);
    case '/':
    case 'try_divide':
      if (!isNumericOrNull(a!.type) || !isNumericOrNull(b!.type)) throw typeMismatch(fn, args, 'the operands must be numeric');
      return 'double';
    case '=': case '!=': case '<': case '<=': case '>': case '>=': case '<=>':
    case 'and': case 'or': case 'not': case 'between': case 'isnull': case 'isnotnull':
    case '__sample': // DataFrame.sample()'s row filter, refused before it runs (unsupported-operation-checker.ts)
      return 'boolean';
    case 'timestamp_seconds':
    case 'current_timestamp':
    case 'window_time':
      return 'timestamp';
    case 'unix_micros':
    case 'monotonically_increasing_id':
      return 'long';
    case 'split':
      return arrayOf('string');
    case 'explode':
      if (!isArray(a!.type)) throw typeMismatch(fn, args, 'explode needs an array');
      return a!.type.element;
    case 'size':
    case 'length':
      return 'int';
    case 'array':
      return arrayOf(args.length === 0 ? 'null' : args.map((x) => x.type).reduce((x, y) => (x === 'null' ? y : x)));
    case 'upper': case 'lower': case 'trim': case 'concat': case 'substring':
      return 'string';
    case 'coalesce':
      return args.map((x) => x.type).find((t) => t !== 'null') ?? 'null';
    case 'get_field':
      return fieldType(a!.type, [String((b as { value: unknown }).value)], 'struct');
    case 'row_number': case 'rank': case 'dense_rank':
      return 'int';
    default:
      return catalogCallType(fn, args);
  }
}

/** A function of the catalog (lib/plan/function-catalog): arity checked, then its own type rule. */
function catalogCallType(fn: string, args: readonly BoundExpr[]): DataType {
  const signature = builtinSignature(fn);
  if (!signature) {
    throw new AnalysisError(`[UNRESOLVED_ROUTINE] Cannot resolve function \`${fn}\`.`, {
      code: 'UNRESOLVED_ROUTINE', errorClass: 'UNRESOLVED_ROUTINE', hint: `check the name; a function of your own is registered with session.udf.register('${fn}', fn, returnType).`,
    });
  }
  if (args.length < signature.minArgs || args.length > signature.maxArgs) {
    throw wrongNumberOfArguments(fn, signature.minArgs, signature.maxArgs, args.length);
  }
  return signature.resultType(args.map((a) => (a.kind === 'literal' ? { type: a.type, literal: { value: a.value } } : { type: a.type })));
}

function isNumericOrNull(t: DataType): boolean {
  return isNumeric(t) || t === 'null';
}

function aggregateType(fn: string, args: readonly BoundExpr[]): DataType {
  const argType = args[0]?.type ?? 'long';
  switch (fn) {
    case 'count':
    case 'approx_count_distinct':
      return 'long';
    case 'sum':
      return argType === 'double' ? 'double' : 'long';
    case 'avg':
      return 'double';
    case 'min': case 'max': case 'first': case 'last':
      return argType;
    case 'collect_list': case 'collect_set':
      return arrayOf(argType);
    default:
      throw new AnalysisError(`Unknown aggregate function ${fn}`, { code: 'UNRESOLVED_ROUTINE' });
  }
}

/** Resolves names to ordinals and types every node. Throws AnalysisError naming the column. */
export function bind(e: Expr, input: readonly Attribute[]): BoundExpr {
  switch (e.kind) {
    case 'column': {
      const { attribute, ordinal, path } = resolveName(e.name, input);
      return { kind: 'ref', ordinal, attribute, path, type: fieldType(attribute.type, path, e.name) };
    }
    case 'literal':
      return { kind: 'literal', value: e.value, type: e.type };
    case 'star':
      throw new AnalysisError('`*` is only allowed in select() or count(*).', { code: 'INVALID_STAR' });
    case 'alias':
      return bind(e.child, input);
    case 'call': {
      const args = e.args.map((x) => bind(x, input));
      const udf = e.udf ?? registeredUserFunction(e.fn);
      if (udf) return { kind: 'call', fn: e.fn, args, type: udf.returnType, udf };
      return { kind: 'call', fn: e.fn, args, type: callType(e.fn, args) };
    }
    case 'cast':
      return { kind: 'cast', child: bind(e.child, input), type: e.to, ...(e.try ? { try: true } : {}) };
    case 'case': {
      const branches = e.branches.map(([c, v]) => [bind(c, input), bind(v, input)] as const);
      const otherwise = e.otherwise ? bind(e.otherwise, input) : null;
      const types: DataType[] = [...branches.map(([, v]) => v.type), ...(otherwise ? [otherwise.type] : [])].filter((t) => t !== 'null');
      const type: DataType = types.length === 0 ? 'null' : types.every(isNumeric) ? types.reduce((x, y) => widerNumeric(x, y)) : types[0]!;
      return { kind: 'case', branches, otherwise, type };
    }
    case 'timeWindow': {
      const time = bind(e.timeColumn, input);
      if (time.type !== 'timestamp' && !isStruct(time.type)) {
        throw new AnalysisError(
          `[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] window() needs a timestamp column, but \`${describeRef(time)}\` is ${typeToString(time.type)}.`,
          { code: 'DATATYPE_MISMATCH', hint: 'convert it first, e.g. timestamp_seconds(col) or col.cast("timestamp").' },
        );
      }
      return { kind: 'timeWindow', time, windowMicros: e.windowMicros, slideMicros: e.slideMicros, startMicros: e.startMicros, type: WINDOW_STRUCT };
    }
    case 'sessionWindow': {
      const time = bind(e.timeColumn, input);
      return { kind: 'sessionWindow', time, gap: bind(e.gap, input), type: WINDOW_STRUCT };
    }
    case 'aggregate': {
      const args = e.args.map((x) => bind(x, input));
      return { kind: 'aggregate', fn: e.fn, args, distinct: e.distinct, ignoreNulls: e.ignoreNulls, type: aggregateType(e.fn, args) };
    }
    default:
      return assertNever(e, 'expression');
  }
}

function describeRef(e: BoundExpr): string {
  return e.kind === 'ref' ? [e.attribute.name, ...e.path].join('.') : e.kind;
}

/**
 * The watermark delay an output column inherits: a watermarked column passes it on through
 * references, aliases and `window()`/`session_window()` over it (Spark's delay metadata).
 */
export function inheritedEventTimeDelay(e: BoundExpr): number | null {
  if (e.kind === 'ref' && e.path.length === 0) return e.attribute.eventTimeDelayMs;
  if (e.kind === 'timeWindow' || e.kind === 'sessionWindow') return inheritedEventTimeDelay(e.time);
  if (e.kind === 'call' && e.fn === 'window_time') return inheritedEventTimeDelay(e.args[0]!);
  return null;
}

/** Whether `name` is a built-in function or operator (a UDF may not take its name: the built-in would win). */
export function isBuiltinFunctionName(name: string): boolean {
  try {
    callType(name.toLowerCase(), []);
    return true;
  } catch (error) {
    return !(error instanceof AnalysisError && error.code === 'UNRESOLVED_ROUTINE');
  }
}
