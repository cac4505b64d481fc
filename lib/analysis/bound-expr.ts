import type { Attribute } from '../plan/attribute.js';
import type { DataType } from '../plan/data-types.js';
import type { AggregateFunctionName } from '../plan/expressions.js';
import type { UserFunction } from '../plan/user-function.js';

/** An expression resolved against a child's output: names became ordinals, every node is typed. */
export type BoundExpr =
  | BoundRef
  | BoundLiteral
  | BoundCall
  | BoundCast
  | BoundCase
  | BoundTimeWindow
  | BoundSessionWindow
  | BoundAggregate;

export interface BoundRef {
  readonly kind: 'ref';
  readonly ordinal: number;
  readonly attribute: Attribute;
  /** Struct fields to read after the column, e.g. `['start']` for `window.start`. */
  readonly path: readonly string[];
  readonly type: DataType;
}

export interface BoundLiteral {
  readonly kind: 'literal';
  readonly value: unknown;
  readonly type: DataType;
}

export interface BoundCall {
  readonly kind: 'call';
  readonly fn: string;
  readonly args: readonly BoundExpr[];
  readonly type: DataType;
  /** The UDF this call runs: carried by the expression or registered under `fn`. */
  readonly udf?: UserFunction;
}

export interface BoundCast {
  readonly kind: 'cast';
  readonly child: BoundExpr;
  readonly type: DataType;
  /** try_cast: NULL where CAST raises. */
  readonly try?: boolean;
}

export interface BoundCase {
  readonly kind: 'case';
  readonly branches: readonly (readonly [BoundExpr, BoundExpr])[];
  readonly otherwise: BoundExpr | null;
  readonly type: DataType;
}

export interface BoundTimeWindow {
  readonly kind: 'timeWindow';
  readonly time: BoundExpr;
  readonly windowMicros: number;
  readonly slideMicros: number;
  readonly startMicros: number;
  readonly type: DataType;
}

export interface BoundSessionWindow {
  readonly kind: 'sessionWindow';
  readonly time: BoundExpr;
  readonly gap: BoundExpr;
  readonly type: DataType;
}

export interface BoundAggregate {
  readonly kind: 'aggregate';
  readonly fn: AggregateFunctionName;
  readonly args: readonly BoundExpr[];
  readonly distinct: boolean;
  readonly ignoreNulls: boolean;
  readonly type: DataType;
}

export function boundChildren(e: BoundExpr): readonly BoundExpr[] {
  switch (e.kind) {
    case 'ref':
    case 'literal':
      return [];
    case 'call':
    case 'aggregate':
      return e.args;
    case 'cast':
      return [e.child];
    case 'case':
      return [...e.branches.flatMap(([c, v]) => [c, v]), ...(e.otherwise ? [e.otherwise] : [])];
    case 'timeWindow':
      return [e.time];
    case 'sessionWindow':
      return [e.time, e.gap];
    default: {
      const never: never = e;
      throw new Error(`Unknown bound expression ${JSON.stringify(never)}`);
    }
  }
}

export function boundExists(e: BoundExpr, predicate: (e: BoundExpr) => boolean): boolean {
  return predicate(e) || boundChildren(e).some((c) => boundExists(c, predicate));
}

/**
 * Generators turn one input row into zero or more: `explode`, and `window()` (several windows
 * when sliding, none when the time is NULL, as Spark's TimeWindowing filters NULL times).
 */
export function isGenerator(e: BoundExpr): boolean {
  return (e.kind === 'call' && e.fn === 'explode') || e.kind === 'timeWindow';
}

/** The attributes an expression reads. */
export function referencedAttributes(e: BoundExpr): Attribute[] {
  const found: Attribute[] = [];
  const visit = (x: BoundExpr): void => {
    if (x.kind === 'ref') found.push(x.attribute);
    boundChildren(x).forEach(visit);
  };
  visit(e);
  return found;
}
