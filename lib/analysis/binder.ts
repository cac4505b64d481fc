import type { Attribute } from '../plan/attribute.js';
import {
  arrayOf, decimalOf, isArray, isDecimal, isNumeric, isStruct, typeToString, WINDOW_STRUCT, type DataType, type DecimalType,
} from '../plan/data-types.js';
import { asDecimalType, decimalResultType } from '../plan/decimal-rules.js';
import { assertNever, type Expr } from '../plan/expressions.js';
import { AnalysisError } from '../errors/sluice-error.js';
import { castInvalidInput } from '../core/ansi-errors.js';
import { parseDate } from '../core/dates.js';
import { castStringToTimestamp } from '../core/timestamp-cast.js';
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
  if (isDecimal(a) || isDecimal(b)) return widerDecimal(a, b);
  const ra = NUMERIC_RANK[a as string] ?? -1;
  const rb = NUMERIC_RANK[b as string] ?? -1;
  if (ra < 0 || rb < 0) return 'double';
  const r = Math.max(ra, rb);
  return r === 0 ? 'int' : (['null', 'int', 'long', 'double'][r] as DataType);
}

/** Spark's wider decimal: enough integral digits and scale for both (a double operand wins). */
function widerDecimal(a: DataType, b: DataType): DataType {
  if (a === 'double' || b === 'double') return 'double';
  const x = a === 'null' ? b : asDecimalType(a);
  const y = b === 'null' ? a : asDecimalType(b);
  if (x === null || y === null || !isDecimal(x) || !isDecimal(y)) return 'double';
  const scale = Math.max(x.scale, y.scale);
  const integral = Math.max(x.precision - x.scale, y.precision - y.scale);
  return decimalOf(Math.min(38, integral + scale), scale);
}

function typeMismatch(fn: string, args: readonly BoundExpr[], expected: string): AnalysisError {
  return new AnalysisError(
    `[DATATYPE_MISMATCH] Cannot resolve "${fn}(${args.map((a) => typeToString(a.type)).join(', ')})": ${expected}.`,
    { code: 'DATATYPE_MISMATCH', errorClass: 'DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE' },
  );
}

function callType(fn: string, args: readonly BoundExpr[]): DataType {
  const [a, b] = args;
  const special = decimalOrDateArithmeticType(fn, args);
  if (special !== null) return special;
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

const ARITHMETIC = new Set(['+', '-', '*', '/', '%', 'try_divide', 'try_mod']);

/**
 * Binary arithmetic with a decimal operand (Spark's DecimalPrecision: decimal with an integral
 * type stays decimal, with a double becomes double) and date ± days (Spark's DateAdd/DateSub);
 * null for every other call.
 */
function decimalOrDateArithmeticType(fn: string, args: readonly BoundExpr[]): DataType | null {
  if (!ARITHMETIC.has(fn) || args.length !== 2) return null;
  const [a, b] = args as [BoundExpr, BoundExpr];
  if ((fn === '+' || fn === '-') && a.type === 'date' && (b.type === 'int' || b.type === 'long')) return 'date';
  if (fn === '+' && b.type === 'date' && (a.type === 'int' || a.type === 'long')) return 'date';
  if (!isDecimal(a.type) && !isDecimal(b.type)) return null;
  if (a.type === 'double' || b.type === 'double') return 'double';
  const literal = (x: BoundExpr): unknown => (x.kind === 'literal' ? x.value : undefined);
  const left = a.type === 'null' ? (b.type as DecimalType) : asDecimalType(a.type, literal(a));
  const right = b.type === 'null' ? (a.type as DecimalType) : asDecimalType(b.type, literal(b));
  if (left === null || right === null) throw typeMismatch(fn, args, 'the operands must be numeric');
  return decimalResultType(fn, left, right);
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
      // Spark: the sum of decimal(p, s) is decimal(p + 10, s), its average decimal(p + 4, s + 4) (at most 38 each).
      if (isDecimal(argType)) return decimalOf(Math.min(38, argType.precision + 10), argType.scale);
      return argType === 'double' ? 'double' : 'long';
    case 'avg':
      if (isDecimal(argType)) return decimalOf(Math.min(38, argType.precision + 4), Math.min(38, argType.scale + 4));
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
      const args = coerceDateComparison(e.fn, e.args.map((x) => bind(x, input)));
      const udf = e.udf ?? registeredUserFunction(e.fn);
      if (udf) return { kind: 'call', fn: e.fn, args, type: udf.returnType, udf };
      return { kind: 'call', fn: e.fn, args, type: callType(e.fn, args) };
    }
    case 'cast': {
      const child = bind(e.child, input);
      refuseDateCast(child, e.to);
      if (!e.try) refuseMalformedDatetimeLiteral(child, e.to);
      return { kind: 'cast', child, type: e.to, ...(e.try ? { try: true } : {}) };
    }
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

const COMPARISONS = new Set(['=', '!=', '<', '<=', '>', '>=', '<=>', 'between', 'in']);

/**
 * `date_col > '2024-01-01'`, `ts_col IN ('2024-05-01')`: Spark casts the string side to the date or
 * timestamp it is compared with (under ANSI a malformed string then raises CAST_INVALID_INPUT).
 */
function coerceDateComparison(fn: string, args: BoundExpr[]): BoundExpr[] {
  if (!COMPARISONS.has(fn)) return args;
  const target = fn === 'in' && args.some((a) => a.type === 'timestamp') ? 'timestamp' : args.find((a) => a.type === 'date' || a.type === 'timestamp')?.type;
  if (target === undefined) return args;
  return args.map((a) => {
    if (a.type !== 'string') return a;
    refuseMalformedDatetimeLiteral(a, target);
    return { kind: 'cast', child: a, type: target };
  });
}

/**
 * A string literal that is no timestamp or date, cast to one (`ts_col > 'yesterday'`): every row
 * would raise CAST_INVALID_INPUT (Spark raises it when it folds the constant), so the query is
 * refused before it runs instead of dead-lettering every record.
 */
function refuseMalformedDatetimeLiteral(child: BoundExpr, to: DataType): void {
  if (child.kind !== 'literal' || typeof child.value !== 'string' || (to !== 'timestamp' && to !== 'date')) return;
  const malformed = to === 'date' ? parseDate(child.value) === null : castStringToTimestamp(child.value).kind === 'malformed';
  if (!malformed) return;
  const error = castInvalidInput(child.value, 'string', to);
  throw new AnalysisError(error.message, { code: 'CAST_INVALID_INPUT', errorClass: 'CAST_INVALID_INPUT', hint: 'fix the literal, or use try_cast.' });
}

/** Spark refuses a cast between date and a number or boolean before the query runs (no ANSI cast exists). */
function refuseDateCast(child: BoundExpr, to: DataType): void {
  const numberLike = (t: DataType): boolean => isNumeric(t) || t === 'boolean';
  if (!((child.type === 'date' && numberLike(to)) || (to === 'date' && numberLike(child.type)))) return;
  const from = typeToString(child.type).toUpperCase();
  const target = typeToString(to).toUpperCase();
  throw new AnalysisError(
    `[DATATYPE_MISMATCH.CAST_WITH_FUNC_SUGGESTION] Cannot resolve "CAST(${describeRef(child)} AS ${target})" due to data type mismatch: cannot cast "${from}" to "${target}".`,
    { code: 'DATATYPE_MISMATCH', errorClass: 'DATATYPE_MISMATCH.CAST_WITH_FUNC_SUGGESTION', hint: from === 'DATE' ? 'use unix_date(col) for the day number.' : 'use date_from_unix_date(col) for a day number.' },
  );
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
