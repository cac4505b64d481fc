/**
 * Which query shapes a streaming query may have, per output mode: the rules of Spark's
 * `UnsupportedOperationChecker` (4.x / master), plus the few checks Spark only makes when the first
 * batch is planned (`checkRuntimeRestrictions`). Messages keep Spark's text so users can search it;
 * every refusal adds a Sluice hint saying what to change. Pure: no IO, no state.
 */
import type { OutputMode } from '../core/output-mode.js';
import type { Attribute } from '../plan/attribute.js';
import { describe, exists, unalias, type Expr } from '../plan/expressions.js';
import { planChildren, isStreaming, type JoinNode, type JoinType, type LogicalPlan, type StatefulProcessingNode } from '../plan/logical-plan.js';
import { AnalysisError } from '../errors/sluice-error.js';
import { bind, inheritedEventTimeDelay } from './binder.js';
import type { BoundExpr } from './bound-expr.js';
import { isStatefulOperator } from './stateful-operators.js';
import { streamStreamJoinBounds } from './streaming-join-helper.js';

type Conf = ReadonlyMap<string, string>;

export const CHECK_CORRECTNESS_CONF = 'spark.sql.streaming.statefulOperator.checkCorrectness.enabled';
export const ALLOW_MULTIPLE_CONF = 'spark.sql.streaming.statefulOperator.allowMultiple';
/** The call DataFrame.sample() filters with: a Sample node that no engine path runs. */
export const SAMPLE_MARKER = '__sample';

// ---------------------------------------------------------------------------------------------
// Messages. Spark 4.0 raises most of these through a legacy error class whose message has no
// `[CLASS]` prefix; the two output-mode errors have a real class in 4.1 (both texts are kept).
// ---------------------------------------------------------------------------------------------

const LEGACY = '_LEGACY_ERROR_TEMP_3102';
const OUTPUT_MODE_CLASS = 'STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION';

function refusal(message: string, code: string, hint: string, errorClass = LEGACY): AnalysisError {
  return new AnalysisError(message, { code, errorClass, hint, context: { sparkMessage: message } });
}

const title = (m: OutputMode): string => m[0]!.toUpperCase() + m.slice(1);

/** Spark's `JoinType.toString`, which its messages print. */
const SPARK_JOIN_NAME: Record<JoinType, string> = {
  inner: 'Inner', cross: 'Cross', left_outer: 'LeftOuter', right_outer: 'RightOuter',
  full_outer: 'FullOuter', left_semi: 'LeftSemi', left_anti: 'LeftAnti',
};

const UPSERT_SINK = 'write it to the DynamoDB upsert sink (keyed by the grouping columns)';

