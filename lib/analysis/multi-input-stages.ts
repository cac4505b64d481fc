/**
 * The repartition hop for a stateful operator fed by several inputs: a stream-stream join (its two
 * sides), or any stateful operator over several source streams. Each source stream is one hop
 * input: stage 1 runs, on each of its shards, the stateless part just above its relation (filters
 * and projections, below the event-time watermark) and routes the rows by the operator's keys, so
 * that rows that can match (same join key) meet on one internal shard. Stage 2 reads every input
 * from the internal shard it owns and runs the rest: the watermarks, the stateful operator and the
 * output. Each input's records carry its name and its source shards' event times, so every watermark
 * operator of stage 2 is computed from the shards of the streams it reads, and the operators'
 * watermarks combine by Spark's multiple-watermark policy.
 *
 *   orders shard   ─▶ [stage 1: decode, filter, project] ─┐ by join key
 *   payments shard ─▶ [stage 1: decode, filter, project] ─┴▶ internal stream ─▶ [stage 2: watermarks, join, ...] ─▶ sink
 *
 * Stateful operators above the first one (join → aggregate, aggregate over a union → dedup) chain
 * as a single stream's do (stages.ts `chainAbove`): stage 2 writes hop 2, routed by the next
 * operator's keys and carrying its output watermark, and so on. Join → join (a third stream joined
 * with a join's result) runs both joins in stage 2, every stream routed by one class of columns the
 * joins equate (`order_id = ref = sid`); without such a class, on one state partition.
 *
 * Single-stream chains of stateful operators are planned by stages.ts (planStages); this module
 * plans joins and queries over several streams, and `hopOfInput` gives each input as a stages Hop.
 */
import type { Attribute } from '../plan/attribute.js';
import type { Expr } from '../plan/expressions.js';
import { planChildren, type EventTimeWatermarkNode, type JoinNode, type LogicalPlan, type StreamingRelationNode } from '../plan/logical-plan.js';
import { AnalysisError } from '../errors/sluice-error.js';
import { bind, resolveName } from './binder.js';
import { splitJoinCondition } from './join-condition.js';
import { isStatefulOperator } from './stateful-operators.js';
import { chainAbove, traceToCut, withChildren, type Hop, type PlannedStage, type StatefulOperatorInfo } from './stages.js';

/** One source stream's side of the hop. */
export interface HopInput {
  /** The source stream's id in the plan; its records across the hop are tagged with it. */
  readonly sourceId: string;
  /** Stage 1 on this stream's shards: a plan over its relation alone. */
  readonly stage1: LogicalPlan;
  /** Stage 1's output: what crosses the hop for this input. */
  readonly cutOutput: readonly Attribute[];
  /** Cut-output ordinals of the routing keys, in the same key order for every input ([] = one partition). */
  readonly routingOrdinals: readonly number[];
  /** Cut-output ordinal of the event-time column whose maximum travels with the rows; null without a watermark. */
  readonly eventTimeOrdinal: number | null;
}

/** A watermark operator of stage 2: which inputs' shards it is computed from, and its delay. */
export interface HopWatermark {
  readonly inputs: readonly string[];
  readonly delayMs: number;
}

export interface MultiInputHopPlan {
  readonly inputs: readonly HopInput[];
  /** The routing keys as written (`order_id = ref` for a join). */
  readonly routingColumns: readonly string[];
  /**
   * Where each routing key sits among the stateful operator's keys (a join's equi-join keys, an
   * aggregate's grouping keys): a reshard of the internal stream routes state entries by them.
   */
  readonly routingKeyPositions: readonly number[];
  readonly watermarks: readonly HopWatermark[];
  readonly statefulOperator: { readonly kind: string; readonly keys: readonly string[] };
  /** Stage 2's stateful operators: the one the inputs feed, then those co-partitioned with it (none yet). */
  readonly stage2Operators: readonly StatefulOperatorInfo[];
  /** Hop 0 (as the first input's view) and one hop per later stateful operator, each carrying the watermark. */
  readonly hops: readonly Hop[];
  /** Stages 3 and up (index 2 on), each on the shards of the hop before it; [] when stage 2 writes the sink. */
  readonly later: readonly PlannedStage[];
  /** Stage 2's plan: each input read from the source id `relationIdOf(input)` gives it. */
  stage2(relationIdOf: (sourceId: string) => string): LogicalPlan;
}

function refuse(reason: string, hint?: string): AnalysisError {
  return new AnalysisError(`This query cannot be split into a repartition stage: ${reason}.`, {
    code: 'REPARTITION_UNSUPPORTED',
    hint: hint ?? 'join two different streams (or one stream and a static table), with one stateful operator: '
      + 'a stream-stream join, or one aggregation or deduplication over the streams.',
  });
}

