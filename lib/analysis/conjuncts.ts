import type { Expr } from '../plan/expressions.js';
import type { BoundExpr } from './bound-expr.js';

/**
 * Spark's `splitConjunctivePredicates`: `a AND (b AND c)` as `[a, b, c]`, on a written condition
 * (`Expr`) or a bound one (`BoundExpr`). The one place a condition is split on AND: join key
 * extraction, filter inference, co-partitioning and the join state bounds all use it.
 */
export function splitConjuncts<E extends Expr | BoundExpr>(e: E): E[] {
  if (e.kind === 'call' && e.fn === 'and') return (e.args as readonly E[]).flatMap((a) => splitConjuncts(a));
  return [e];
}
