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
 * joins equate (`order_id = ref = sid`); without such a class (or when a join compares with `<=>`
 * a column a lower outer join pads with NULL), the top join gets its own hop (join-exchange.ts).
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
import { chainAbove, keyAttributes, traceToCut, withChildren, type Hop, type OperatorKeys, type PlannedStage, type StatefulOperatorInfo } from './stages.js';
import { joinExchange } from './join-exchange.js';

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
  /** Stage 2 only forwards its rows to a join behind hop 2 (routed by that join's key, to share the load). */
  readonly forwarded?: boolean;
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
  /** Why a reshard of the internal stream cannot split stage 2's state (absent: it can, by stateKeyPositions). */
  readonly stateUnroutable?: string;
  /**
   * Per stateful operator of stage 2 (operator-id order): where the values its input rows are routed
   * by sit among its keys, so that a reshard routes each operator's entries as the hop routed the rows
   * that made them. Each side of a split join, each join of a chain and an operator co-partitioned
   * above a join have their own.
   */
  readonly stateKeyPositions: readonly (readonly number[] | null)[];
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

function joinKeySets(join: JoinNode): { names: string[]; sides: { subtree: LogicalPlan; keys: (Attribute | null)[] }[]; nullSafe: boolean[] } {
  const width = join.left.output.length;
  const split = splitJoinCondition(join.condition ? bind(join.condition, [...join.left.output, ...join.right.output]) : null, width);
  const nullSafe = split.keys.map((k) => k.nullSafe);
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
  return { names, sides: [{ subtree: join.left, keys: left }, { subtree: join.right, keys: right }], nullSafe };
}

/**
 * Whether `attribute` (an output of `node`) can be NULL on a row an outer join below pads, or is
 * computed (then its value need not be the one its row was routed by). Such a row is routed by the
 * column of its preserved side, not by this one.
 */
