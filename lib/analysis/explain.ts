/**
 * `df.explain()`: the logical plan as an indented tree, then, for a streaming query, what runs
 * incrementally: each stateful operator, the state it keeps and when that state is evicted under
 * the output mode, and whether the query may start at all. Pure string building, no IO.
 */
import type { OutputMode } from '../core/output-mode.js';
import type { Attribute } from '../plan/attribute.js';
import { typeToString } from '../plan/data-types.js';
import { describe, unalias, type Expr } from '../plan/expressions.js';
import { formatDuration, MICROS_PER_MS } from '../plan/intervals.js';
import { collectNodes, isStreaming, planChildren, type JoinNode, type LogicalPlan } from '../plan/logical-plan.js';
import { SluiceError } from '../errors/sluice-error.js';
import { formatTimestamp } from '../core/timestamps.js';
import type { BoundExpr } from './bound-expr.js';
import { isStatefulOperator } from './stateful-operators.js';
import { rangeStateWatermarkMs, streamStreamJoinBounds, watermarkKeyColumn, type RangeBound } from './streaming-join-helper.js';
import {
  checkBatchQuery, checkRuntimeRestrictions, checkStreamingQuery, findGlobalWatermarkCorrectnessIssue,
  groupingKeyWatermarkDelay, isCorrectnessCheckEnabled, CHECK_CORRECTNESS_CONF,
} from './unsupported-operation-checker.js';

type Conf = ReadonlyMap<string, string>;

const delayText = (ms: number): string => formatDuration(ms * MICROS_PER_MS);

/** Column names by attribute id, so internal `#id` references print as names (set per explainPlan call). */
let namesById: ReadonlyMap<number, string> = new Map();

const INFIX = new Set(['+', '-', '*', '/', '%', '=', '!=', '<', '<=', '>', '>=', '<=>', 'and', 'or']);

/** Like `describe`, with readable window lengths, interval literals and `#id` references. */
function show(e: Expr): string {
  switch (e.kind) {
    case 'column': {
      const id = /^#(\d+)$/.exec(e.name);
      return id ? namesById.get(Number(id[1])) ?? e.name : e.name;
    }
    case 'literal':
      return e.type === 'interval' ? `interval ${formatDuration(Number(e.value))}` : describe(e);
    case 'alias':
      return `${show(e.child)} AS ${e.name}`;
    case 'cast':
      return `${e.try ? 'TRY_CAST' : 'CAST'}(${show(e.child)} AS ${typeToString(e.to).toUpperCase()})`;
    case 'call':
      if (INFIX.has(e.fn) && e.args.length === 2) return `(${show(e.args[0]!)} ${e.fn.toUpperCase()} ${show(e.args[1]!)})`;
      if (e.fn === 'between' && e.args.length === 3) return `(${show(e.args[0]!)} BETWEEN ${show(e.args[1]!)} AND ${show(e.args[2]!)})`;
      return `${e.fn}(${e.args.map(show).join(', ')})`;
    case 'aggregate':
      return `${e.fn}(${e.distinct ? 'DISTINCT ' : ''}${e.args.length === 0 ? '1' : e.args.map(show).join(', ')})`;
    case 'case':
      return `CASE ${e.branches.map(([c, v]) => `WHEN ${show(c)} THEN ${show(v)}`).join(' ')}${e.otherwise ? ` ELSE ${show(e.otherwise)}` : ''} END`;
    case 'timeWindow': {
      const slide = e.slideMicros === e.windowMicros ? '' : `, slide ${formatDuration(e.slideMicros)}`;
      const start = e.startMicros === 0 ? '' : `, start ${formatDuration(e.startMicros)}`;
      return `window(${show(e.timeColumn)}, ${formatDuration(e.windowMicros)}${slide}${start})`;
    }
    case 'sessionWindow':
      return `session_window(${show(e.timeColumn)}, ${e.gap.kind === 'literal' && e.gap.type === 'interval' ? formatDuration(Number(e.gap.value)) : show(e.gap)})`;
    default:
      return describe(e);
  }
}