export const errors = {
  noStreamingSource: () => refusal(
    'Queries without streaming sources cannot be executed with writeStream.start()',
    'NO_STREAMING_SOURCE',
    'read at least one input with readStream (a Kinesis or memory stream); run a static DataFrame with collect() instead.',
  ),
  streamingSourceInBatch: () => refusal(
    'Queries with streaming sources must be executed with writeStream.start()',
    'STREAMING_SOURCE_IN_BATCH_QUERY',
    'start the query with df.writeStream...start(), or build the DataFrame from static data.',
  ),
  dedupWithinWatermarkInBatch: () => refusal(
    'dropDuplicatesWithinWatermark is not supported with batch DataFrames/DataSets',
    'DEDUP_WITHIN_WATERMARK_IN_BATCH',
    'use dropDuplicates() on a static DataFrame.',
  ),
  appendAggregationWithoutWatermark: () => refusal(
    '[STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION] Invalid streaming output mode: append. This output mode is not supported for ' +
      'streaming aggregations without watermark on streaming DataFrames/DataSets. (Spark 4.0: Append output mode not supported ' +
      'when there are streaming aggregations on streaming DataFrames/DataSets without watermark)',
    'APPEND_AGGREGATION_WITHOUT_WATERMARK',
    'append emits a group only once it can no longer change, which needs an event time: call withWatermark("eventTime", "10 minutes") ' +
      'and group by that column or by window("eventTime", ...) over it. Or use update mode and ' + `${UPSERT_SINK}.`,
    OUTPUT_MODE_CLASS,
  ),
  completeWithoutAggregation: () => refusal(
    '[STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION] Invalid streaming output mode: complete. This output mode is not supported for ' +
      'no streaming aggregations on streaming DataFrames/DataSets. (Spark 4.0: Complete output mode not supported when there ' +
      'are no streaming aggregations on streaming DataFrames/Datasets)',
    'COMPLETE_WITHOUT_AGGREGATION',
    'complete mode rewrites the whole result table each trigger, which only exists for an aggregation: use append (or update) mode, or add a groupBy().agg().',
    OUTPUT_MODE_CLASS,
  ),
  sessionWindowInUpdateMode: () => refusal(
    '[STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION] Invalid streaming output mode: update. This output mode is not supported for ' +
      'session window streaming aggregations on streaming DataFrames/DataSets. (Spark 3.x: Update output mode not supported ' +
      'for session window on streaming DataFrames/DataSets)',
    'SESSION_WINDOW_UPDATE_MODE',
    'use append mode (a session is emitted once, when the watermark passes its end) or complete mode.',
    OUTPUT_MODE_CLASS,
  ),
  distinctAggregation: () => refusal(
    'Distinct aggregations are not supported on streaming DataFrames/Datasets. Consider using approx_count_distinct() instead.',
    'DISTINCT_AGGREGATION',
    'use approx_count_distinct(col), or size(collect_set(col)) for an exact count over small groups.',
  ),
  streamStreamJoinOutputMode: (mode: OutputMode, allowsUpdate: boolean) => refusal(
    `Join between two streaming DataFrames/Datasets is not supported in ${title(mode)} output mode, ` +
      (allowsUpdate ? 'only in Append and Update output modes' : 'only in Append output mode'),
    'STREAM_STREAM_JOIN_OUTPUT_MODE',
    allowsUpdate
      ? 'use append (or update) mode; to keep a running total of join results, aggregate with a watermark and use append mode.'
      : 'use append mode: an outer join row is final only once the watermark has passed it.',
  ),
  streamStaticOuterJoin: (message: string) => refusal(
    message,
    'STREAM_STATIC_JOIN_SIDE',
    'put the stream on the preserved side (stream LEFT OUTER static, static RIGHT OUTER stream), or use an inner join; ' +
      'the static side cannot be outer-joined because unmatched static rows are never final.',
  ),
  streamStreamJoinWithoutWatermark: (joinType: JoinType) => refusal(
    `Stream-stream ${SPARK_JOIN_NAME[joinType]} join between two streaming DataFrame/Datasets is not supported without a watermark ` +
      'in the join keys, or a watermark on the nullable side and an appropriate range condition',
    'STREAM_STREAM_JOIN_WITHOUT_WATERMARK',
    'call withWatermark on both inputs, then join on a watermarked column (e.g. equal window() structs) or add a time range ' +
      'such as leftTime BETWEEN rightTime - interval 5 minutes AND rightTime + interval 5 minutes, so unmatched rows can be closed.',
  ),
  unsupportedJoinType: (joinType: JoinType) => refusal(
    `Join type ${SPARK_JOIN_NAME[joinType]} is not supported with streaming DataFrame/Dataset`,
    'UNSUPPORTED_STREAMING_JOIN_TYPE',
    'use inner, left outer, right outer, full outer or left semi.',
  ),
  unionStreamWithBatch: () => refusal(
    'Union between streaming and batch DataFrames/Datasets is not supported',
    'UNION_STREAM_WITH_BATCH',
    'read both inputs as streams, or join the static data to the stream instead of unioning it.',
  ),
  exceptWithStream: () => refusal(
    'Except with a streaming DataFrame/Dataset on either side is not supported',
    'EXCEPT_ON_STREAM',
    'filter the stream with a left anti join against a static DataFrame (stream.join(static, keys, "left_anti")).',
  ),
  intersectWithStream: () => refusal(
    'Intersect of streaming DataFrames/Datasets is not supported',
    'INTERSECT_ON_STREAM',
    'use a left semi join (stream.join(other, keys, "left_semi")) instead.',
  ),
  sortOnStream: () => refusal(
    'Sorting is not supported on streaming DataFrames/Datasets, unless it is on aggregated DataFrame/Dataset in Complete output mode',
    'SORT_ON_STREAM',
    'sort after an aggregation in complete mode, or sort each batch in foreachBatch((batch, batchId) => batch.orderBy(...)).',
  ),
  nonTimeWindow: (fn: string, column: string, spec: string) => refusal(
    `[NON_TIME_WINDOW_NOT_SUPPORTED_IN_STREAMING] Window function is not supported in ${fn} (as column \`${column}\`) on ` +
      'streaming DataFrames/Datasets. Structured Streaming only supports time-window aggregation using the WINDOW function. ' +
      `(window specification: ${spec})`,
    'NON_TIME_WINDOW_NOT_SUPPORTED_IN_STREAMING',
    'use groupBy(window(...)) or session_window(...) aggregations, dropDuplicates for "first row per key", or run the window function per batch in foreachBatch.',
    'NON_TIME_WINDOW_NOT_SUPPORTED_IN_STREAMING',
  ),
  dedupWithinWatermarkWithoutWatermark: () => refusal(
    'dropDuplicatesWithinWatermark is not supported on streaming DataFrames/DataSets without watermark',
    'DEDUP_WITHIN_WATERMARK_WITHOUT_WATERMARK',
    'call withWatermark(eventTimeColumn, delay) before dropDuplicatesWithinWatermark.',
  ),
  sampleOnStream: () => refusal(
    'Sampling is not supported on streaming DataFrames/Datasets',
    'SAMPLE_ON_STREAM',
    'sample inside foreachBatch (a static batch), or keep a deterministic subset with filter(), e.g. on a hash of a key.',
  ),
  sampleInBatch: () => refusal(
    'sample() is not supported by Sluice on a static DataFrame',
    'SAMPLE_IN_BATCH',
    'keep a deterministic subset with filter() instead, e.g. on a hash of a key.',
    'SLUICE_UNSUPPORTED_OPERATION',
  ),
  unsupportedExpression: (sql: string) => refusal(
    `Expression(s): ${sql} is not supported with streaming DataFrames/Datasets`,
    'UNSUPPORTED_STREAMING_EXPRESSION',
    'monotonically_increasing_id() restarts in every micro-batch; derive ids from the data (e.g. key + event time) instead.',
  ),
  globalWatermarkCorrectness: () => refusal(
    "Detected pattern of possible 'correctness' issue due to global watermark. The query contains stateful operation which can " +
      'emit rows older than the current watermark plus allowed late record delay, which are "late rows" in downstream stateful ' +
      'operations and these rows can be discarded. Please refer the programming guide doc for more details. If you understand ' +
      'the possible risk of correctness issue and still need to run the query, you can disable this check by setting the config ' +
      `\`${CHECK_CORRECTNESS_CONF}\` to false.`,
    'GLOBAL_WATERMARK_CORRECTNESS',
    'an aggregation in update/complete mode re-emits old groups, which a later stateful operator would drop as late: use append ' +
      'mode for chained stateful operators, or keep one stateful operator and do the rest in the sink (e.g. upsert into DynamoDB).',
  ),
  redefiningWatermark: () => refusal(
    `Redefining watermark is disallowed. You can set the config '${ALLOW_MULTIPLE_CONF}' to 'false' to restore the previous ` +
      'behavior. Note that multiple stateful operators will be disallowed.',
    'REDEFINING_WATERMARK',
    'call withWatermark once per input, before the first stateful operator; later operators inherit it.',
  ),
  multipleEventTimeColumns: (columns: readonly string[]) => refusal(
    'More than one event time columns are available. Please ensure there is at most one event time column per stream. ' +
      `event time columns: (${columns.join(',')})`,
    'MULTIPLE_EVENT_TIME_COLUMNS',
    'keep one event-time column in the stateful operator\'s key (drop or cast the other to long/string first), or set ' +
      `'${ALLOW_MULTIPLE_CONF}' to 'false' to use the first one.`,
  ),
  streamStreamJoinWithoutEquality: () => refusal(
    'Stream-stream join without equality predicate is not supported',
    'STREAM_STREAM_JOIN_WITHOUT_EQUALITY',
    'add at least one equality between the two sides (a key, or equal window() structs) so rows can be matched by key.',
  ),
  multipleMapGroupsWithState: () => refusal(
    'Multiple mapGroupsWithStates are not supported on a streaming DataFrames/Datasets',
    'MULTIPLE_MAP_GROUPS_WITH_STATE',
    'keep one mapGroupsWithState per query; several stateful steps can run in one function, or use flatMapGroupsWithState in append mode.',
  ),
  mixedMapAndFlatMapGroupsWithState: () => refusal(
    'Mixing mapGroupsWithStates and flatMapGroupsWithStates are not supported on a streaming DataFrames/Datasets',
    'MIXED_MAP_FLATMAP_GROUPS_WITH_STATE',
    'use flatMapGroupsWithState (append mode) for every stateful step.',
  ),
  multipleFlatMapGroupsWithStateNotAppend: () => refusal(
    'Multiple flatMapGroupsWithStates are not supported when they are not all in append mode or the output mode is not append on a ' +
      'streaming DataFrames/Datasets',
    'MULTIPLE_FLATMAP_GROUPS_WITH_STATE',
    "give every flatMapGroupsWithState outputMode 'append' and run the query in append mode.",
  ),
  mapGroupsWithStateOutputMode: (mode: OutputMode) => refusal(
    `mapGroupsWithState is not supported with ${title(mode)} output mode on a streaming DataFrame/Dataset`,
    'MAP_GROUPS_WITH_STATE_OUTPUT_MODE',
    'mapGroupsWithState updates a row per key: run the query in update mode (e.g. into the DynamoDB upsert sink), or use ' +
      "flatMapGroupsWithState with outputMode 'append' for append mode.",
  ),
  flatMapGroupsWithStateOutputMode: (operatorMode: OutputMode, mode: OutputMode) => refusal(
    `flatMapGroupsWithState in ${operatorMode} mode is not supported with ${title(mode)} output mode on a streaming DataFrame/Dataset`,
    'FLATMAP_GROUPS_WITH_STATE_OUTPUT_MODE',
    "the operator's outputMode option must match the query's output mode when no aggregation follows it.",
  ),
  flatMapGroupsWithStateUpdateWithAggregation: () => refusal(
    'flatMapGroupsWithState in update mode is not supported with aggregation on a streaming DataFrame/Dataset',
    'FLATMAP_GROUPS_WITH_STATE_UPDATE_WITH_AGGREGATION',
    "use outputMode 'append' for a flatMapGroupsWithState whose rows are aggregated.",
  ),
  eventTimeTimeoutWithoutWatermark: (operator: string) => refusal(
    "Watermark must be specified in the query using '[Dataset/DataFrame].withWatermark()' for using event-time timeout in a " +
      `${operator}. Event-time timeout not supported without watermark.`,
    'EVENT_TIME_TIMEOUT_WITHOUT_WATERMARK',
    'call withWatermark(eventTimeColumn, delay) before groupByKey: event-time timers fire when the watermark passes them.',
  ),
  globalSessionWindow: () => refusal(
    'Global aggregation with session window in streaming query is not supported.',
    'GLOBAL_SESSION_WINDOW',
    'group by at least one column besides session_window(...), e.g. groupBy(session_window("eventTime", "5 minutes"), "userId").',
  ),
};