function mayBePadded(node: LogicalPlan, attribute: Attribute): boolean {
  if (node.kind === 'Join') {
    const inLeft = node.left.output.some((a) => a.id === attribute.id);
    const padded = inLeft
      ? node.joinType === 'right_outer' || node.joinType === 'full_outer'
      : node.joinType === 'left_outer' || node.joinType === 'full_outer';
    return padded || mayBePadded(inLeft ? node.left : node.right, attribute);
  }
  if (node.kind === 'Project') {
    const index = node.output.findIndex((a) => a.id === attribute.id);
    let e: Expr = node.exprs[index]!;
    while (e.kind === 'alias') e = e.child;
    if (e.kind !== 'column') return true;
    try {
      const resolved = resolveName(e.name, node.child.output);
      return resolved.path.length > 0 || mayBePadded(node.child, resolved.attribute);
    } catch {
      return true;
    }
  }
  return planChildren(node).filter((c) => c.output.some((a) => a.id === attribute.id)).some((c) => mayBePadded(c, attribute));
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
  const route = lower.length > 0 && !blocking ? routeGroup(stateful, lower, inputIds, cuts) : null;
  // A join over operators it cannot share a stage with (an aggregate, or joins on other keys) gets
  // its own hop: the stage below runs them and forwards the rest (join-exchange.ts).
  const split = lower.length > 0 && stateful.kind === 'Join' && (blocking || route?.names.length === 0)
    ? splitAtJoin(plan, stateful, statefulNodes, inputIds, cuts)
    : null;
  if (lower.length > 0 && blocking && !split) {
    throw refuse(`${describeOperator(blocking)} and the stream-stream join it feeds or reads would share a stage, which only joins on one key can`,
      'join the streams first, then aggregate or deduplicate the result; or co-partition the streams by the key.');
  }
  const routed = split?.routing ?? route ?? routeGroup(stateful, [], inputIds, cuts);
  const { names } = keySetsOf(stateful);
  const ordinals = routed.ordinals;
  const routingNames = routed.names;
  // Stage 2's operators each route their state by their own positions: a split runs each side of
  // the join on its own routing, a chain's joins hold the class at different positions.
  const operatorPositions = new Map(routed.operatorPositions);
  const stateKeyPositionsOf = (root: LogicalPlan): (number[] | null)[] => collect(root, isStatefulOperator).map((n) => {
    const known = operatorPositions.get(n);
    if (known) return known;
    // Co-partitioned above the join (it runs in stage 2 without a hop): its keys hold the join's routed keys.
    return stateful.kind === 'Join' && routed.positions ? positionsAboveJoin(stateful, routed.positions, n) : null;
  });
  const stateUnroutableOf = (positions: readonly (number[] | null)[]): string | undefined => (positions.some((p) => p === null)
    ? 'a stateful operator of stage 2 does not hold the values its rows are routed by among its keys' : undefined);

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
    ...(split?.forwarded.includes(id) ? { forwarded: true } : {}),
  }));
  const partial = {
    inputs,
    routingColumns: routingNames,
    routingKeyPositions: routed.positions ?? [],
    watermarks,
    statefulOperator: split?.operator ?? { kind: describeOperator(stateful), keys: names },
  };
  const replaceInputs = (relationIdOf: (sourceId: string) => string) => {
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
    return replace;
  };
  if (split) {
    const stateKeyPositions = stateKeyPositionsOf(split.exchange);
    const stateUnroutable = stateUnroutableOf(stateKeyPositions);
    const routedPartial = { ...partial, stateKeyPositions, ...(stateUnroutable ? { stateUnroutable } : {}) };
    // Stage 2 runs what is below the join and writes the exchange; stage 3 runs the join and chains on.
    const chain = chainAbove(split.plan, split.above, {
      cut: null, hop: split.hop, coPartitioned: (_node, keys) => keepsJoinRouting(split.join, split.keyPairs, keys),
      keyPositions: (node) => positionsAboveJoin(split.join, split.hop.routingKeyPositions, node),
    });
    const joinStage: PlannedStage = {
      index: 2, input: chain.hops[0]!, output: chain.hops[1] ?? null, operators: chain.firstOperators,
      plan: (sourceId) => replaceNode(chain.firstTop, split.exchange, { kind: 'StreamingRelation', sourceId, schema: split.hop.output.map((a) => ({ name: a.name, type: a.type })), output: split.hop.output }),
    };
    return {
      ...routedPartial,
      hops: [hopOf(routedPartial, inputs[0]!), ...chain.hops],
      later: [joinStage, ...chain.later],
      stage2Operators: split.below.map((n) => ({ kind: describeOperator(n), keys: keySetsOf(n).names })),
      stage2: (relationIdOf) => replaceInputs(relationIdOf)(split.exchange),
    };
  }
  // The stateful operators above: each behind its own hop from stage 2 on, as a single stream's chain.
  // One directly above a single join whose routing its keys keep runs in stage 2 (no hop).
  const chain = chainAbove(plan, statefulNodes.filter((n) => !lower.includes(n)), {
    cut: null, hop: hopOf(partial, inputs[0]!),
    ...(stateful.kind === 'Join' && lower.length === 0 && routingNames.length > 0
      ? {
        coPartitioned: (_node: LogicalPlan, keys: OperatorKeys) => keepsJoinRouting(stateful, routedPairs(stateful), keys),
        keyPositions: (node: LogicalPlan) => positionsAboveJoin(stateful, routed.positions ?? [], node),
      }
      : {}),
  });
  const stateKeyPositions = stateKeyPositionsOf(chain.firstTop);
  const stateUnroutable = stateUnroutableOf(stateKeyPositions);
  const routedPartial = { ...partial, stateKeyPositions, ...(stateUnroutable ? { stateUnroutable } : {}) };
  return {
    ...routedPartial,
    // Hop 0 as the chain was planned with, now with how stage 2's state routes.
    hops: [hopOf(routedPartial, inputs[0]!), ...chain.hops.slice(1)],
    later: chain.later,
    stage2Operators: [...lower.map((n) => ({ kind: describeOperator(n), keys: keySetsOf(n).names })), ...chain.firstOperators],
    stage2: (relationIdOf) => {
      return replaceInputs(relationIdOf)(chain.firstTop);
    },
  };
}

/**
 * The routing of joins chained in one stage: the attributes their usable equi-keys equate form
 * classes; a class routes when every join equates a pair of it and every stream has a column of it
 * (unchanged below its stage-1 cut). Rows that can match in any of the joins then meet on one
 * shard: NULL never equals anything under `=`, so an outer join's NULL-padded rows need not meet;
 * a class a join compares with `<=>` on a column an outer join below pads does not serve. Null when
 * no class serves (the caller gives the top join its own hop, or routes to one partition).
 */
