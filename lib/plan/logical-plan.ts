import type { Attribute } from './attribute.js';
import type { Expr } from './expressions.js';
import type { SortOrder } from './column.js';
import type { StructField } from './data-types.js';
import type {
  FlatMapGroupsWithStateFunction, GroupingKey, OperatorOutputMode, Row, StatefulProcessor, TimeMode,
} from './stateful-processor.js';

/**
 * The logical plan: a query as data. Each node records its output attributes, computed when the
 * DataFrame call that creates it is analysed (Spark's eager analysis), so a wrong column fails at
 * definition time.
 */
export type LogicalPlan =
  | StreamingRelationNode
  | LocalRelationNode
  | ProjectNode
  | FilterNode
  | EventTimeWatermarkNode
  | AggregateNode
  | DeduplicateNode
  | SortNode
  | JoinNode
  | UnionNode
  | SetOperationNode
  | WindowFunctionNode
  | SubqueryAliasNode
  | StatefulProcessingNode
  | FailOnceNode;

/**
 * Where a streaming source's rows come from, named by id: the plan is data and holds no live
 * source. Each run binds the id to a live source (Spark's MicroBatchExecution), so one analysed
 * plan serves every run.
 */
export interface StreamingRelationNode {
  readonly kind: 'StreamingRelation';
  readonly sourceId: string;
  readonly schema: readonly StructField[];
  readonly output: readonly Attribute[];
}

export interface LocalRelationNode {
  readonly kind: 'LocalRelation';
  readonly name: string;
  readonly rows: readonly (readonly unknown[])[];
  readonly output: readonly Attribute[];
}

export interface ProjectNode {
  readonly kind: 'Project';
  readonly child: LogicalPlan;
  /** Named expressions, one per output attribute (star already expanded). */
  readonly exprs: readonly Expr[];
  readonly output: readonly Attribute[];
}

export interface FilterNode {
  readonly kind: 'Filter';
  readonly child: LogicalPlan;
  readonly condition: Expr;
  readonly output: readonly Attribute[];
}

export interface EventTimeWatermarkNode {
  readonly kind: 'EventTimeWatermark';
  readonly child: LogicalPlan;
  readonly eventTime: Attribute;
  readonly delayMs: number;
  readonly delayText: string;
  readonly output: readonly Attribute[];
  /** Its rows are partial aggregates (see AggregateNode.partialInput): the event time is their first value. */
  readonly partialInput?: boolean;
}

export interface AggregateNode {
  readonly kind: 'Aggregate';
  readonly child: LogicalPlan;
  readonly groupingExprs: readonly Expr[];
  /** Output expressions: grouping columns then aggregates (named). */
  readonly aggregateExprs: readonly Expr[];
  readonly output: readonly Attribute[];
  /**
   * Its input rows are partial aggregates made before a repartition hop (Spark's final
   * aggregation): `[max event time, ...key values, ...buffers]`, merged instead of folded in.
   */
  readonly partialInput?: boolean;
}

export interface DeduplicateNode {
  readonly kind: 'Deduplicate';
  readonly child: LogicalPlan;
  readonly keys: readonly Attribute[];
  readonly withinWatermark: boolean;
  readonly output: readonly Attribute[];
}

export interface SortNode {
  readonly kind: 'Sort';
  readonly child: LogicalPlan;
  readonly orders: readonly SortOrder[];
  readonly output: readonly Attribute[];
}

export type JoinType = 'inner' | 'left_outer' | 'right_outer' | 'full_outer' | 'left_semi' | 'left_anti' | 'cross';

export interface JoinNode {
  readonly kind: 'Join';
  readonly left: LogicalPlan;
  readonly right: LogicalPlan;
  readonly joinType: JoinType;
  /** The ON condition, or the equalities a USING list implies; null = no condition. */
  readonly condition: Expr | null;
  readonly usingColumns: readonly string[] | null;
  readonly output: readonly Attribute[];
}

