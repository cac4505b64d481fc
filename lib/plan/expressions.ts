import type { DataType } from './data-types.js';
import type { UserFunction } from './user-function.js';

/**
 * The expression tree of a query. Nodes are plain frozen data with a `kind` discriminant; every
 * pass over them is an exhaustive switch. User code builds them through `Column` (column.ts).
 */
export type Expr =
  | ColumnRef
  | Literal
  | Star
  | Alias
  | Call
  | Cast
  | CaseWhen
  | TimeWindow
  | SessionWindow
  | AggregateCall;

export interface ColumnRef {
  readonly kind: 'column';
  /** Dotted path: an attribute name, optionally prefixed by a qualifier, then struct fields. */
  readonly name: string;
}

export interface Literal {
  readonly kind: 'literal';
  readonly value: unknown;
  readonly type: DataType;
}

export interface Star {
  readonly kind: 'star';
  readonly qualifier?: string;
}

export interface Alias {
  readonly kind: 'alias';
  readonly child: Expr;
  readonly name: string;
}

/** A scalar function or operator: `+`, `=`, `and`, `split`, `timestamp_seconds`, ... */
export interface Call {
  readonly kind: 'call';
  readonly fn: string;
  readonly args: readonly Expr[];
  /** A UDF called through the DataFrame API (`fn` is then its name). */
  readonly udf?: UserFunction;
}

export interface Cast {
  readonly kind: 'cast';
  readonly child: Expr;
  readonly to: DataType;
  /** try_cast: NULL where CAST raises CAST_INVALID_INPUT or CAST_OVERFLOW. */
  readonly try?: boolean;
}

export interface CaseWhen {
  readonly kind: 'case';
  readonly branches: readonly (readonly [Expr, Expr])[];
  readonly otherwise: Expr | null;
}

/** `window(timeColumn, duration, slide, startTime)`; all lengths in microseconds. */
export interface TimeWindow {
  readonly kind: 'timeWindow';
  readonly timeColumn: Expr;
  readonly windowMicros: number;
  readonly slideMicros: number;
  readonly startMicros: number;
}

/** `session_window(timeColumn, gap)`; the gap is a duration or an expression giving one per row. */
export interface SessionWindow {
  readonly kind: 'sessionWindow';
  readonly timeColumn: Expr;
  readonly gap: Expr;
}

export type AggregateFunctionName =
  | 'count'
  | 'sum'
  | 'avg'
  | 'min'
  | 'max'
  | 'first'
  | 'last'
  | 'collect_list'
  | 'collect_set'
  | 'approx_count_distinct';

export interface AggregateCall {
  readonly kind: 'aggregate';
  readonly fn: AggregateFunctionName;
  /** Empty for `count(*)`. */
  readonly args: readonly Expr[];
  readonly distinct: boolean;
  /** Only for `first`/`last`: skip NULL inputs. */
  readonly ignoreNulls: boolean;
}

export const AGGREGATE_FUNCTIONS: readonly AggregateFunctionName[] = [
  'count', 'sum', 'avg', 'min', 'max', 'first', 'last', 'collect_list', 'collect_set', 'approx_count_distinct',
];

export function assertNever(value: never, what = 'value'): never {
  throw new Error(`Unexpected ${what}: ${JSON.stringify(value)}`);
}

export function children(e: Expr): readonly Expr[] {
  switch (e.kind) {
    case 'column':
    case 'literal':
    case 'star':
      return [];
    case 'alias':
      return [e.child];
    case 'call':
      return e.args;
    case 'cast':
      return [e.child];
    case 'case':
      return [...e.branches.flatMap(([c, v]) => [c, v]), ...(e.otherwise ? [e.otherwise] : [])];
    case 'timeWindow':
      return [e.timeColumn];
    case 'sessionWindow':
      return [e.timeColumn, e.gap];
    case 'aggregate':
      return e.args;
    default:
      return assertNever(e, 'expression');
  }
}

export function exists(e: Expr, predicate: (e: Expr) => boolean): boolean {
  return predicate(e) || children(e).some((c) => exists(c, predicate));
}