function joinChainRouting(
  joins: readonly JoinNode[], inputs: readonly (readonly [string, LogicalPlan])[],
): { name: string; ordinals: Map<string, number>; positions: Map<JoinNode, number> } | null {
  const parent = new Map<number, number>();
  const find = (id: number): number => {
    while (parent.has(id) && parent.get(id) !== id) id = parent.get(id)!;
    return id;
  };
  const pairs = joins.map((j) => {
    const { sides, nullSafe } = joinKeySets(j);
    return sides[0]!.keys.map((l, k) => ({ join: j, l, r: sides[1]!.keys[k]!, position: k, nullSafe: nullSafe[k]! }))
      .filter((p): p is { join: JoinNode; l: Attribute; r: Attribute; position: number; nullSafe: boolean } => p.l !== null && p.r !== null);
  });
  for (const { l, r } of pairs.flat()) parent.set(find(l.id), find(r.id));
  const classes = [...new Set(pairs.flat().map((p) => find(p.l.id)))];
  // Under `<=>` a NULL the lower outer join padded matches the other side's NULL keys, which are
  // routed to the NULL key's shard while the padded row sits where its preserved column sent it:
  // such a join routes by its own key instead (Spark shuffles before it by coalesce/isnull of it).
  const paddedNullSafe = (p: { join: JoinNode; l: Attribute; r: Attribute; nullSafe: boolean }): boolean =>
    p.nullSafe && (mayBePadded(p.join.left, p.l) || mayBePadded(p.join.right, p.r));
  for (const cls of classes) {
    if (!pairs.every((ps) => ps.some((p) => find(p.l.id) === cls))) continue;
    if (pairs.flat().some((p) => find(p.l.id) === cls && paddedNullSafe(p))) continue;
    const ordinals = new Map<string, number>();
    for (const [id, cut] of inputs) {
      for (const { join, l, r } of pairs.flat().filter((p) => find(p.l.id) === cls)) {
        const [subtree, key] = collect(join.left, (n) => n === cut).length > 0 ? [join.left, l] : [join.right, r];
        const ordinal = collect(subtree, (n) => n === cut).length > 0 ? traceToCut(subtree, key, cut) : -1;
        if (ordinal >= 0 && !ordinals.has(id)) ordinals.set(id, ordinal);
      }
    }
    if (inputs.every(([id]) => ordinals.has(id))) {
      const members = pairs.flat().filter((p) => find(p.l.id) === cls);
      const positions = new Map(joins.map((j) => [j, members.find((p) => p.join === j)!.position]));
      return { name: [...new Set(members.flatMap((p) => [p.l.name, p.r.name]))].join(' = '), ordinals, positions };
    }
  }
  return null;
}

type Cuts = ReadonlyMap<string, LogicalPlan>;
/**
 * `positions`: where each routing key sits among the stateful operator's keys (absent when no one key
 * list routes its state); `operatorPositions`: the same for each stateful operator the routing serves.
 */
interface Routing { names: string[]; ordinals: Map<string, number[]>; positions?: number[]; operatorPositions: Map<LogicalPlan, number[]> }

const holdsNode = (node: LogicalPlan, target: LogicalPlan): boolean => collect(node, (n) => n === target).length > 0;

/**
 * How the inputs `ids` are routed so that the rows `stateful` (and the joins `lower` below it, in one
 * stage) must see together meet on one shard. No routing key ([] names): one partition.
 */
function routeGroup(stateful: LogicalPlan, lower: readonly LogicalPlan[], ids: readonly string[], cuts: Cuts): Routing {
  const ordinals = new Map<string, number[]>(ids.map((id) => [id, []]));
  const names: string[] = [];
  if (lower.length > 0) {
    // Join → join in one stage: every stream routed by one class of keys the joins equate.
    const joins = [...lower, stateful] as JoinNode[];
    const route = joinChainRouting(joins, ids.map((id) => [id, cuts.get(id)!] as const));
    if (route) {
      names.push(route.name);
      for (const id of ids) ordinals.get(id)!.push(route.ordinals.get(id)!);
    }
    // Each join's state routes by its own key of the class (one partition without a class: no key).
    const operatorPositions = new Map<LogicalPlan, number[]>(joins.map((j) => [j, route ? [route.positions.get(j)!] : []]));
    return { names, ordinals, operatorPositions };
  }
  // A key position routes when, on every side, it traces to an unchanged column of every input below that side.
  const { names: keyNames, sides } = keySetsOf(stateful);
  const positions: number[] = [];
  for (let k = 0; k < keyNames.length; k++) {
    const found = new Map<string, number>();
    let usable = true;
    for (const side of sides) {
      const key = side.keys[k];
      for (const id of ids) {
        const cut = cuts.get(id)!;
        if (!holdsNode(side.subtree, cut)) continue;
        const ordinal = key ? traceToCut(side.subtree, key, cut) : -1;
        if (ordinal < 0 || (found.has(id) && found.get(id) !== ordinal)) usable = false;
        found.set(id, ordinal);
      }
    }
    if (!usable || ids.some((id) => !found.has(id))) continue;
    names.push(keyNames[k]!);
    positions.push(k);
    for (const id of ids) ordinals.get(id)!.push(found.get(id)!);
  }
  return { names, ordinals, positions, operatorPositions: new Map([[stateful, positions]]) };
}