// ---------------------------------------------------------------------------------------------
// Plan helpers
// ---------------------------------------------------------------------------------------------

/** Post-order walk (children before the node), like Spark's `foreachUp`. */
function foreachUp(p: LogicalPlan, visit: (n: LogicalPlan) => void): void {
  planChildren(p).forEach((c) => foreachUp(c, visit));
  visit(p);
}

/** Pre-order walk, like Spark's `collect` / `find`. */
function preOrder(p: LogicalPlan): LogicalPlan[] {
  return [p, ...planChildren(p).flatMap(preOrder)];
}

function tryBind(e: Expr, input: readonly Attribute[]): BoundExpr | null {
  try {
    return bind(e, input);
  } catch {
    return null;
  }
}

/** The watermark delay of a grouping key: a watermarked column, or window()/session_window() over one. */
export function groupingKeyWatermarkDelay(e: Expr, input: readonly Attribute[]): number | null {
  const bound = tryBind(e, input);
  return bound ? inheritedEventTimeDelay(bound) : null;
}

export function isSessionWindowKey(e: Expr): boolean {
  return unalias(e).kind === 'sessionWindow';
}

/** Streaming aggregations, top-most first (Spark's `collectStreamingAggregates`). */
export function streamingAggregates(plan: LogicalPlan): Extract<LogicalPlan, { kind: 'Aggregate' }>[] {
  return preOrder(plan).filter((n): n is Extract<LogicalPlan, { kind: 'Aggregate' }> => n.kind === 'Aggregate' && isStreaming(n));
}