function showColumn(a: Attribute): string {
  const name = a.qualifier ? `${a.qualifier}.${a.name}` : a.name;
  const mark = a.eventTimeDelayMs === null ? '' : ` [event time, watermark delay ${delayText(a.eventTimeDelayMs)}]`;
  return `${name}: ${typeToString(a.type)}${mark}`;
}

const SPARK_JOIN: Record<JoinNode['joinType'], string> = {
  inner: 'Inner', cross: 'Cross', left_outer: 'LeftOuter', right_outer: 'RightOuter',
  full_outer: 'FullOuter', left_semi: 'LeftSemi', left_anti: 'LeftAnti',
};

function header(n: LogicalPlan): string {
  const list = (es: readonly Expr[]): string => `[${es.map(show).join(', ')}]`;
  switch (n.kind) {
    case 'StreamingRelation': return `StreamingRelation ${n.sourceId} (stream)`;
    case 'LocalRelation': return `LocalRelation${n.name === 'LocalRelation' ? '' : ` ${n.name}`} (static, ${n.rows.length} row${n.rows.length === 1 ? '' : 's'})`;
    case 'Project': return `Project ${list(n.exprs)}`;
    case 'Filter': return `Filter ${show(n.condition)}`;
    case 'EventTimeWatermark': return `EventTimeWatermark ${n.eventTime.name}, delay ${n.delayText}`;
    case 'Aggregate': return `Aggregate keys ${list(n.groupingExprs)}, aggregates ${list(n.aggregateExprs.slice(n.groupingExprs.length))}`;
    case 'Deduplicate': return `${n.withinWatermark ? 'DeduplicateWithinWatermark' : 'Deduplicate'} [${n.keys.map((k) => k.name).join(', ')}]`;
    case 'Sort': return `Sort [${n.orders.map((o) => `${show(o.expr)} ${o.descending ? 'DESC' : 'ASC'}`).join(', ')}]`;
    case 'Join': {
      const using = n.usingColumns ? ` USING (${n.usingColumns.join(', ')})` : '';
      return `Join ${SPARK_JOIN[n.joinType]}${using}, ${n.condition ? show(n.condition) : 'no condition'}`;
    }
    case 'Union': return 'Union';
    case 'Except':
    case 'Intersect': return `${n.kind}${n.all ? ' ALL' : ''}`;
    case 'WindowFunction': return `Window ${n.fn}() AS ${n.output[n.output.length - 1]?.name ?? n.fn}`;
    case 'SubqueryAlias': return `SubqueryAlias ${n.alias}`;
    case 'StatefulProcessing': return `${n.api === 'transformWithState' ? 'TransformWithState' : n.api === 'mapGroupsWithState' ? 'MapGroupsWithState' : 'FlatMapGroupsWithState'} keys [${n.keys.map((k) => k.name).join(', ')}], ${n.api === 'transformWithState' ? 'timeMode' : 'timeout'} ${n.timeMode}, ${n.operatorOutputMode}`;
    case 'FailOnce': return `FailOnce ${show(n.condition)} (test fault injection)`;
    default: return (n as LogicalPlan).kind;
  }
}

/** Spark's tree layout: `:- ` for a child with siblings after it, `+- ` for the last one. */
export function renderTree(n: LogicalPlan, prefix = '', connector = ''): string[] {
  const children = planChildren(n);
  const own = prefix + connector;
  const below = prefix + (connector === ':- ' ? ':  ' : connector === '+- ' ? '   ' : '');
  const lines = [`${own}${header(n)}`, `${below}${children.length > 0 ? ':' : ' '}  output: ${n.output.map(showColumn).join(', ') || '(none)'}`];
  children.forEach((c, i) => lines.push(...renderTree(c, below, i === children.length - 1 ? '+- ' : ':- ')));
  return lines;
}

// ---------------------------------------------------------------------------------------------
// Incremental plan
// ---------------------------------------------------------------------------------------------

interface OperatorNote { readonly text: string; readonly warnings: string[] }