/** Where the pairs `routedPairs` keeps sit among the join's keys (how a reshard routes its state). */
function routedPairPositions(join: JoinNode): number[] {
  const { sides } = joinKeySets(join);
  return sides[0]!.keys.flatMap((l, k) => (l !== null && sides[1]!.keys[k] !== null ? [k] : []));
}

/** A join's equi-key pairs that can route (plain columns of the same type on both sides). */
function routedPairs(join: JoinNode): (readonly [Attribute, Attribute])[] {
  const { sides } = joinKeySets(join);
  return sides[0]!.keys.map((l, k) => [l, sides[1]!.keys[k]!] as const)
    .filter((p): p is readonly [Attribute, Attribute] => p[0] !== null && p[1] !== null);
}

/**
 * Whether the stateful operator `node` right above `join` (routed by `pairs`) sees each of its
 * groups on one shard: for every key pair, one of its keys is that pair's column, unchanged, from
 * a side the join never pads with NULL (an outer join's unmatched rows carry NULL on the other side,
 * routed by their own side's key).
 */
function keepsJoinRouting(join: JoinNode, pairs: readonly (readonly [Attribute, Attribute])[], keys: OperatorKeys): boolean {
  if (pairs.length === 0) return false;
  const leftKept = join.joinType === 'inner' || join.joinType === 'left_outer' || join.joinType === 'left_semi';
  const rightKept = join.joinType === 'inner' || join.joinType === 'right_outer';
  const traced = new Set(keys.keys.map((k) => traceToCut(keys.child, k, join)).filter((o) => o >= 0).map((o) => join.output[o]!.id));
  return pairs.every(([l, r]) => (leftKept && traced.has(l.id)) || (rightKept && traced.has(r.id)));
}

/**
 * Where an operator co-partitioned above `join` holds the join's routed keys (`positions` among the
 * join's keys) among its own keys: a key that copies either column of the pair carries its value.
 * Null when one of them is missing.
 */
function positionsAboveJoin(join: JoinNode, positions: readonly number[], node: LogicalPlan): number[] | null {
  if (node.kind === 'Join') return null;
  const { sides } = joinKeySets(join);
  const op = keyAttributes(node);
  const found = positions.map((p) => {
    const pair = new Set([sides[0]!.keys[p]?.id, sides[1]!.keys[p]?.id]);
    const i = op.keys.findIndex((k) => {
      const ordinal = traceToCut(op.child, k, join);
      return ordinal >= 0 && pair.has(join.output[ordinal]!.id);
    });
    return i < 0 ? null : op.positions[i]!;
  });
  return found.every((p): p is number => p !== null) ? found : null;
}

function replaceNode(plan: LogicalPlan, target: LogicalPlan, replacement: LogicalPlan): LogicalPlan {
  if (plan === target) return replacement;
  const children = planChildren(plan);
  const replaced = children.map((c) => replaceNode(c, target, replacement));
  return replaced.every((c, i) => c === children[i]) ? plan : withChildren(plan, replaced);
}

interface SplitAtJoin {
  /** The query with the join reading its sides back from the exchange. */
  readonly plan: LogicalPlan;
  readonly exchange: LogicalPlan;
  readonly join: JoinNode;
  readonly keyPairs: readonly (readonly [Attribute, Attribute])[];
  /** Hop 2: the exchange, routed by the join's keys, carrying stage 2's output watermark. */
  readonly hop: Hop;
  /** Stage 2's stateful operators, and the join and those above it (children first). */
  readonly below: readonly LogicalPlan[];
  readonly above: readonly LogicalPlan[];
  readonly routing: Routing;
  readonly operator: StatefulOperatorInfo;
  /** The inputs stage 2 forwards unchanged. */
  readonly forwarded: readonly string[];
}

