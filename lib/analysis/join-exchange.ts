/**
 * A join whose keys are not those its inputs were routed by (orders ⋈ payments on order_id, then ⋈
 * customers on customer_id; a windowed aggregate, then a join) needs its own shuffle, as Spark
 * shuffles before each stateful operator. The stage below it runs the operators under the join and
 * forwards the streams that reach the join unchanged; both sides then cross one internal stream as
 * one row layout, the exchange:
 *
 *   [_side, _k0.._kn (the join keys of the row's side), _l0.. (left columns), _r0.. (right columns)]
 *
 * routed by the `_k` columns, so rows that can match meet on one shard. The stage above splits the
 * exchange back into the two sides (same attributes as before, so the join and everything above it
 * are the query's own nodes) and runs the join. The exchange is a plan node like any other, so the
 * stage below is an ordinary plan ending in a union, and the hop an ordinary one-input hop.
 */
import { newAttribute, type Attribute } from '../plan/attribute.js';
import type { Expr } from '../plan/expressions.js';
import type { JoinNode, LogicalPlan } from '../plan/logical-plan.js';

export interface JoinExchange {
  /** The union both sides' rows cross the hop as. */
  readonly exchange: LogicalPlan;
  /** Exchange-output ordinals of the join keys (the hop's routing). */
  readonly keyOrdinals: readonly number[];
  /** The join reading the two sides back from the exchange. */
  readonly join: JoinNode;
}

const column = (a: Attribute): Expr => ({ kind: 'column', name: `#${a.id}` });
const alias = (child: Expr, name: string): Expr => ({ kind: 'alias', child, name });
const nullOf = (a: Attribute): Expr => ({ kind: 'literal', value: null, type: a.type });

/** `keys`: the join's routable equi-key pairs (left attribute, right attribute), same types. */
export function joinExchange(join: JoinNode, keys: readonly (readonly [Attribute, Attribute])[]): JoinExchange {
  const { left, right } = join;
  const side = newAttribute('_side', 'string');
  const keyAttrs = keys.map(([l], i) => newAttribute(`_k${i}`, l.type));
  const leftAttrs = left.output.map((a, i) => newAttribute(`_l${i}`, a.type));
  const rightAttrs = right.output.map((a, i) => newAttribute(`_r${i}`, a.type));
  const output = [side, ...keyAttrs, ...leftAttrs, ...rightAttrs];
  const tag = (child: LogicalPlan, name: 'L' | 'R'): LogicalPlan => ({
    kind: 'Project', child, output,
    exprs: [
      alias({ kind: 'literal', value: name, type: 'string' }, side.name),
      ...keys.map((pair, i) => alias(column(name === 'L' ? pair[0] : pair[1]), keyAttrs[i]!.name)),
      ...left.output.map((a, i) => alias(name === 'L' ? column(a) : nullOf(a), leftAttrs[i]!.name)),
      ...right.output.map((a, i) => alias(name === 'R' ? column(a) : nullOf(a), rightAttrs[i]!.name)),
    ],
  });
  const exchange: LogicalPlan = { kind: 'Union', children: [tag(left, 'L'), tag(right, 'R')], output };
  const untag = (name: 'L' | 'R', attrs: readonly Attribute[], sideOutput: readonly Attribute[]): LogicalPlan => {
    const rows: LogicalPlan = {
      kind: 'Filter', child: exchange, output,
      condition: { kind: 'call', fn: '=', args: [column(side), { kind: 'literal', value: name, type: 'string' }] },
    };
    const restored: LogicalPlan = { kind: 'Project', child: rows, output: sideOutput, exprs: attrs.map((a, i) => alias(column(a), sideOutput[i]!.name)) };
    // The stage above takes its senders' watermark (delay 0): the side's event time keeps the join's state bounded.
    const eventTime = sideOutput.find((a) => a.eventTimeDelayMs !== null);
    return eventTime
      ? { kind: 'EventTimeWatermark', child: restored, eventTime, delayMs: 0, delayText: '0 seconds', output: sideOutput }
      : restored;
  };
  return {
    exchange,
    keyOrdinals: keyAttrs.map((_, i) => 1 + i),
    join: { ...join, left: untag('L', leftAttrs, left.output), right: untag('R', rightAttrs, right.output) },
  };
}