function aggregateNote(n: Extract<LogicalPlan, { kind: 'Aggregate' }>, mode: OutputMode): OperatorNote {
  const aggs = n.aggregateExprs.slice(n.groupingExprs.length).map(show).join(', ');
  const keys = n.groupingExprs.length > 0 ? `by [${n.groupingExprs.map(show).join(', ')}]` : 'over the whole stream (one group)';
  const evictKey = n.groupingExprs.find((k) => groupingKeyWatermarkDelay(k, n.child.output) !== null);
  const inner = evictKey ? unalias(evictKey) : null;
  const closes = !inner ? null
    : inner.kind === 'timeWindow' ? 'the end of its window <= watermark'
      : inner.kind === 'sessionWindow' ? 'the end of its session (last event + gap) <= watermark'
        : `its ${show(inner)} <= watermark`;
  const state = `Aggregation ${keys}: keeps one row per group with the running ${aggs || 'keys'}.`;
  const warnings: string[] = [];
  let eviction: string;
  if (mode === 'complete') {
    eviction = 'complete: every group is emitted every trigger and is never removed from state.';
    if (closes) warnings.push('complete mode ignores the watermark for eviction: the aggregation state grows with the number of groups.');
  } else if (mode === 'update') {
    eviction = closes
      ? `update: groups changed in a trigger are emitted; a group is removed once ${closes} (later rows for it are dropped as late).`
      : 'update: groups changed in a trigger are emitted; groups are never removed.';
    if (!closes) warnings.push(`the aggregation ${keys} has no watermarked grouping key: its state grows forever. Add withWatermark and group by window() over it to bound it.`);
  } else {
    eviction = closes
      ? `append: a group is emitted once, when ${closes}, and then removed from state.`
      : 'append: a group without a watermarked key can never be emitted.';
  }
  return { text: `${state} ${eviction}`, warnings };
}

function dedupNote(n: Extract<LogicalPlan, { kind: 'Deduplicate' }>): OperatorNote {
  const keys = `[${n.keys.map((k) => k.name).join(', ')}]`;
  if (n.withinWatermark) {
    const time = n.child.output.find((a) => a.eventTimeDelayMs !== null);
    const until = time ? `${time.name} + ${delayText(time.eventTimeDelayMs!)} <= watermark` : 'the watermark passes it';
    return { text: `Deduplication within watermark on ${keys}: keeps each key until ${until}; duplicates seen before then are dropped.`, warnings: [] };
  }
  const timeKey = n.keys.find((k) => k.eventTimeDelayMs !== null);
  if (timeKey) {
    return { text: `Deduplication on ${keys}: keeps one entry per key, removed once ${timeKey.name} <= watermark (older rows are dropped as late).`, warnings: [] };
  }
  return {
    text: `Deduplication on ${keys}: keeps one entry per distinct key, never removed.`,
    warnings: [`dropDuplicates on ${keys} has no event-time column in its key: its state grows with the number of distinct keys.`],
  };
}

/** `leftTime < watermark(rightTime) - 5 seconds`: the state rows a range bound evicts. */
function boundText(b: RangeBound): string {
  const op = b.adjustMs === 0 ? '<=' : '<';
  if (b.watermarkColumn === null) return `${b.stateColumn.name} ${op} ${formatTimestamp(b.micros)}`;
  const watermark = `${b.coefficient === 1 ? '' : `${b.coefficient} * `}watermark(${b.watermarkColumn.name})`;
  const offset = b.micros === 0 ? '' : ` ${b.micros < 0 ? '-' : '+'} ${formatDuration(Math.abs(b.micros))}`;
  return `${b.stateColumn.name} ${op} ${watermark}${offset}`;
}

/** The bound that evicts least (the operator evicts below the lowest of them). */
function lowestBound(bounds: readonly RangeBound[]): RangeBound | null {
  return bounds.reduce<RangeBound | null>((low, b) => (low === null || b.micros - b.adjustMs * 1000 < low.micros - low.adjustMs * 1000 ? b : low), null);
}