/** The expressions a plan node holds itself (not its children's). */
export function nodeExpressions(n: LogicalPlan): readonly Expr[] {
  switch (n.kind) {
    case 'Project': return n.exprs;
    case 'Filter': return [n.condition];
    case 'Aggregate': return [...n.groupingExprs, ...n.aggregateExprs];
    case 'Sort': return n.orders.map((o) => o.expr);
    case 'Join': return n.condition ? [n.condition] : [];
    case 'WindowFunction': return [...n.partitionBy, ...n.orderBy.map((o) => o.expr)];
    case 'FailOnce': return [n.condition];
    default: return [];
  }
}

// ---------------------------------------------------------------------------------------------
// Stream-stream joins (the state bounds: streaming-join-helper.ts, shared with the join operator)
// ---------------------------------------------------------------------------------------------

function checkStreamStreamJoinWatermark(join: JoinNode): void {
  const a = streamStreamJoinBounds(join);
  // The side whose unmatched rows must eventually be emitted (or, for semi, dropped) needs a bound.
  const validRange = join.joinType === 'left_outer' || join.joinType === 'left_semi'
    ? a.left.length > 0
    : join.joinType === 'right_outer'
      ? a.right.length > 0
      : a.left.length > 0 || a.right.length > 0;
  if (a.watermarkKeyIndex < 0 && !validRange) throw errors.streamStreamJoinWithoutWatermark(join.joinType);
}