function collect(p: LogicalPlan, pick: (n: LogicalPlan) => boolean, out: LogicalPlan[] = []): LogicalPlan[] {
  if (pick(p)) out.push(p);
  planChildren(p).forEach((c) => collect(c, pick, out));
  return out;
}

function parentOf(root: LogicalPlan, target: LogicalPlan): LogicalPlan | null {
  for (const child of planChildren(root)) {
    if (child === target) return root;
    const found = parentOf(child, target);
    if (found) return found;
  }
  return null;
}

/** Stage 1 takes the filters and projections right above the relation; a watermark stays in stage 2. */
function cutAbove(root: LogicalPlan, relation: StreamingRelationNode): LogicalPlan {
  let cut: LogicalPlan = relation;
  for (let parent = parentOf(root, cut); parent && (parent.kind === 'Filter' || parent.kind === 'Project'); parent = parentOf(root, cut)) {
    cut = parent;
  }
  return cut;
}

/** The key sets that must meet on one shard, each with the subtree it is an output of. */
function keySetsOf(stateful: LogicalPlan): { names: string[]; sides: { subtree: LogicalPlan; keys: (Attribute | null)[] }[] } {
  if (stateful.kind === 'Join') return joinKeySets(stateful);
  if (stateful.kind === 'Deduplicate') {
    return { names: stateful.keys.map((k) => k.name), sides: [{ subtree: stateful.child, keys: [...stateful.keys] }] };
  }
  if (stateful.kind === 'Aggregate') {
    const names: string[] = [];
    const keys: (Attribute | null)[] = [];
    for (const g of stateful.groupingExprs) {
      let e: Expr = g;
      while (e.kind === 'alias') e = e.child;
      names.push(e.kind === 'column' ? e.name : e.kind === 'timeWindow' || e.kind === 'sessionWindow' ? 'window' : g.kind === 'alias' ? g.name : e.kind);
      let key: Attribute | null = null;
      if (e.kind === 'column') {
        try {
          const resolved = resolveName(e.name, stateful.child.output);
          if (resolved.path.length === 0) key = resolved.attribute;
        } catch {
          key = null;
        }
      }
      keys.push(key);
    }
    return { names, sides: [{ subtree: stateful.child, keys }] };
  }
  throw refuse(`${stateful.kind} is not a stateful operator the hop knows`);
}

function joinKeySets(join: JoinNode): { names: string[]; sides: { subtree: LogicalPlan; keys: (Attribute | null)[] }[] } {
  const width = join.left.output.length;
  const split = splitJoinCondition(join.condition ? bind(join.condition, [...join.left.output, ...join.right.output]) : null, width);
  const names: string[] = [];
  const left: (Attribute | null)[] = [];
  const right: (Attribute | null)[] = [];
  for (const key of split.keys) {
    const l = key.left.kind === 'ref' && key.left.path.length === 0 ? key.left.attribute : null;
    const r = key.right.kind === 'ref' && key.right.path.length === 0 ? key.right.attribute : null;
    // Rows meet only if equal keys hash equally: same type on both sides, and NULL-safe keys (NULL meets NULL) route fine too.
    const usable = l !== null && r !== null && JSON.stringify(l.type) === JSON.stringify(r.type);
    names.push(`${l?.name ?? '?'} = ${r?.name ?? '?'}`);
    left.push(usable ? l : null);
    right.push(usable ? r : null);
  }
  return { names, sides: [{ subtree: join.left, keys: left }, { subtree: join.right, keys: right }] };
}

/**
 * Cuts a streaming plan over several inputs into the stage-1 part of each stream, stage 2 (the
 * lowest stateful operator, which every input feeds) and the chain above it. Refuses (REPARTITION_UNSUPPORTED) what it cannot stage,
 * naming the operator that blocks it.
 */
