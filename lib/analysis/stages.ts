/**
 * The plan of stages, Spark's shuffles for Kinesis: every stateful operator whose state keys are
 * not co-partitioned with its input gets a hop (an internal Kinesis stream) routed by its own keys
 * (no routable key: one partition). Stage 1 runs on each source shard: the stateless part below
 * the event-time watermark. Each later stage runs on the shards of the hop before it: its stateful
 * operator(s), the stateless part above them up to the next hop, and, in the last stage, the
 * output mode and the sink.
 *
 *   source shard ─▶ [stage 1: decode, filter, project] ─▶ hop 1 (by key) ─▶ [stage 2: dedup] ─▶ hop 2 ─▶ [stage 3: aggregate] ─▶ sink
 *
 * Watermarks across hops follow Spark's rule for chained stateful operators (one global watermark,
 * propagated through the operators; per operator one for late rows, the previous batch's, and one
 * for eviction, this batch's): hop 1 carries each source shard's maximum event time and stage 2
 * computes the global watermark from it; a later hop carries the watermark its sending stage ran
 * with, and the receiving stage runs with the minimum over the senders (delay 0), so no
 * partition evicts what an upstream partition may still emit.
 *
 * A stage is "stateful operator(s) + the routing keys of its input hop". A join (or an operator
 * over several streams) reads a multi-input hop 1 (multi-input-stages.ts); the operators above it
 * chain through `chainAbove`, shared by both planners.
 */
import type { Attribute } from '../plan/attribute.js';
import type { Expr } from '../plan/expressions.js';
import { planChildren, type EventTimeWatermarkNode, type LogicalPlan } from '../plan/logical-plan.js';
import { AnalysisError } from '../errors/sluice-error.js';
import { resolveName } from './binder.js';
import { isStatefulOperator } from './stateful-operators.js';

export interface StatefulOperatorInfo {
  readonly kind: string;
  /** The operator's keys as written (`window` for a time window). */
  readonly keys: readonly string[];
}

/** What crosses from stage `index` to stage `index + 1` (0-based). */
export interface Hop {
  readonly index: number;
  /** The sending stage's output: what crosses the hop, and the receiving stage's input. */
  readonly output: readonly Attribute[];
  /** Hop-output ordinals of the columns that route a row to its partition ([] = one partition). */
  readonly routingOrdinals: readonly number[];
  readonly routingColumns: readonly string[];
  /** Where each routing column sits among the receiving stage's first operator's keys (reshards route state by them). */
  readonly routingKeyPositions: readonly number[];
  /** Why a reshard of this hop's stream cannot split the receiving stage's state (absent: it can). */
  readonly stateUnroutable?: string;
  /**
   * Per stateful operator of the receiving stage (operator-id order), where the routing values sit
   * among its keys (null: nowhere). Absent: every operator by `routingKeyPositions`.
   */
  readonly stateKeyPositions?: readonly (readonly number[] | null)[];
  /**
   * Hop 0: the event-time column (hop-output ordinal) and delay; each record carries its batch's
   * maximum event time. Later hops carry the sending stage's batch watermark instead (delay 0).
   */
  readonly eventTime: { readonly ordinal: number; readonly delayMs: number } | null;
  readonly carries: 'max-event-time' | 'watermark';
  /** The receiving stage's stateful operator, for explain. */
  readonly operator: StatefulOperatorInfo;
  /**
   * Partial aggregation before the hop (Spark's partial/final aggregation): the sending stage
   * ships one row per group and batch, `[max event time, ...key values, ...buffers]`, and the
   * receiving aggregate merges them. Null: the rows themselves cross.
   */
  readonly partial: PartialAggregation | null;
}

export interface PartialAggregation {
  readonly groupingExprs: readonly Expr[];
  readonly aggregateExprs: readonly Expr[];
  /** The attributes the expressions are bound to (the hop's rows before grouping). */
  readonly input: readonly Attribute[];
}

export interface StagePlanOptions {
  /** Ship partial aggregates over the first hop when the aggregate allows it (default true). */
  readonly partialAggregation?: boolean;
}

export interface PlannedStage {
  readonly index: number;
  /** The hop it reads (null: the source stream). */
  readonly input: Hop | null;
  /** The hop it writes (null: the query's sink). */
  readonly output: Hop | null;
  readonly operators: readonly StatefulOperatorInfo[];
  /** The stage's plan; a stage reading a hop names it by `sourceId`. */
  plan(sourceId: string): LogicalPlan;
}

export interface StagePlan {
  readonly stages: readonly PlannedStage[];
  readonly hops: readonly Hop[];
}

function unalias(e: Expr): Expr {
  return e.kind === 'alias' ? unalias(e.child) : e;
}