function checkJoin(join: JoinNode, outputMode: OutputMode): void {
  const ls = isStreaming(join.left);
  const rs = isStreaming(join.right);
  const name = SPARK_JOIN_NAME[join.joinType];
  // Master: inner and left semi stream-stream joins also run in update mode (nothing is ever retracted).
  if (ls && rs && outputMode !== 'append' && join.joinType !== 'left_anti') {
    const allowsUpdate = join.joinType === 'inner' || join.joinType === 'cross' || join.joinType === 'left_semi';
    if (outputMode === 'complete' || !allowsUpdate) throw errors.streamStreamJoinOutputMode(outputMode, allowsUpdate);
  }
  switch (join.joinType) {
    case 'inner':
    case 'cross':
      return;
    case 'full_outer':
      if (ls && !rs) throw errors.streamStaticOuterJoin('FullOuter joins with streaming DataFrames/Datasets on the left and a static DataFrame/Dataset on the right is not supported');
      if (!ls && rs) throw errors.streamStaticOuterJoin('FullOuter joins with streaming DataFrames/Datasets on the right and a static DataFrame/Dataset on the left is not supported');
      if (ls && rs) checkStreamStreamJoinWatermark(join);
      return;
    case 'left_anti':
      if (rs) throw errors.streamStaticOuterJoin('LeftAnti joins with a streaming DataFrame/Dataset on the right are not supported');
      return;
    case 'left_outer':
    case 'left_semi':
      if (!ls && rs) throw errors.streamStaticOuterJoin(`${name} join with a streaming DataFrame/Dataset on the right and a static DataFrame/Dataset on the left is not supported`);
      if (ls && rs) checkStreamStreamJoinWatermark(join);
      return;
    case 'right_outer':
      if (ls && !rs) throw errors.streamStaticOuterJoin('RightOuter join with a streaming DataFrame/Dataset on the left and a static DataFrame/DataSet on the right not supported');
      if (ls && rs) checkStreamStreamJoinWatermark(join);
      return;
    default:
      throw errors.unsupportedJoinType(join.joinType);
  }
}

