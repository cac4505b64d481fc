/**
 * The repartition stage, Spark's shuffle for Kinesis: when a query's state is keyed by columns the
 * stream is not partitioned by, the plan is cut in two. Stage 1 runs on each source shard: the
 * stateless part below the event-time watermark, whose rows it routes by the state key to an
 * internal stream. Stage 2 runs on each shard of that stream, which owns the state partitions: the
 * watermark, the stateful operator and everything above it, with the output mode and the sink.
 *
 *   source shard ─▶ [stage 1: decode, filter, project] ─▶ internal stream (by key) ─▶ [stage 2: watermark, aggregate, ...] ─▶ sink
 */
import type { Attribute } from '../plan/attribute.js';
import type { Expr } from '../plan/expressions.js';
import { isStreaming, planChildren, type EventTimeWatermarkNode, type LogicalPlan } from '../plan/logical-plan.js';
import { AnalysisError } from '../errors/sluice-error.js';
import { resolveName } from './binder.js';
import { isStatefulOperator } from './stateful-operators.js';

export interface RepartitionPlan {
  /** Stage 1: the stateless part, a plan over the source relation alone. */
  readonly stage1: LogicalPlan;
  /** Stage 1's output: what crosses the hop, and stage 2's input. */
  readonly cutOutput: readonly Attribute[];
  /** Cut-output ordinals of the columns that route a row to its state partition ([] = one partition). */
  readonly routingOrdinals: readonly number[];
  readonly routingColumns: readonly string[];
  /** Where each routing column sits among the stateful operator's keys (a reshard routes state by them). */
  readonly routingKeyPositions: readonly number[];
  /** The event-time column (cut-output ordinal) and delay: source watermarks travel with the rows. */
  readonly eventTime: { readonly ordinal: number; readonly delayMs: number } | null;
  /** The stateful operator's kind and keys, for explain. */
  readonly statefulOperator: { readonly kind: string; readonly keys: readonly string[] };
  /** Stage 2's plan, reading the cut's rows from the source bound to `sourceId`. */
  stage2(sourceId: string): LogicalPlan;
}

function refuse(reason: string): AnalysisError {
  return new AnalysisError(`This query cannot be split into a repartition stage: ${reason}.`, {
    code: 'REPARTITION_UNSUPPORTED',
    hint: 'declare the stream\'s partition key (source.partitionKey) when it is one of the state keys, run on one shard, '
      + 'or restructure the query to a single aggregation or deduplication over one stream.',
  });
}

function collect(p: LogicalPlan, pick: (n: LogicalPlan) => boolean, out: LogicalPlan[] = []): LogicalPlan[] {
  if (pick(p)) out.push(p);
  planChildren(p).forEach((c) => collect(c, pick, out));
  return out;
}

/** A copy of `node` with new children (same output attributes). */
export function withChildren(node: LogicalPlan, children: readonly LogicalPlan[]): LogicalPlan {
  switch (node.kind) {
    case 'StreamingRelation':
    case 'LocalRelation':
      return node;
    case 'Join':
    case 'Except':
    case 'Intersect':
      return { ...node, left: children[0]!, right: children[1]! };
    case 'Union':
      return { ...node, children: [...children] };
    default:
      return { ...node, child: children[0]! } as LogicalPlan;
  }
}

function replace(plan: LogicalPlan, target: LogicalPlan, replacement: LogicalPlan): LogicalPlan {
  if (plan === target) return replacement;
  const children = planChildren(plan);
  const replaced = children.map((c) => replace(c, target, replacement));
  return replaced.every((c, i) => c === children[i]) ? plan : withChildren(plan, replaced);
}

/** The cut-output ordinal `attribute` (an output of `node`) copies unchanged, or -1. */
function traceToCut(node: LogicalPlan, attribute: Attribute, cut: LogicalPlan): number {
  if (node === cut) return cut.output.findIndex((a) => a.id === attribute.id);
  if (node.kind === 'Project') {
    const index = node.output.findIndex((a) => a.id === attribute.id);
    if (index < 0) return -1;
    let e: Expr = node.exprs[index]!;
    while (e.kind === 'alias') e = e.child;
    if (e.kind !== 'column') return -1;
    try {
      const resolved = resolveName(e.name, node.child.output);
      return resolved.path.length === 0 ? traceToCut(node.child, resolved.attribute, cut) : -1;
    } catch {
      return -1;
    }
  }
  const child = planChildren(node).find((c) => c.output.some((a) => a.id === attribute.id));
  return child ? traceToCut(child, attribute, cut) : -1;
}