function refuse(reason: string, operator?: string, hint?: string): AnalysisError {
  return new AnalysisError(`This query cannot be split into repartition stages: ${reason}.`, {
    code: 'REPARTITION_UNSUPPORTED',
    hint: hint ?? 'declare the stream\'s partition key (source.partitionKey) when it is one of the state keys, run on one shard, '
      + 'or restructure the query as a chain of aggregations and deduplications over one stream.',
    ...(operator ? { context: { operator } } : {}),
  });
}

/** Every node, parents before children (the order operator ids are given in). */
function preOrder(p: LogicalPlan, out: LogicalPlan[] = []): LogicalPlan[] {
  out.push(p);
  planChildren(p).forEach((c) => preOrder(c, out));
  return out;
}

/** Nodes `pick` selects, children before parents (the lowest stateful operator first). */
function collect(p: LogicalPlan, pick: (n: LogicalPlan) => boolean, out: LogicalPlan[] = []): LogicalPlan[] {
  planChildren(p).forEach((c) => collect(c, pick, out));
  if (pick(p)) out.push(p);
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

/**
 * The cut-output ordinal `attribute` (an output of `node`) copies unchanged, or -1. Only branches
 * that hold the cut are followed: below a union or a join, the attribute's copy is in one of them.
 */
export function traceToCut(node: LogicalPlan, attribute: Attribute, cut: LogicalPlan): number {
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
  const holdsCut = (c: LogicalPlan): boolean => collect(c, (n) => n === cut).length > 0;
  if (node.kind === 'Union') {
    // A union's output is its first child's attributes; position i of every child feeds it.
    const index = node.output.findIndex((a) => a.id === attribute.id);
    const results = node.children.map((c) => (holdsCut(c) ? traceToCut(c, c.output[index]!, cut) : null));
    return results.find((r) => r !== null) ?? -1;
  }
  const child = planChildren(node).find((c) => c.output.some((a) => a.id === attribute.id) && holdsCut(c));
  return child ? traceToCut(child, attribute, cut) : -1;
}

export interface OperatorKeys { child: LogicalPlan; keys: Attribute[]; names: string[]; positions: number[] }

export function keyAttributes(stateful: LogicalPlan): OperatorKeys {
  if (stateful.kind === 'Deduplicate' || stateful.kind === 'StatefulProcessing') {
    return { child: stateful.child, keys: [...stateful.keys], names: stateful.keys.map((k) => k.name), positions: stateful.keys.map((_, i) => i) };
  }
  if (stateful.kind !== 'Aggregate') {
    throw refuse('stream-stream joins are not repartitioned yet', 'Join',
      'co-partition both sides by the join key (declare source.partitionKey as the join key), or run on one shard.');
  }
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

function routingOf(op: OperatorKeys, cut: LogicalPlan): { name: string; ordinal: number; position: number }[] {
  return op.keys.map((k, i) => ({ name: k.name, ordinal: traceToCut(op.child, k, cut), position: op.positions[i]! })).filter((r) => r.ordinal >= 0);
}

const MULTI_CHILD = new Set(['Join', 'Union', 'Except', 'Intersect']);

/**
 * Cuts a streaming plan over one source into stages: one hop below each stateful operator that is
 * not co-partitioned with the stage before it.
 */
export function planStages(plan: LogicalPlan, options: StagePlanOptions = {}): StagePlan {
  const statefulNodes = collect(plan, isStatefulOperator);
  if (statefulNodes.length === 0) throw refuse('it has no stateful operator');
  const joins = statefulNodes.find((n) => n.kind === 'Join');
  if (joins) keyAttributes(joins); // refuses, naming the join
  const first = statefulNodes[0]!;
  const firstKeys = keyAttributes(first);
  if (collect(first, (n) => n.kind === 'StreamingRelation').length !== 1) throw refuse('the stateful operator reads more than one stream', first.kind);
  const allWatermarks = collect(plan, (n) => n.kind === 'EventTimeWatermark') as EventTimeWatermarkNode[];
  if (allWatermarks.length > 1) throw refuse('it has more than one event-time watermark', undefined, 'declare one withWatermark on the stream, below the first stateful operator.');
  const watermark = allWatermarks[0];
  if (watermark && collect(firstKeys.child, (n) => n === watermark).length === 0) {
    throw refuse(`its watermark is declared above the first stateful operator (${first.kind})`, first.kind,
      'declare withWatermark on the stream before the first stateful operator: every stage\'s watermark derives from the source\'s event time.');
  }
  // Hop 0: below the watermark, so that stage 2 applies it to the rows it owns.
  const cut0 = watermark ? watermark.child : firstKeys.child;
  if (collect(cut0, (n) => n.kind === 'LocalRelation' || MULTI_CHILD.has(n.kind)).length > 0) {
    throw refuse('the part below the stateful operator joins or unions other data', first.kind);
  }
  const eventTime = watermark ? { ordinal: cut0.output.findIndex((a) => a.id === watermark.eventTime.id), delayMs: watermark.delayMs } : null;
  if (eventTime && eventTime.ordinal < 0) throw refuse('the event-time column is computed above the stream', first.kind);

  // Partial aggregation fits an aggregate right above the hop (or its watermark): its input is the hop's rows.
  const partialAggregate = options.partialAggregation !== false && first.kind === 'Aggregate'
    && !first.groupingExprs.some((g) => unalias(g).kind === 'sessionWindow')
    && (first.child === cut0 || (first.child === watermark && watermark.child === cut0))
    ? first : null;
  const routing = routingOf(firstKeys, cut0);
  const hop0: Hop = {
    partial: partialAggregate && partialAggregate.kind === 'Aggregate'
      ? { groupingExprs: partialAggregate.groupingExprs, aggregateExprs: partialAggregate.aggregateExprs, input: cut0.output }
      : null,
    index: 0, output: cut0.output,
    routingOrdinals: routing.map((r) => r.ordinal), routingColumns: routing.map((r) => r.name), routingKeyPositions: routing.map((r) => r.position),
    eventTime, carries: 'max-event-time',
    operator: { kind: first.kind, keys: firstKeys.names },
  };
  const chain = chainAbove(plan, statefulNodes, { cut: cut0, hop: hop0 });

  /** The receiving stage's plan over partial aggregates: the aggregate (and its watermark) merge them. */
  const partialStagePlan = (top: LogicalPlan, relation: LogicalPlan): LogicalPlan => {
    const agg = partialAggregate!;
    const below: LogicalPlan = agg.child === watermark ? { ...watermark, partialInput: true, child: relation } : relation;
    return replace(top, agg, { ...agg, partialInput: true, child: below } as LogicalPlan);
  };
  const stage1: PlannedStage = {
    index: 1, input: chain.hops[0]!, output: chain.hops[1] ?? null, operators: chain.firstOperators,
    plan: (sourceId: string) => (hop0.partial
      ? partialStagePlan(chain.firstTop, relationOver(hop0, sourceId))
      : replace(chain.firstTop, cut0, relationOver(hop0, sourceId))),
  };
  return {
    stages: [{ index: 0, input: null, output: hop0, operators: [], plan: () => cut0 }, stage1, ...chain.later],
    hops: chain.hops,
  };
}

/** A hop's rows as the receiving stage's relation; a hop carrying a watermark makes its operators use it. */
function relationOver(hop: Hop, sourceId: string): LogicalPlan {
  const relation: LogicalPlan = {
    kind: 'StreamingRelation', sourceId, schema: hop.output.map((a) => ({ name: a.name, type: a.type })), output: hop.output,
  };
  if (hop.carries !== 'watermark') return relation;
  const marked = hop.output.find((a) => a.eventTimeDelayMs !== null);
  if (!marked) return relation;
  return { kind: 'EventTimeWatermark', child: relation, eventTime: marked, delayMs: 0, delayText: '0 seconds', output: hop.output };
}

/** The stages after the first stateful one: its own top, its operators, every hop (hop 1 first) and the later stages. */
export interface ChainAbove {
  /** Where the first state stage's plan ends (the child of the next hop's operator, or the root). */
  readonly firstTop: LogicalPlan;
  readonly firstOperators: readonly StatefulOperatorInfo[];
  /** Hop 0 (as given) and one hop per later stateful operator not co-partitioned with its input. */
  readonly hops: readonly Hop[];
  /** Stages 2 and up, each reading the hop before it. */
  readonly later: readonly PlannedStage[];
}

/**
 * Plans the chain above the first stateful operator `statefulNodes[0]` (children before parents):
 * each later stateful operator joins its input's stage when its keys are co-partitioned with that
 * stage's hop, else starts a stage behind a new hop that carries the sending stage's watermark.
 * `first.cut` is what hop 0 cuts below the first operator; null when hop 0 has several inputs (a
 * join, or an operator over several streams), whose routing the next operator's keys cannot be
 * checked against (an outer join's NULL-padded keys route elsewhere): it always gets a hop.
 */
export function chainAbove(
  plan: LogicalPlan, statefulNodes: readonly LogicalPlan[],
  first: {
    cut: LogicalPlan | null; hop: Hop; coPartitioned?: (node: LogicalPlan, keys: OperatorKeys) => boolean;
    /** Where an operator co-partitioned with a multi-input hop holds its routed values (the planner that routed it knows). */
    keyPositions?: (node: LogicalPlan) => number[] | null;
  },
): ChainAbove {
  // Stateful operators must form one chain: each is below the next, with nothing joining in between.
  for (let i = 1; i < statefulNodes.length; i++) {
    const op = statefulNodes[i]!;
    const below = statefulNodes[i - 1]!;
    const between = collect(op, (n) => MULTI_CHILD.has(n.kind) && n !== below && collect(n, (m) => m === below).length > 0);
    if (collect(op, (n) => n === below).length === 0 || between.length > 0) {
      throw refuse(`the stateful operators ${describe(below)} and ${describe(op)} are not one chain (another input joins in between)`, describe(op),
        'stage a chain of stateful operators over one join or one set of streams: a join (or an aggregation over several streams) first, then aggregations and deduplications of its result.');
    }
  }
  // The first stage reads hop `base` (0, or 1 when a stage before the join only forwards its inputs).
  const base = first.hop.index;
  const hops: Hop[] = [first.hop];
  const cuts: (LogicalPlan | null)[] = [first.cut];
  const operatorsOf: StatefulOperatorInfo[][] = [[{ kind: describe(statefulNodes[0]!), keys: first.hop.operator.keys }]];
  // Each stage's operators, and where each holds the values its stage's rows are routed by.
  const nodesOf: LogicalPlan[][] = [[statefulNodes[0]!]];
  const positions = new Map<LogicalPlan, readonly number[] | null>([[statefulNodes[0]!, first.hop.routingKeyPositions]]);
  for (const node of statefulNodes.slice(1)) {
    const op = keyAttributes(node);
    const input = hops[hops.length - 1]!;
    const inputCut = cuts[cuts.length - 1]!;
    // Co-partitioned with the stage's input when every routing column is one of the keys, unchanged;
    // behind a multi-input hop (no single cut) the planner that routed it decides.
    const coPartitioned = inputCut !== null
      ? input.routingOrdinals.every((o) => new Set(routingOf(op, inputCut).map((r) => r.ordinal)).has(o))
      : hops.length === 1 && first.coPartitioned !== undefined && first.coPartitioned(node, op);
    if (!coPartitioned) {
      const routing = routingOf(op, op.child);
      hops.push({
        partial: null,
        index: base + hops.length, output: op.child.output,
        routingOrdinals: routing.map((r) => r.ordinal), routingColumns: routing.map((r) => r.name), routingKeyPositions: routing.map((r) => r.position),
        eventTime: null, carries: 'watermark',
        operator: { kind: node.kind, keys: op.names },
      });
      cuts.push(op.child);
      operatorsOf.push([]);
      nodesOf.push([]);
      positions.set(node, routing.map((r) => r.position));
    } else if (inputCut !== null) {
      const routed = routingOf(op, inputCut);
      const found = input.routingOrdinals.map((o) => routed.find((r) => r.ordinal === o)?.position ?? -1);
      positions.set(node, found.every((p) => p >= 0) ? found : null);
    } else {
      positions.set(node, first.keyPositions?.(node) ?? null);
    }
    operatorsOf[operatorsOf.length - 1]!.push({ kind: node.kind, keys: op.names });
    nodesOf[nodesOf.length - 1]!.push(node);
  }
  // The receiving stage's operators in operator-id order (pre-order of its plan): a co-partitioned
  // operator can hold the routed values at other positions than the stage's first (dedup → window).
  const stageTop = (k: number): LogicalPlan => cuts[k + 1] ?? plan;
  hops.splice(0, hops.length, ...hops.map((hop, k): Hop => ({
    ...hop, stateKeyPositions: preOrder(stageTop(k)).filter((n) => nodesOf[k]!.includes(n)).map((n) => positions.get(n) ?? null),
  })));
  // Stage k (k ≥ 1) runs from cut k-1 to cut k (the last one: to the root).
  const topOf = (k: number): LogicalPlan => cuts[k] ?? plan;
  const later = hops.slice(1).map((input, i): PlannedStage => {
    const k = i + 2;
    const cut = cuts[k - 1]!;
    const top = k < cuts.length ? topOf(k) : plan;
    return {
      index: base + k, input, output: hops[k] ?? null, operators: operatorsOf[k - 1]!,
      plan: (sourceId: string) => replace(top, cut, relationOver(input, sourceId)),
    };
  });
  return { firstTop: cuts.length > 1 ? cuts[1]! : plan, firstOperators: operatorsOf[0]!, hops, later };
}

function describe(node: LogicalPlan): string {
  return node.kind === 'Join' ? `${node.joinType} Join` : node.kind;
}