function joinNote(n: JoinNode): OperatorNote {
  const a = streamStreamJoinBounds(n);
  const keys = a.split.keys.map((k) => `${describeBound(k.left)} = ${describeBound(k.right)}`).join(', ') || 'no equality';
  const keyColumn = watermarkKeyColumn(a.split.keys, a.watermarkKeyIndex);
  const warnings: string[] = [];
  const side = (name: 'left' | 'right', bound: RangeBound | null): string => {
    if (keyColumn) return `${name} rows are removed once their ${keyColumn.name} <= watermark`;
    if (bound) return `${name} rows are removed once ${boundText(bound)}`;
    warnings.push(`the ${name} side of the ${SPARK_JOIN[n.joinType]} join is never evicted: its state grows forever. Join on a watermarked column or add a time-range condition.`);
    return `${name} rows are never removed`;
  };
  const left = side('left', lowestBound(a.left));
  const right = side('right', lowestBound(a.right));
  const extra = n.joinType === 'left_outer' ? ' Unmatched left rows are emitted with NULLs when they are removed.'
    : n.joinType === 'right_outer' ? ' Unmatched right rows are emitted with NULLs when they are removed.'
      : n.joinType === 'full_outer' ? ' Unmatched rows of either side are emitted with NULLs when they are removed.'
        : n.joinType === 'left_semi' ? ' A left row is emitted at most once, on its first match.'
          : '';
  return { text: `Stream-stream ${SPARK_JOIN[n.joinType]} join on [${keys}]: buffers both sides to match later rows; ${left}; ${right}.${extra}`, warnings };
}

function describeBound(e: BoundExpr): string {
  return e.kind === 'ref' ? [e.attribute.name, ...e.path].join('.') : `(${e.kind} expression)`;
}

/**
 * How far each stateful operator's input watermark trails the global one (ms), as Spark
 * propagates it (PropagateWatermarkSimulator): a node takes the lowest of its children's, and a
 * time-interval join's output trails its input by its time bound, which delays every operator
 * above it. Operators no watermark reaches are left out.
 */
function watermarkLagsMs(plan: LogicalPlan): Map<LogicalPlan, number> {
  // Any watermark far past every bound: the lag does not depend on it.
  const global = 1e12;
  const lags = new Map<LogicalPlan, number>();
  const visit = (n: LogicalPlan): number | null => {
    const below = planChildren(n).map(visit).filter((l): l is number => l !== null);
    const input = below.length > 0 ? Math.max(...below) : null;
    if (n.kind === 'EventTimeWatermark') return 0;
    if (!isStatefulOperator(n) || input === null) return input;
    lags.set(n, input);
    if (n.kind === 'StatefulProcessing' && n.timeMode === 'processingTime') return null;
    return n.kind === 'Join' ? global - joinOutputWatermarkMs(n, global - input) : input;
  };
  visit(plan);
  return lags;
}

/** A stream-stream join's output watermark: the lowest of its input's and each side's state watermark. */
function joinOutputWatermarkMs(n: JoinNode, inputMs: number): number {
  const bounds = streamStreamJoinBounds(n);
  if (bounds.watermarkKeyIndex >= 0) return inputMs;
  const candidates = [inputMs];
  for (const [attrs, side] of [[n.left.output, bounds.left], [n.right.output, bounds.right]] as const) {
    if (side.length > 0 && attrs.some((a) => a.eventTimeDelayMs !== null)) candidates.push(rangeStateWatermarkMs(side, inputMs));
  }
  return Math.min(...candidates);
}

function operatorWatermarkText(lagMs: number): string {
  const minus = lagMs > 0 ? ` minus ${formatDuration(lagMs * MICROS_PER_MS)} (the time bound of the join below it)` : '';
  return `watermarks: late rows are those behind batch N-1's global watermark${minus} (eventTimeWatermarkForLateEvents); `
    + `state is evicted by batch N's${minus ? ' minus the same' : ''} (eventTimeWatermarkForEviction); each batch's progress shows both per operator.`;
}

/** Stateful operators in data-flow order: the one nearest the sources first. */
function statefulOperators(plan: LogicalPlan): LogicalPlan[] {
  const out: LogicalPlan[] = [];
  const visit = (n: LogicalPlan): void => {
    planChildren(n).forEach(visit);
    if (isStatefulOperator(n)) out.push(n);
  };
  visit(plan);
  return out;
}