export function planMultiInputHop(plan: LogicalPlan): MultiInputHopPlan {
  // Children before parents. Stage 2 runs the lowest stateful operator every stream feeds (and the
  // joins below it, when co-partitioned with it); the ones above chain behind their own hops.
  const statefulNodes = collectPostOrder(plan, isStatefulOperator);
  if (statefulNodes.length === 0) throw refuse('it has no stateful operator');
  const relations = collect(plan, (n) => n.kind === 'StreamingRelation') as StreamingRelationNode[];
  const bySource = new Map<string, StreamingRelationNode[]>();
  for (const r of relations) bySource.set(r.sourceId, [...(bySource.get(r.sourceId) ?? []), r]);
  const cuts = new Map<string, LogicalPlan>();
  for (const [sourceId, nodes] of bySource) {
    if (nodes.length > 1) {
      throw refuse(`stream '${sourceId}' is read twice (a self-join); through the hop each stream feeds one input`,
        'declare the two event kinds as two source streams (definition.sources) and join them, or co-partition the stream by the join key.');
    }
    cuts.set(sourceId, cutAbove(plan, nodes[0]!));
  }
  const inputIds = [...cuts.keys()];
  const holds = (node: LogicalPlan, target: LogicalPlan): boolean => collect(node, (n) => n === target).length > 0;
  const stateful = statefulNodes.find((n) => inputIds.every((id) => holds(n, cuts.get(id)!)));
  if (!stateful) {
    const first = statefulNodes[0]!;
    const outside = inputIds.find((id) => !holds(first, cuts.get(id)!))!;
    throw refuse(`stream '${outside}' is used above the stateful operator ${describeOperator(first)}`,
      'stage one join (or one aggregation over several streams) first, then aggregations and deduplications of its result; or co-partition the streams by the key.');
  }
  const lower = statefulNodes.filter((n) => n !== stateful && holds(stateful, n));
  const blocking = [stateful, ...lower].find((n) => n.kind !== 'Join');
  if (lower.length > 0 && blocking) {
    throw refuse(`${describeOperator(blocking)} and the stream-stream join it feeds or reads would share a stage, which only joins on one key can`,
      'join the streams first, then aggregate or deduplicate the result; or co-partition the streams by the key.');
  }

  // Routing: a key position routes when, on every side, it traces to an unchanged column of every input below that side.
  const { names, sides } = keySetsOf(stateful);
  const ordinals = new Map<string, number[]>(inputIds.map((id) => [id, []]));
  const routingNames: string[] = [];
  const routingKeyPositions: number[] = [];
  if (lower.length > 0) {
    // Join → join in one stage: every stream routed by one class of keys the joins equate.
    const route = joinChainRouting([...lower, stateful] as JoinNode[], inputIds.map((id) => [id, cuts.get(id)!] as const));
    if (route) {
      routingNames.push(route.name);
      for (const id of inputIds) ordinals.get(id)!.push(route.ordinals.get(id)!);
    }
  } else {
    for (let k = 0; k < names.length; k++) {
      const found = new Map<string, number>();
      let usable = true;
      for (const side of sides) {
        const key = side.keys[k];
        for (const id of inputIds) {
          const cut = cuts.get(id)!;
          if (!holds(side.subtree, cut)) continue;
          const ordinal = key ? traceToCut(side.subtree, key, cut) : -1;
          if (ordinal < 0 || (found.has(id) && found.get(id) !== ordinal)) usable = false;
          found.set(id, ordinal);
        }
      }
      if (!usable || inputIds.some((id) => !found.has(id))) continue;
      routingNames.push(names[k]!);
      routingKeyPositions.push(k);
      for (const id of inputIds) ordinals.get(id)!.push(found.get(id)!);
    }
  }

  // Watermarks: each is computed from the shards of the streams below it; its column must cross the hop unchanged.
  const watermarkNodes = collect(plan, (n) => n.kind === 'EventTimeWatermark') as EventTimeWatermarkNode[];
  const eventTimeOrdinal = new Map<string, number>();
  const watermarks: HopWatermark[] = [];
  for (const w of watermarkNodes) {
    if (collect(stateful, (n) => n === w).length === 0) {
      throw refuse(`the watermark on ${w.eventTime.name} is declared above the stateful operator ${describeOperator(stateful)}`,
        'declare withWatermark on each stream before the first stateful operator: the later stages\' watermarks derive from the streams\' event times.');
    }
    const below = inputIds.filter((id) => collect(w.child, (n) => n === cuts.get(id)).length > 0);
    for (const id of below) {
      const ordinal = traceToCut(w.child, w.eventTime, cuts.get(id)!);
      if (ordinal < 0) throw refuse(`the event-time column ${w.eventTime.name} of stream '${id}' is computed above the filters and projections that run before the hop`);
      if (eventTimeOrdinal.has(id) && eventTimeOrdinal.get(id) !== ordinal) throw refuse(`stream '${id}' has two event-time columns`);
      eventTimeOrdinal.set(id, ordinal);
    }
    watermarks.push({ inputs: below, delayMs: w.delayMs });
  }

  const inputs: HopInput[] = inputIds.map((id) => ({
    sourceId: id,
    stage1: cuts.get(id)!,
    cutOutput: cuts.get(id)!.output,
    routingOrdinals: ordinals.get(id)!,
    eventTimeOrdinal: eventTimeOrdinal.get(id) ?? null,
  }));
  const partial = {
    inputs,
    routingColumns: routingNames,
    // Joins chained in one stage route by a class of keys no single join's key list holds: their state merges, never splits.
    routingKeyPositions,
    watermarks,
    statefulOperator: { kind: describeOperator(stateful), keys: names },
  };
  // The stateful operators above: each behind its own hop from stage 2 on, as a single stream's chain.
  const chain = chainAbove(plan, statefulNodes.filter((n) => !lower.includes(n)), { cut: null, hop: hopOf(partial, inputs[0]!) });
  return {
    ...partial,
    hops: chain.hops,
    later: chain.later,
    stage2Operators: [...lower.map((n) => ({ kind: describeOperator(n), keys: keySetsOf(n).names })), ...chain.firstOperators],
    stage2: (relationIdOf) => {
      const replace = (node: LogicalPlan): LogicalPlan => {
        const input = inputs.find((i) => i.stage1 === node);
        if (input) {
          return {
            kind: 'StreamingRelation', sourceId: relationIdOf(input.sourceId),
            schema: input.cutOutput.map((a) => ({ name: a.name, type: a.type })), output: input.cutOutput,
          };
        }
        const children = planChildren(node);
        const replaced = children.map(replace);
        return replaced.every((c, i) => c === children[i]) ? node : withChildren(node, replaced);
      };
      return replace(chain.firstTop);
    },
  };
}