function keyAttributes(stateful: LogicalPlan): { child: LogicalPlan; keys: Attribute[]; names: string[]; positions: number[] } {
  if (stateful.kind === 'Deduplicate' || stateful.kind === 'StatefulProcessing') {
    return { child: stateful.child, keys: [...stateful.keys], names: stateful.keys.map((k) => k.name), positions: stateful.keys.map((_, i) => i) };
  }
  if (stateful.kind !== 'Aggregate') throw refuse('stream-stream joins are not repartitioned yet');
  const keys: Attribute[] = [];
  const names: string[] = [];
  const positions: number[] = [];
  for (const g of stateful.groupingExprs) {
    let e: Expr = g;
    while (e.kind === 'alias') e = e.child;
    if (e.kind === 'timeWindow' || e.kind === 'sessionWindow') { names.push('window'); continue; }
    names.push(e.kind === 'column' ? e.name : g.kind === 'alias' ? g.name : e.kind);
    if (e.kind !== 'column') continue;
    try {
      const resolved = resolveName(e.name, stateful.child.output);
      if (resolved.path.length === 0) {
        keys.push(resolved.attribute);
        positions.push(names.length - 1);
      }
    } catch {
      // A computed key cannot route; the other keys (or one partition) still give a correct answer.
    }
  }
  return { child: stateful.child, keys, names, positions };
}

/** Splits a streaming plan with one stateful operator over one source into the two stages. */
export function planRepartition(plan: LogicalPlan): RepartitionPlan {
  const statefulNodes = collect(plan, isStatefulOperator);
  if (statefulNodes.length !== 1) {
    throw refuse(statefulNodes.length === 0 ? 'it has no stateful operator' : `it has ${statefulNodes.length} stateful operators; one is supported`);
  }
  const stateful = statefulNodes[0]!;
  const { child, keys, names, positions } = keyAttributes(stateful);
  const sources = collect(stateful, (n) => n.kind === 'StreamingRelation');
  if (sources.length !== 1) throw refuse('the stateful operator reads more than one stream');
  // Cut below the lowest event-time watermark, so that stage 2 applies it to the rows it owns.
  const watermarks = collect(child, (n) => n.kind === 'EventTimeWatermark') as EventTimeWatermarkNode[];
  if (watermarks.length > 1) throw refuse('it has more than one event-time watermark');
  const watermark = watermarks[0];
  const cut = watermark ? watermark.child : child;
  if (collect(cut, (n) => n.kind === 'LocalRelation' || n.kind === 'Join' || n.kind === 'Union').length > 0) {
    throw refuse('the part below the stateful operator joins or unions other data');
  }
  const routing = keys.map((k, i) => ({ name: k.name, ordinal: traceToCut(child, k, cut), position: positions[i]! })).filter((r) => r.ordinal >= 0);
  const eventTime = watermark
    ? { ordinal: cut.output.findIndex((a) => a.id === watermark.eventTime.id), delayMs: watermark.delayMs }
    : null;
  if (eventTime && eventTime.ordinal < 0) throw refuse('the event-time column is computed above the stream');
  return {
    stage1: cut,
    cutOutput: cut.output,
    routingOrdinals: routing.map((r) => r.ordinal),
    routingColumns: routing.map((r) => r.name),
    routingKeyPositions: routing.map((r) => r.position),
    eventTime,
    statefulOperator: { kind: stateful.kind, keys: names },
    stage2: (sourceId) => {
      const relation: LogicalPlan = {
        kind: 'StreamingRelation', sourceId, schema: cut.output.map((a) => ({ name: a.name, type: a.type })), output: cut.output,
      };
      return replace(plan, cut, relation);
    },
  };
}
