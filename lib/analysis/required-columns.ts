import type { Attribute } from '../plan/attribute.js';
import { exists, type Expr } from '../plan/expressions.js';
import { planChildren, type LogicalPlan } from '../plan/logical-plan.js';
import { boundChildren, type BoundExpr } from './bound-expr.js';
import { bind } from './binder.js';

/**
 * Spark's column pruning pushed into the scan: per streaming source, the columns the query reads
 * (in expressions, as keys, or passed through to the sink). A source that decodes records can then
 * decode only those. Errs on the side of keeping a column: a node whose use it cannot see keeps
 * all of its input.
 */
export function requiredSourceColumns(plan: LogicalPlan): Map<string, Set<string>> {
  const used = new Set<number>();
  const useAll = (attrs: readonly Attribute[]): void => attrs.forEach((a) => used.add(a.id));
  const useExpr = (e: Expr, input: readonly Attribute[]): void => {
    try {
      collectRefs(bind(e, input), used);
    } catch {
      useAll(input);
    }
  };
  /** An output column that is a renamed/re-typed copy of the child's column at the same position. */
  const usePositional = (output: readonly Attribute[], input: readonly Attribute[]): void => {
    if (output.length !== input.length) return useAll(input);
    output.forEach((a, i) => { if (used.has(a.id)) used.add(input[i]!.id); });
  };
  const required = new Map<string, Set<string>>();

  useAll(plan.output);
  const visit = (p: LogicalPlan): void => {
    switch (p.kind) {
      case 'StreamingRelation': {
        let names = required.get(p.sourceId);
        if (!names) required.set(p.sourceId, (names = new Set()));
        for (const a of p.output) if (used.has(a.id)) names.add(a.name);
        return;
      }
      case 'LocalRelation':
        return;
      case 'Project':
        // A column the parent does not read costs nothing, unless it changes the row count
        // (explode; a window drops rows with a NULL time, and a sliding one repeats rows).
        p.exprs.forEach((e, i) => {
          if (used.has(p.output[i]!.id) || exists(e, changesRowCount)) useExpr(e, p.child.output);
        });
        break;
      case 'Filter':
      case 'FailOnce':
        useExpr(p.condition, p.child.output);
        break;
      case 'EventTimeWatermark':
        used.add(p.eventTime.id);
        usePositional(p.output, p.child.output);
        break;
      case 'Aggregate':
        [...p.groupingExprs, ...p.aggregateExprs].forEach((e) => useExpr(e, p.child.output));
        break;
      case 'StatefulProcessing':
        // The user's code sees every column.
        useAll(p.child.output);
        break;
      case 'Deduplicate':
        useAll(p.keys);
        usePositional(p.output, p.child.output);
        break;
      case 'Sort':
        p.orders.forEach((o) => useExpr(o.expr, p.child.output));
        break;
      case 'WindowFunction':
        [...p.partitionBy, ...p.orderBy.map((o) => o.expr)].forEach((e) => useExpr(e, p.child.output));
        break;
      case 'Join':
        if (p.condition) useExpr(p.condition, [...p.left.output, ...p.right.output]);
        break;
      case 'SubqueryAlias':
        usePositional(p.output, p.child.output);
        break;
      case 'Union':
      case 'Except':
      case 'Intersect':
        // Set operations compare whole rows.
        planChildren(p).forEach((c) => useAll(c.output));
        break;
    }
    planChildren(p).forEach(visit);
  };
  visit(plan);
  return required;
}

const changesRowCount = (e: Expr): boolean =>
  (e.kind === 'call' && e.fn === 'explode') || e.kind === 'timeWindow' || e.kind === 'sessionWindow';

function collectRefs(e: BoundExpr, into: Set<number>): void {
  if (e.kind === 'ref') into.add(e.attribute.id);
  for (const c of boundChildren(e)) collectRefs(c, into);
}