// ---------------------------------------------------------------------------------------------
// Chained stateful operators (Spark's checkStreamingQueryGlobalWatermarkLimit)
// ---------------------------------------------------------------------------------------------

/** Stateful operators that drop input rows behind the watermark (dedup only when its key has an event time). */
function dropsLateRows(n: LogicalPlan): boolean {
  if (n.kind === 'Deduplicate') return isStatefulOperator(n) && (n.withinWatermark || n.keys.some((k) => k.eventTimeDelayMs !== null));
  return isStatefulOperator(n);
}

/** Operators whose output can be older than the watermark: an aggregation that re-emits updated groups. */
function emitsRowsBehindWatermark(n: LogicalPlan, outputMode: OutputMode): boolean {
  if (n.kind === 'StatefulProcessing') return isStreaming(n) && n.api !== 'transformWithState' && n.timeMode === 'eventTime';
  return n.kind === 'Aggregate' && isStreaming(n) && outputMode !== 'append';
}

export interface CorrectnessIssue {
  /** The stateful operator that would drop the late rows. */
  readonly downstream: LogicalPlan;
  /** The operator below it that emits them. */
  readonly upstream: LogicalPlan;
}

/** Finds a stateful operator fed by an operator that can emit rows behind the global watermark. */
export function findGlobalWatermarkCorrectnessIssue(plan: LogicalPlan, outputMode: OutputMode): CorrectnessIssue | null {
  for (const downstream of preOrder(plan)) {
    if (!dropsLateRows(downstream)) continue;
    const upstream = preOrder(downstream).find((p) => p !== downstream && emitsRowsBehindWatermark(p, outputMode));
    if (upstream) return { downstream, upstream };
  }
  return null;
}

export function isCorrectnessCheckEnabled(conf: Conf): boolean {
  return (conf.get(CHECK_CORRECTNESS_CONF) ?? 'true').trim().toLowerCase() !== 'false';
}

/** Throws when the pattern is found and the check is enabled (the default); otherwise the caller may warn. */
export function checkStreamingQueryGlobalWatermarkLimit(plan: LogicalPlan, outputMode: OutputMode, conf: Conf): void {
  if (isCorrectnessCheckEnabled(conf) && findGlobalWatermarkCorrectnessIssue(plan, outputMode)) {
    throw errors.globalWatermarkCorrectness();
  }
}

// ---------------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------------

function checkOutputMode(plan: LogicalPlan, outputMode: OutputMode): void {
  const aggregates = streamingAggregates(plan);
  if (outputMode === 'append') {
    // Spark looks at the top-most aggregation only; every aggregation in append mode must be able to
    // close its groups, so Sluice checks all of them.
    const unbounded = aggregates.some((a) => !a.groupingExprs.some((k) => groupingKeyWatermarkDelay(k, a.child.output) !== null));
    if (unbounded) throw errors.appendAggregationWithoutWatermark();
  } else if (outputMode === 'update') {
    if (aggregates.some((a) => a.groupingExprs.some(isSessionWindowKey))) throw errors.sessionWindowInUpdateMode();
  } else if (aggregates.length === 0) {
    throw errors.completeWithoutAggregation();
  }
}

function windowSpec(n: Extract<LogicalPlan, { kind: 'WindowFunction' }>): string {
  const parts: string[] = [];
  if (n.partitionBy.length > 0) parts.push(`PARTITION BY ${n.partitionBy.map(describe).join(', ')}`);
  if (n.orderBy.length > 0) {
    parts.push(`ORDER BY ${n.orderBy.map((o) => `${describe(o.expr)} ${o.descending ? 'DESC NULLS LAST' : 'ASC NULLS FIRST'}`).join(', ')}`);
  }
  parts.push('ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW');
  return `(${parts.join(' ')})`;
}