export interface UnionNode {
  readonly kind: 'Union';
  readonly children: readonly LogicalPlan[];
  readonly output: readonly Attribute[];
}

export interface SetOperationNode {
  readonly kind: 'Except' | 'Intersect';
  readonly left: LogicalPlan;
  readonly right: LogicalPlan;
  readonly all: boolean;
  readonly output: readonly Attribute[];
}

/** A SQL window function (`row_number() OVER (PARTITION BY .. ORDER BY ..)`): batch only. */
export interface WindowFunctionNode {
  readonly kind: 'WindowFunction';
  readonly child: LogicalPlan;
  readonly fn: string;
  readonly partitionBy: readonly Expr[];
  readonly orderBy: readonly SortOrder[];
  readonly output: readonly Attribute[];
}

export interface SubqueryAliasNode {
  readonly kind: 'SubqueryAlias';
  readonly child: LogicalPlan;
  readonly alias: string;
  readonly output: readonly Attribute[];
}

/**
 * Arbitrary stateful processing over `groupByKey(keys)`: Spark's TransformWithState (a processor)
 * or FlatMapGroupsWithState (a function with a GroupState; mapGroupsWithState is its one-row form).
 * The user's code is held by the plan, as Spark's logical node holds the function.
 */
export interface StatefulProcessingNode {
  readonly kind: 'StatefulProcessing';
  readonly child: LogicalPlan;
  readonly api: 'transformWithState' | 'flatMapGroupsWithState' | 'mapGroupsWithState';
  readonly keys: readonly Attribute[];
  /** transformWithState's time mode, or [flat]mapGroupsWithState's timeout. */
  readonly timeMode: TimeMode;
  readonly operatorOutputMode: OperatorOutputMode;
  readonly processor: (() => StatefulProcessor) | null;
  readonly fn: FlatMapGroupsWithStateFunction<unknown> | null;
  /** [flat]mapGroupsWithState's declared state type (Spark type string), if any. */
  readonly stateType: string | null;
  /** transformWithState's initial state: one row per key, handed to handleInitialState in batch 0. */
  readonly initialState: readonly { readonly key: GroupingKey; readonly row: Row }[] | null;
  readonly output: readonly Attribute[];
}

/** Test-only fault injection: raises once, the first time a row satisfies the condition. */
export interface FailOnceNode {
  readonly kind: 'FailOnce';
  readonly child: LogicalPlan;
  readonly condition: Expr;
  readonly message: string;
  readonly token: { fired: boolean };
  readonly output: readonly Attribute[];
}

export function planChildren(p: LogicalPlan): readonly LogicalPlan[] {
  switch (p.kind) {
    case 'StreamingRelation':
    case 'LocalRelation':
      return [];
    case 'Project':
    case 'Filter':
    case 'EventTimeWatermark':
    case 'Aggregate':
    case 'Deduplicate':
    case 'Sort':
    case 'WindowFunction':
    case 'SubqueryAlias':
    case 'StatefulProcessing':
    case 'FailOnce':
      return [p.child];
    case 'Join':
    case 'Except':
    case 'Intersect':
      return [p.left, p.right];
    case 'Union':
      return p.children;
    default: {
      const never: never = p;
      throw new Error(`Unknown plan node ${JSON.stringify(never)}`);
    }
  }
}

export function isStreaming(p: LogicalPlan): boolean {
  return p.kind === 'StreamingRelation' || planChildren(p).some(isStreaming);
}

/** Pre-order walk (node before children), like Spark's `collect`. */
export function collectNodes<T extends LogicalPlan>(p: LogicalPlan, pick: (n: LogicalPlan) => n is T): T[] {
  const found: T[] = [];
  const visit = (n: LogicalPlan): void => {
    if (pick(n)) found.push(n);
    planChildren(n).forEach(visit);
  };
  visit(p);
  return found;
}