export const containsAggregate = (e: Expr): boolean => exists(e, (x) => x.kind === 'aggregate');

/** Strips aliases to look at what an expression computes. */
export function unalias(e: Expr): Expr {
  return e.kind === 'alias' ? unalias(e.child) : e;
}

/** The column name Spark gives an unaliased expression (`count(1)`, `sum(amount)`, `window`). */
export function defaultName(e: Expr): string {
  switch (e.kind) {
    case 'column': {
      const parts = e.name.split('.');
      return parts[parts.length - 1]!;
    }
    case 'literal':
      return e.value === null ? 'NULL' : String(e.value);
    case 'star':
      return '*';
    case 'alias':
      return e.name;
    case 'call': {
      const operator = operatorName(e);
      if (operator !== null) return operator;
      const infix = ['+', '-', '*', '/', '%', '=', '<', '<=', '>', '>=', '<=>', 'and', 'or'];
      if (infix.includes(e.fn) && e.args.length === 2) {
        return `(${describe(e.args[0]!)} ${e.fn.toUpperCase() === e.fn ? e.fn : e.fn.toUpperCase()} ${describe(e.args[1]!)})`;
      }
      return `${e.fn}(${e.args.map(describe).join(', ')})`;
    }
    case 'cast':
      return describe(e.child);
    case 'case':
      return 'CASE WHEN';
    case 'timeWindow':
      return 'window';
    case 'sessionWindow':
      return 'session_window';
    case 'aggregate': {
      const inner = e.args.length === 0 ? '1' : e.args.map(describe).join(', ');
      return `${e.fn}(${e.distinct ? 'DISTINCT ' : ''}${inner})`;
    }
    default:
      return assertNever(e, 'expression');
  }
}

const bare = (e: Expr): string => (e.kind === 'literal' && typeof e.value === 'string' ? e.value : describe(e));

/** Spark's names for the predicates and unary operators SQL text and Column methods produce. */
function operatorName(e: Call): string | null {
  const [a, b] = e.args.map(describe);
  switch (e.args.length === 1 ? `${e.fn}/1` : e.fn) {
    case 'not/1': return `(NOT ${a})`;
    case 'isnull/1': return `(${a} IS NULL)`;
    case 'isnotnull/1': return `(${a} IS NOT NULL)`;
    case '-/1': return `(- ${a})`;
    case '!=': return `(NOT (${a} = ${b}))`;
    case 'in': return `(${a} IN (${e.args.slice(1).map(describe).join(', ')}))`;
    // Spark prints a pattern literal bare in these names: `user LIKE a%`, `RLIKE(user, ^a)`.
    case 'like': return e.args.length === 2 ? `${a} LIKE ${bare(e.args[1]!)}` : null;
    case 'rlike': return `RLIKE(${a}, ${bare(e.args[1]!)})`;
    default: return null;
  }
}

/** A readable rendering, used in plan explanations and error messages. */
export function describe(e: Expr): string {
  switch (e.kind) {
    case 'column':
      return e.name;
    case 'literal':
      return typeof e.value === 'string' ? `'${e.value}'` : String(e.value);
    case 'star':
      return e.qualifier ? `${e.qualifier}.*` : '*';
    case 'alias':
      return `${describe(e.child)} AS ${e.name}`;
    case 'cast':
      return `${e.try ? 'TRY_CAST' : 'CAST'}(${describe(e.child)} AS ${typeof e.to === 'string' ? e.to.toUpperCase() : 'COMPLEX'})`;
    case 'case':
      return `CASE ${e.branches.map(([c, v]) => `WHEN ${describe(c)} THEN ${describe(v)}`).join(' ')}${e.otherwise ? ` ELSE ${describe(e.otherwise)}` : ''} END`;
    case 'timeWindow':
      return `window(${describe(e.timeColumn)}, ${e.windowMicros}us, ${e.slideMicros}us, ${e.startMicros}us)`;
    case 'sessionWindow':
      return `session_window(${describe(e.timeColumn)}, ${describe(e.gap)})`;
    case 'call':
    case 'aggregate':
      return defaultName(e);
    default:
      return assertNever(e, 'expression');
  }
}