function checkNode(n: LogicalPlan, outputMode: OutputMode, plan: LogicalPlan): void {
  switch (n.kind) {
    case 'Aggregate': {
      const distinct = n.aggregateExprs.some((e) => exists(e, (x) => x.kind === 'aggregate' && x.distinct));
      if (isStreaming(n.child) && distinct) throw errors.distinctAggregation();
      break;
    }
    case 'Join':
      checkJoin(n, outputMode);
      break;
    case 'Deduplicate':
      if (n.withinWatermark && isStreaming(n) && !n.child.output.some((a) => a.eventTimeDelayMs !== null)) {
        throw errors.dedupWithinWatermarkWithoutWatermark();
      }
      break;
    case 'StatefulProcessing':
      if (isStreaming(n)) checkStatefulProcessing(n, plan, outputMode);
      break;
    case 'Filter':
      if (isStreaming(n) && isSample(n)) throw errors.sampleOnStream();
      break;
    case 'Union':
      if (new Set(n.children.map(isStreaming)).size === 2) throw errors.unionStreamWithBatch();
      break;
    case 'Except':
      if (isStreaming(n.left) || isStreaming(n.right)) throw errors.exceptWithStream();
      break;
    case 'Intersect':
      if (isStreaming(n.left) || isStreaming(n.right)) throw errors.intersectWithStream();
      break;
    case 'Sort': {
      // Sorting needs the whole result: only a batch subtree, or an aggregation's table in complete mode.
      const completeData = !isStreaming(n) || (outputMode === 'complete' && streamingAggregates(n).length > 0);
      if (!completeData) throw errors.sortOnStream();
      break;
    }
    case 'WindowFunction':
      if (isStreaming(n.child)) {
        const column = n.output[n.output.length - 1]?.name ?? n.fn;
        throw errors.nonTimeWindow(`${n.fn.toUpperCase()}()`, column, windowSpec(n));
      }
      break;
    default:
      break;
  }
  if (nodeExpressions(n).some((e) => exists(e, (x) => x.kind === 'call' && x.fn === 'monotonically_increasing_id'))) {
    throw errors.unsupportedExpression('monotonically_increasing_id()');
  }
}

// ---------------------------------------------------------------------------------------------
// Arbitrary stateful processing (Spark's FlatMapGroupsWithState and TransformWithState cases)
// ---------------------------------------------------------------------------------------------

function statefulProcessingNodes(plan: LogicalPlan): StatefulProcessingNode[] {
  return preOrder(plan).filter((n): n is StatefulProcessingNode => n.kind === 'StatefulProcessing' && isStreaming(n));
}

function checkStatefulProcessingCount(plan: LogicalPlan, outputMode: OutputMode): void {
  const nodes = statefulProcessingNodes(plan);
  const maps = nodes.filter((n) => n.api === 'mapGroupsWithState');
  const flatMaps = nodes.filter((n) => n.api === 'flatMapGroupsWithState');
  if (maps.length >= 2) throw errors.multipleMapGroupsWithState();
  if (maps.length > 0 && flatMaps.length > 0) throw errors.mixedMapAndFlatMapGroupsWithState();
  if (flatMaps.length >= 2 && (outputMode !== 'append' || flatMaps.some((n) => n.operatorOutputMode !== 'append'))) {
    throw errors.multipleFlatMapGroupsWithStateNotAppend();
  }
}

