import { assertNever, unalias } from '../plan/expressions.js';
import { inferJoinFilters } from '../analysis/infer-join-filters.js';
import { isStatefulOperator } from '../analysis/stateful-operators.js';
import { isStreaming, type LogicalPlan } from '../plan/logical-plan.js';
import {
  DistinctExec, EventTimeWatermarkExec, FailOnceExec, FilterExec, HashAggregateExec, LocalScanExec, PassThroughExec,
  ProjectExec, SetOperationExec, SortExec, StreamScanExec, UnionExec, WindowFunctionExec,
} from './basic-execs.js';
import type { EvalContext } from './eval-context.js';
import { HashJoinExec } from './hash-join-exec.js';
import { collectExecs, isStatefulExec, type Exec, type StatefulExec } from './physical.js';
import { SessionWindowAggregateExec } from './session-window-aggregate-exec.js';
import { StreamingAggregateExec } from './streaming-aggregate-exec.js';
import { StreamingDeduplicateExec } from './streaming-deduplicate-exec.js';
import { StreamingSymmetricHashJoinExec } from './streaming-symmetric-hash-join-exec.js';
import { FlatMapGroupsWithStateExec } from './stateful/flat-map-groups-with-state-exec.js';
import { TransformWithStateExec } from './stateful/transform-with-state-exec.js';

/** The executable form of a query: built once per run, re-executed every batch. */
export interface PhysicalQuery {
  readonly root: Exec;
  /** Top-most first, as Spark lists them in progress. */
  readonly statefulOperators: readonly StatefulExec[];
  /** In plan order (pre-order), as Spark's watermark tracker indexes them. */
  readonly watermarkOperators: readonly EventTimeWatermarkExec[];
}

/**
 * Turns a logical plan into operators. Streaming subtrees get stateful operators; static subtrees
 * (and batch queries) get plain ones that recompute from their whole input each batch. Operator ids
 * are assigned in pre-order, so the same query always gets the same ids (checked on restart).
 */
export function planQuery(logical: LogicalPlan, evalContext: EvalContext): PhysicalQuery {
  const plan = inferJoinFilters(logical);
  let nextOperatorId = 0;
  const ids = new Map<LogicalPlan, number>();
  const assignIds = (p: LogicalPlan): void => {
    if (isStatefulOperator(p)) ids.set(p, nextOperatorId++);
    childrenOf(p).forEach(assignIds);
  };
  assignIds(plan);

  const build = (p: LogicalPlan): Exec => {
    const streaming = isStreaming(p);
    switch (p.kind) {
      case 'StreamingRelation':
        return new StreamScanExec(p.sourceId, p.output);
      case 'LocalRelation':
        return new LocalScanExec(p.rows, p.output);
      case 'Project':
        return new ProjectExec(build(p.child), p.exprs, p.output, evalContext);
      case 'Filter':
        return new FilterExec(build(p.child), p.condition, evalContext);
      case 'EventTimeWatermark': {
        const child = build(p.child);
        return streaming ? new EventTimeWatermarkExec(child, p.eventTime, p.delayMs, p.output, p.partialInput ? 0 : undefined) : new PassThroughExec(child, p.output);
      }
      case 'Aggregate': {
        const child = build(p.child);
        if (!streaming) return new HashAggregateExec(child, p.groupingExprs, p.aggregateExprs, p.output, evalContext);
        const operatorId = ids.get(p)!;
        if (p.groupingExprs.some((g) => unalias(g).kind === 'sessionWindow')) {
          return new SessionWindowAggregateExec(operatorId, child, p.groupingExprs, p.aggregateExprs, p.output, evalContext);
        }
        return new StreamingAggregateExec(operatorId, child, p.groupingExprs, p.aggregateExprs, p.output, evalContext, p.partialInput === true);
      }
      case 'Deduplicate': {
        const child = build(p.child);
        return streaming ? new StreamingDeduplicateExec(ids.get(p)!, child, p.keys, p.withinWatermark) : new DistinctExec(child, p.keys);
      }
      case 'Sort':
        return new SortExec(build(p.child), p.orders, evalContext);
      case 'Join': {
        const left = build(p.left);
        const right = build(p.right);
        if (isStreaming(p.left) && isStreaming(p.right)) {
          if (p.joinType === 'left_anti' || p.joinType === 'cross') {
            throw new Error(`Stream-stream ${p.joinType} joins are not supported`);
          }
          return new StreamingSymmetricHashJoinExec({
            operatorId: ids.get(p)!, left, right, joinType: p.joinType, condition: p.condition, output: p.output, evalContext,
          });
        }
        return new HashJoinExec(left, right, p.joinType, p.condition, p.output, evalContext);
      }
      case 'Union':
        return new UnionExec(p.children.map(build), p.output);
      case 'Except':
      case 'Intersect':
        return new SetOperationExec(p.kind, p.all, build(p.left), build(p.right), p.output);
      case 'WindowFunction':
        return new WindowFunctionExec(build(p.child), p.fn, p.partitionBy, p.orderBy, p.output, evalContext);
      case 'SubqueryAlias':
        return new PassThroughExec(build(p.child), p.output);
      case 'StatefulProcessing': {
        const child = build(p.child);
        if (!streaming) throw new Error(`${p.api} on a static DataFrame is not supported by Sluice`);
        const operatorId = ids.get(p)!;
        return p.api === 'transformWithState' ? new TransformWithStateExec(operatorId, child, p) : new FlatMapGroupsWithStateExec(operatorId, child, p);
      }
      case 'FailOnce':
        return new FailOnceExec(build(p.child), p.condition, p.message, p.token, evalContext);
      default:
        return assertNever(p, 'plan node');
    }
  };

  const root = build(plan);
  return {
    root,
    statefulOperators: collectExecs(root, isStatefulExec),
    watermarkOperators: collectExecs(root, (e): e is EventTimeWatermarkExec => e instanceof EventTimeWatermarkExec),
  };
}

function childrenOf(p: LogicalPlan): LogicalPlan[] {
  switch (p.kind) {
    case 'StreamingRelation':
    case 'LocalRelation':
      return [];
    case 'Join':
    case 'Except':
    case 'Intersect':
      return [p.left, p.right];
    case 'Union':
      return [...p.children];
    default:
      return [p.child];
  }
}
