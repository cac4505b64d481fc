/**
 * Co-partitioning: whether every stateful operator's rows for one key arrive on one Kinesis shard.
 * Kinesis routes a record by its partition key, so a group lives on one shard only when the
 * grouping (dedup, join) keys include the column the producer uses as partition key, passed
 * through unchanged. `upper(user_id)` would not do: 'a' and 'A' share a group but not a shard.
 */
import type { Attribute } from '../plan/attribute.js';
import type { Expr } from '../plan/expressions.js';
import { planChildren, type LogicalPlan } from '../plan/logical-plan.js';
import { resolveName } from './binder.js';
import { splitConjuncts } from './conjuncts.js';
import { isStatefulOperator } from './stateful-operators.js';

export interface StatefulKeyReport {
  /** `Aggregate`, `Deduplicate`, `Join`. */
  readonly operator: string;
  /** The operator's keys as written. */
  readonly keys: readonly string[];
  /** Whether one of the keys is the declared partition-key column (unchanged). */
  readonly coPartitioned: boolean;
}

function unalias(e: Expr): Expr {
  return e.kind === 'alias' ? unalias(e.child) : e;
}

/** The streaming source column `attribute` is a plain copy of, if any. */
export function sourceColumnOf(plan: LogicalPlan, attribute: Attribute): string | null {
  switch (plan.kind) {
    case 'StreamingRelation':
      return plan.output.some((a) => a.id === attribute.id) ? attribute.name : null;
    case 'Project': {
      const index = plan.output.findIndex((a) => a.id === attribute.id);
      if (index < 0) return null;
      return columnOfExpr(plan.child, plan.exprs[index]!);
    }
    case 'Aggregate': {
      const index = plan.output.findIndex((a) => a.id === attribute.id);
      if (index < 0 || index >= plan.groupingExprs.length) return null;
      return columnOfExpr(plan.child, plan.aggregateExprs[index]!);
    }
    default:
      for (const child of planChildren(plan)) {
        if (child.output.some((a) => a.id === attribute.id)) return sourceColumnOf(child, attribute);
      }
      return null;
  }
}

function columnOfExpr(child: LogicalPlan, expr: Expr): string | null {
  const e = unalias(expr);
  if (e.kind !== 'column') return null;
  try {
    const resolved = resolveName(e.name, child.output);
    return resolved.path.length === 0 ? sourceColumnOf(child, resolved.attribute) : null;
  } catch {
    return null;
  }
}

function describeExpr(e: Expr): string {
  const u = unalias(e);
  if (u.kind === 'column') return u.name;
  if (u.kind === 'timeWindow') return 'window';
  if (u.kind === 'sessionWindow') return 'session_window';
  return e.kind === 'alias' ? e.name : u.kind;
}

function joinEqualities(condition: Expr | null): [Expr, Expr][] {
  if (!condition) return [];
  return splitConjuncts(condition).flatMap((c): [Expr, Expr][] => (c.kind === 'call' && c.fn === '=' ? [[c.args[0]!, c.args[1]!]] : []));
}

/** Every stateful operator of a streaming plan with its keys, checked against `partitionKey`. */
export function statefulKeyReport(plan: LogicalPlan, partitionKey: string | undefined): StatefulKeyReport[] {
  const isKey = (column: string | null): boolean =>
    partitionKey !== undefined && column !== null && column.toLowerCase() === partitionKey.toLowerCase();
  const reports: StatefulKeyReport[] = [];
  const visit = (node: LogicalPlan): void => {
    const stateful = isStatefulOperator(node);
    if (node.kind === 'Aggregate' && stateful) {
      reports.push({
        operator: 'Aggregate',
        keys: node.groupingExprs.map(describeExpr),
        coPartitioned: node.groupingExprs.some((g) => isKey(columnOfExpr(node.child, g))),
      });
    } else if (node.kind === 'StatefulProcessing' && stateful) {
      reports.push({
        operator: node.api,
        keys: node.keys.map((k) => k.name),
        coPartitioned: node.keys.some((k) => isKey(sourceColumnOf(node.child, k))),
      });
    } else if (node.kind === 'Deduplicate' && stateful) {
      reports.push({
        operator: 'Deduplicate',
        keys: node.keys.map((k) => k.name),
        coPartitioned: node.keys.some((k) => isKey(sourceColumnOf(node.child, k))),
      });
    } else if (node.kind === 'Join' && stateful) {
      const pairs = joinEqualities(node.condition);
      reports.push({
        operator: 'Join',
        keys: pairs.map(([a, b]) => `${describeExpr(a)} = ${describeExpr(b)}`),
        coPartitioned: pairs.some(([a, b]) => isKey(columnOfExpr(node, a)) && isKey(columnOfExpr(node, b))),
      });
    }
    planChildren(node).forEach(visit);
  };
  visit(plan);
  return reports;
}