/**
 * Stage 2 below `join`, stage 3 from `join` up. Each side of the join is either plain streams
 * (forwarded by stage 2) or one group of stateful operators stage 2 can run: the lowest one its
 * streams all feed, with the joins below it on one key class. Null when a side needs more.
 */
function splitAtJoin(root: LogicalPlan, join: JoinNode, statefulNodes: readonly LogicalPlan[], ids: readonly string[], cuts: Cuts): SplitAtJoin | null {
  const routing: Routing = { names: [], ordinals: new Map(), operatorPositions: new Map() };
  const below: LogicalPlan[] = [];
  const forwarded: string[] = [];
  const pairs = routedPairs(join);
  for (const [index, side] of [join.left, join.right].entries()) {
    const sideIds = ids.filter((id) => holdsNode(side, cuts.get(id)!));
    const sideOperators = statefulNodes.filter((n) => holdsNode(side, n));
    if (sideOperators.length === 0) {
      // Forwarded: routed by the join's own key, so stage 2's shards share the load.
      for (const id of sideIds) {
        const ordinals = pairs.map((p) => traceToCut(side, p[index]!, cuts.get(id)!));
        routing.ordinals.set(id, ordinals.every((o) => o >= 0) ? ordinals : []);
      }
      if (sideIds.length > 0) routing.names.push('(forwarded)');
      forwarded.push(...sideIds);
      continue;
    }
    const top = sideOperators.find((n) => sideIds.every((id) => holdsNode(n, cuts.get(id)!)));
    if (!top) return null;
    const lower = sideOperators.filter((n) => n !== top);
    if (lower.some((n) => !holdsNode(top, n) || n.kind !== 'Join') || (lower.length > 0 && top.kind !== 'Join')) return null;
    const group = routeGroup(top, lower, sideIds, cuts);
    for (const id of sideIds) routing.ordinals.set(id, group.ordinals.get(id)!);
    for (const [operator, positions] of group.operatorPositions) routing.operatorPositions.set(operator, positions);
    routing.names.push(group.names.length > 0 ? group.names.join(', ') : '(one partition)');
    below.push(...sideOperators);
  }
  const { exchange, keyOrdinals, join: rewritten } = joinExchange(join, pairs);
  const plan = replaceNode(root, join, rewritten);
  const above = collectPostOrder(plan, isStatefulOperator).filter((n) => !holdsNode(exchange, n));
  const { names } = joinKeySets(join);
  const operator = { kind: describeOperator(join), keys: names };
  return {
    plan, exchange, join: rewritten, keyPairs: pairs, below, above: [...new Set(above)], routing, forwarded,
    operator: { kind: below.map(describeOperator).join(' + '), keys: routing.names },
    hop: {
      index: 1, output: exchange.output,
      routingOrdinals: keyOrdinals, routingColumns: pairs.map(([l, r]) => `${l.name} = ${r.name}`),
      routingKeyPositions: routedPairPositions(join), eventTime: null, carries: 'watermark', operator, partial: null,
    },
  };
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

type HopShape = Pick<MultiInputHopPlan, 'routingColumns' | 'routingKeyPositions' | 'stateUnroutable' | 'watermarks' | 'statefulOperator'>
  & { readonly stateKeyPositions?: readonly (readonly number[] | null)[] };

function hopOf(hop: HopShape, input: HopInput): Hop {
  const delayMs = hop.watermarks.find((w) => w.inputs.includes(input.sourceId))?.delayMs ?? 0;
  return {
    index: 0,
    output: input.cutOutput,
    routingOrdinals: input.routingOrdinals,
    routingColumns: hop.routingColumns,
    routingKeyPositions: hop.routingKeyPositions,
    ...(hop.stateUnroutable ? { stateUnroutable: hop.stateUnroutable } : {}),
    ...(hop.stateKeyPositions ? { stateKeyPositions: hop.stateKeyPositions } : {}),
    eventTime: input.eventTimeOrdinal === null ? null : { ordinal: input.eventTimeOrdinal, delayMs },
    carries: 'max-event-time',
    operator: hop.statefulOperator,
    partial: null,
  };
}