function checkStatefulProcessing(n: StatefulProcessingNode, plan: LogicalPlan, outputMode: OutputMode): void {
  if (n.api === 'mapGroupsWithState') {
    if (outputMode !== 'update') throw errors.mapGroupsWithStateOutputMode(outputMode);
  } else if (n.api === 'flatMapGroupsWithState') {
    if (streamingAggregates(plan).length === 0) {
      if (n.operatorOutputMode !== outputMode) throw errors.flatMapGroupsWithStateOutputMode(n.operatorOutputMode, outputMode);
    } else if (n.operatorOutputMode === 'update') {
      throw errors.flatMapGroupsWithStateUpdateWithAggregation();
    }
  }
  // Spark checks this for [flat]mapGroupsWithState; Sluice applies it to transformWithState too, whose
  // event-time timers would otherwise never fire.
  if (n.timeMode === 'eventTime' && !n.child.output.some((a) => a.eventTimeDelayMs !== null)) {
    throw errors.eventTimeTimeoutWithoutWatermark(n.api === 'transformWithState' ? 'transformWithState' : '[map|flatMap]GroupsWithState');
  }
}

/**
 * Throws the AnalysisError Spark raises at `writeStream.start()` for this plan and output mode.
 * Run before any state, checkpoint or data is touched.
 */
export function checkStreamingQuery(plan: LogicalPlan, outputMode: OutputMode, conf: Conf): void {
  if (!isStreaming(plan)) throw errors.noStreamingSource();
  checkOutputMode(plan, outputMode);
  checkStatefulProcessingCount(plan, outputMode);
  foreachUp(plan, (n) => checkNode(n, outputMode, plan));
  checkStreamingQueryGlobalWatermarkLimit(plan, outputMode, conf);
}

/** Spark's `checkForBatch`: a static query must not read streams. */
export function checkBatchQuery(plan: LogicalPlan): void {
  foreachUp(plan, (n) => {
    if (isStreaming(n)) throw errors.streamingSourceInBatch();
    if (n.kind === 'Deduplicate' && n.withinWatermark) throw errors.dedupWithinWatermarkInBatch();
    if (isSample(n)) throw errors.sampleInBatch();
  });
}

function isSample(n: LogicalPlan): boolean {
  return n.kind === 'Filter' && n.condition.kind === 'call' && n.condition.fn === SAMPLE_MARKER;
}

function hasWatermarkBelow(n: LogicalPlan): boolean {
  return planChildren(n).some((c) => c.kind === 'EventTimeWatermark' || hasWatermarkBelow(c));
}

/**
 * The event-time columns among a stateful operator's keys (aggregation grouping keys, dedup keys):
 * Spark's physical operator looks for exactly one to evict state by.
 */
function eventTimeKeyNames(n: LogicalPlan): string[] {
  // Spark prints `name#id-T<delay>ms`; Sluice has no expression ids.
  if (n.kind === 'Deduplicate') return n.keys.filter((k) => k.eventTimeDelayMs !== null).map((k) => `${k.name}-T${k.eventTimeDelayMs}ms`);
  if (n.kind === 'Aggregate') {
    return n.groupingExprs.flatMap((k) => {
      const delay = groupingKeyWatermarkDelay(k, n.child.output);
      return delay === null ? [] : [`${describe(unalias(k))}-T${delay}ms`];
    });
  }
  return [];
}

/**
 * Checks Spark makes only when it plans the first batch (watermark propagation and physical
 * planning), so they surface as a failed query rather than at start().
 */
export function checkRuntimeRestrictions(plan: LogicalPlan, conf: Conf): void {
  const allowMultiple = (conf.get(ALLOW_MULTIPLE_CONF) ?? 'true').trim().toLowerCase() !== 'false';
  foreachUp(plan, (n) => {
    if (n.kind === 'EventTimeWatermark' && allowMultiple && hasWatermarkBelow(n)) throw errors.redefiningWatermark();
    if (allowMultiple && isStreaming(n)) {
      const eventTimeKeys = eventTimeKeyNames(n);
      if (eventTimeKeys.length > 1) throw errors.multipleEventTimeColumns(eventTimeKeys);
    }
    if (n.kind === 'Join' && isStreaming(n.left) && isStreaming(n.right) && streamStreamJoinBounds(n).split.keys.length === 0) {
      throw errors.streamStreamJoinWithoutEquality();
    }
    if (n.kind === 'Aggregate' && isStreaming(n) && n.groupingExprs.some(isSessionWindowKey) && n.groupingExprs.every(isSessionWindowKey)) {
      throw errors.globalSessionWindow();
    }
  });
}