/**
 * The routing of joins chained in one stage: the attributes their usable equi-keys equate form
 * classes; a class routes when every join equates a pair of it and every stream has a column of it
 * (unchanged below its stage-1 cut). Rows that can match in any of the joins then meet on one
 * shard: NULL never equals anything, so an outer join's NULL-padded rows need not meet. Null when
 * no class serves (the caller routes everything to one partition).
 */
function joinChainRouting(joins: readonly JoinNode[], inputs: readonly (readonly [string, LogicalPlan])[]): { name: string; ordinals: Map<string, number> } | null {
  const parent = new Map<number, number>();
  const find = (id: number): number => {
    while (parent.has(id) && parent.get(id) !== id) id = parent.get(id)!;
    return id;
  };
  const pairs = joins.map((j) => {
    const { sides } = joinKeySets(j);
    return sides[0]!.keys.map((l, k) => [l, sides[1]!.keys[k]!] as const)
      .filter((p): p is readonly [Attribute, Attribute] => p[0] !== null && p[1] !== null)
      .map(([l, r]) => ({ join: j, l, r }));
  });
  for (const { l, r } of pairs.flat()) parent.set(find(l.id), find(r.id));
  const classes = [...new Set(pairs.flat().map((p) => find(p.l.id)))];
  for (const cls of classes) {
    if (!pairs.every((ps) => ps.some((p) => find(p.l.id) === cls))) continue;
    const ordinals = new Map<string, number>();
    for (const [id, cut] of inputs) {
      for (const { join, l, r } of pairs.flat().filter((p) => find(p.l.id) === cls)) {
        const [subtree, key] = collect(join.left, (n) => n === cut).length > 0 ? [join.left, l] : [join.right, r];
        const ordinal = collect(subtree, (n) => n === cut).length > 0 ? traceToCut(subtree, key, cut) : -1;
        if (ordinal >= 0 && !ordinals.has(id)) ordinals.set(id, ordinal);
      }
    }
    if (inputs.every(([id]) => ordinals.has(id))) {
      const members = pairs.flat().filter((p) => find(p.l.id) === cls).flatMap((p) => [p.l.name, p.r.name]);
      return { name: [...new Set(members)].join(' = '), ordinals };
    }
  }
  return null;
}

function describeOperator(node: LogicalPlan): string {
  return node.kind === 'Join' ? `${node.joinType} Join` : node.kind;
}

function collectPostOrder(p: LogicalPlan, pick: (n: LogicalPlan) => boolean, out: LogicalPlan[] = []): LogicalPlan[] {
  planChildren(p).forEach((c) => collectPostOrder(c, pick, out));
  if (pick(p)) out.push(p);
  return out;
}

/**
 * One input's side of the hop in the stage planner's terms (hop 1 of a two-stage plan), so the
 * runtime writes and reads it like any hop: its rows, routing and event time, tagged by the sink.
 */
export function hopOfInput(hop: MultiInputHopPlan, input: HopInput): Hop {
  return hopOf(hop, input);
}

type HopShape = Pick<MultiInputHopPlan, 'routingColumns' | 'routingKeyPositions' | 'watermarks' | 'statefulOperator'>;

function hopOf(hop: HopShape, input: HopInput): Hop {
  const delayMs = hop.watermarks.find((w) => w.inputs.includes(input.sourceId))?.delayMs ?? 0;
  return {
    index: 0,
    output: input.cutOutput,
    routingOrdinals: input.routingOrdinals,
    routingColumns: hop.routingColumns,
    routingKeyPositions: hop.routingKeyPositions,
    eventTime: input.eventTimeOrdinal === null ? null : { ordinal: input.eventTimeOrdinal, delayMs },
    carries: 'max-event-time',
    operator: hop.statefulOperator,
    partial: null,
  };
}