function operatorNote(n: LogicalPlan, mode: OutputMode): OperatorNote {
  if (n.kind === 'Aggregate') return aggregateNote(n, mode);
  if (n.kind === 'Deduplicate') return dedupNote(n);
  if (n.kind === 'Join') return joinNote(n);
  if (n.kind === 'StatefulProcessing') {
    const timers = n.timeMode === 'none' ? 'no timers' : n.timeMode === 'processingTime' ? 'timers fire when the batch timestamp passes them (scheduled no-data batches too)' : 'timers fire when the watermark passes them';
    return { text: `${n.api} by [${n.keys.map((k) => k.name).join(', ')}]: the user's code decides the output; ${timers}; state kept until the code clears it or its TTL ends`, warnings: [] };
  }
  return { text: n.kind, warnings: [] };
}

function watermarkLines(plan: LogicalPlan, conf: Conf): string[] {
  const marks = collectNodes(plan, (n): n is Extract<LogicalPlan, { kind: 'EventTimeWatermark' }> => n.kind === 'EventTimeWatermark');
  if (marks.length === 0) return ['Watermark: none (stateful operators never drop late rows nor evict state by time).'];
  const lines = [`Watermark: ${marks.map((m) => `${m.eventTime.name} with delay ${m.delayText}`).join('; ')}.`,
    '  Batch N uses max(event time seen before N) - delay; it never goes back. Rows at or below it are late for stateful operators.'];
  if (marks.length > 1) {
    const policy = conf.get('spark.sql.streaming.multipleWatermarkPolicy') ?? 'min';
    lines.push(`  Several inputs: the global watermark is the ${policy} of the per-input watermarks.`);
  }
  return lines;
}

function failure(title: string, e: unknown): string[] {
  if (!(e instanceof SluiceError)) throw e;
  const message = typeof e.context.sparkMessage === 'string' ? e.context.sparkMessage : e.message;
  return ['', title, `  ${message}`, ...(e.hint ? [`  How to fix: ${e.hint}`] : [])];
}

function incrementalPlan(plan: LogicalPlan, outputMode: OutputMode | undefined, conf: Conf): string[] {
  const mode = outputMode ?? 'append';
  const lines = ['', `== Incremental plan (output mode: ${mode}${outputMode ? '' : ', the default'}) ==`, ...watermarkLines(plan, conf)];
  const operators = statefulOperators(plan);
  const warnings: string[] = [];
  if (operators.length === 0) {
    lines.push('Stateful operators: none. Each row is processed once, in the batch it arrives, and no state is kept.');
  } else {
    lines.push('Stateful operators (nearest the sources first):');
    const lags = collectNodes(plan, (n) => n.kind === 'EventTimeWatermark').length > 0 ? watermarkLagsMs(plan) : null;
    operators.forEach((op, i) => {
      const note = operatorNote(op, mode);
      lines.push(`  ${i + 1}. ${note.text}`);
      if (lags?.has(op)) lines.push(`     ${operatorWatermarkText(lags.get(op)!)}`);
      warnings.push(...note.warnings);
    });
  }
  if (!isCorrectnessCheckEnabled(conf) && findGlobalWatermarkCorrectnessIssue(plan, mode)) {
    warnings.push(`a stateful operator follows an aggregation in ${mode} mode; its late-row drops may lose results (${CHECK_CORRECTNESS_CONF} is false).`);
  }
  if (warnings.length > 0) lines.push('Warnings:', ...warnings.map((w) => `  - ${w}`));
  try {
    checkStreamingQuery(plan, mode, conf);
  } catch (e) {
    return [...lines, ...failure('This query cannot start:', e)];
  }
  try {
    checkRuntimeRestrictions(plan, conf);
  } catch (e) {
    return [...lines, ...failure('This query will fail when its first batch is planned:', e)];
  }
  return lines;
}

export function explainPlan(plan: LogicalPlan, outputMode: OutputMode | undefined, conf: ReadonlyMap<string, string>): string {
  namesById = new Map(collectNodes(plan, (n): n is LogicalPlan => true).flatMap((n) => n.output.map((a) => [a.id, a.name] as const)));
  const lines = ['== Logical plan ==', ...renderTree(plan)];
  if (isStreaming(plan)) {
    lines.push(...incrementalPlan(plan, outputMode, conf));
  } else {
    try {
      checkBatchQuery(plan);
    } catch (e) {
      lines.push(...failure('This query cannot run:', e));
    }
  }
  return lines.join('\n');
}
