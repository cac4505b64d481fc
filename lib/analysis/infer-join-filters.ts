import type { Attribute } from '../plan/attribute.js';
import { children, type Expr } from '../plan/expressions.js';
import type { LogicalPlan } from '../plan/logical-plan.js';
import { resolveName } from './binder.js';
import { splitConjuncts } from './conjuncts.js';
import { isNondeterministicFunction } from '../plan/function-catalog/index.js';

/**
 * Spark's InferFiltersFromConstraints, for inner and left semi joins: a filter known to hold on one
 * side's join key also holds on the other side's key (`l.id = r.id` and `r.id % 2 = 0` imply
 * `l.id % 2 = 0`). Filtering early keeps rows that can never match out of the join's state.
 */
export function inferJoinFilters(plan: LogicalPlan): LogicalPlan {
  switch (plan.kind) {
    case 'StreamingRelation':
    case 'LocalRelation':
      return plan;
    case 'Join': {
      let left = inferJoinFilters(plan.left);
      let right = inferJoinFilters(plan.right);
      if ((plan.joinType === 'inner' || plan.joinType === 'left_semi') && plan.condition) {
        const pairs = equalities(plan.condition, left.output, right.output);
        const toLeft = transfer(constraintsOf(right), pairs.map(([l, r]) => [r, l]));
        const toRight = plan.joinType === 'inner' ? transfer(constraintsOf(left), pairs) : [];
        if (toLeft.length > 0) left = { kind: 'Filter', child: left, condition: conjunction(toLeft), output: left.output };
        if (toRight.length > 0) right = { kind: 'Filter', child: right, condition: conjunction(toRight), output: right.output };
      }
      return { ...plan, left, right };
    }
    case 'Union':
      return { ...plan, children: plan.children.map(inferJoinFilters) };
    case 'Except':
    case 'Intersect':
      return { ...plan, left: inferJoinFilters(plan.left), right: inferJoinFilters(plan.right) };
    default:
      return { ...plan, child: inferJoinFilters(plan.child) } as LogicalPlan;
  }
}

type Constraint = { readonly expr: Expr; readonly ids: ReadonlySet<number> };

/** Predicates known to hold on a plan's output, written with `#id` references. */
function constraintsOf(p: LogicalPlan): Constraint[] {
  switch (p.kind) {
    case 'Filter': {
      const own = toIdForm(p.condition, p.child.output);
      return [...constraintsOf(p.child), ...(own ? [own] : [])];
    }
    case 'EventTimeWatermark':
    case 'SubqueryAlias':
      return constraintsOf(p.child);
    case 'Project': {
      // Follow plain columns and aliases of plain columns through the projection.
      const renamed = new Map<number, number>();
      p.exprs.forEach((e, i) => {
        const inner = e.kind === 'alias' ? e.child : e;
        if (inner.kind !== 'column') return;
        try {
          const r = resolveName(inner.name, p.child.output);
          if (r.path.length === 0) renamed.set(r.attribute.id, p.output[i]!.id);
        } catch {
          /* not a plain column */
        }
      });
      return transfer(constraintsOf(p.child), [...renamed]);
    }
    default:
      return [];
  }
}

function toIdForm(e: Expr, input: readonly Attribute[]): Constraint | null {
  const ids = new Set<number>();
  let ok = true;
  const rewrite = (x: Expr): Expr => {
    if (x.kind === 'column') {
      try {
        const r = resolveName(x.name, input);
        if (r.path.length > 0) ok = false;
        ids.add(r.attribute.id);
        return { kind: 'column', name: `#${r.attribute.id}` };
      } catch {
        ok = false;
        return x;
      }
    }
    if (x.kind === 'aggregate' || (x.kind === 'call' && (x.fn === 'current_timestamp' /* differs between batches */ || isNondeterministicFunction(x.fn, x.udf)))) ok = false;
    if (x.kind === 'call') return { ...x, args: x.args.map(rewrite) };
    if (x.kind === 'cast' || x.kind === 'alias') return { ...x, child: rewrite(x.child) };
    if (children(x).length > 0) ok = false;
    return x;
  };
  const expr = rewrite(e);
  return ok && ids.size > 0 ? { expr, ids } : null;
}

/** Rewrites constraints whose every attribute has a counterpart; drops the rest. */
function transfer(constraints: readonly Constraint[], mapping: readonly (readonly [number, number])[]): Constraint[] {
  const map = new Map(mapping);
  return constraints.filter((c) => [...c.ids].every((id) => map.has(id))).map((c) => ({
    expr: replaceIds(c.expr, map),
    ids: new Set([...c.ids].map((id) => map.get(id)!)),
  }));
}

function replaceIds(e: Expr, map: ReadonlyMap<number, number>): Expr {
  if (e.kind === 'column' && e.name.startsWith('#')) return { kind: 'column', name: `#${map.get(Number(e.name.slice(1)))}` };
  if (e.kind === 'call') return { ...e, args: e.args.map((a) => replaceIds(a, map)) };
  if (e.kind === 'cast' || e.kind === 'alias') return { ...e, child: replaceIds(e.child, map) };
  return e;
}

/** `left = right` conjuncts of plain columns, as (left attribute id, right attribute id). */
function equalities(condition: Expr, left: readonly Attribute[], right: readonly Attribute[]): [number, number][] {
  const out: [number, number][] = [];
  const visit = (e: Expr): void => {
    if (e.kind !== 'call' || e.fn !== '=' || e.args[0]!.kind !== 'column' || e.args[1]!.kind !== 'column') return;
    const [a, b] = e.args as unknown as [{ name: string }, { name: string }];
    const find = (name: string, attrs: readonly Attribute[]): number | null => {
      try {
        const r = resolveName(name, attrs);
        return r.path.length === 0 ? r.attribute.id : null;
      } catch {
        return null;
      }
    };
    const al = find(a.name, left);
    const br = find(b.name, right);
    if (al !== null && br !== null) return void out.push([al, br]);
    const bl = find(b.name, left);
    const ar = find(a.name, right);
    if (bl !== null && ar !== null) out.push([bl, ar]);
  };
  splitConjuncts(condition).forEach(visit);
  return out;
}

function conjunction(cs: readonly Constraint[]): Expr {
  return cs.map((c) => c.expr).reduce((a, b) => ({ kind: 'call', fn: 'and', args: [a, b] }));
}
