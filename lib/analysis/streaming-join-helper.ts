/**
 * Spark's StreamingJoinHelper: which state rows of a stream-stream join can never match again. The
 * one solver the checker (may the query start?), explain (what is evicted when?) and the join
 * operator (what does it evict?) share, so that they cannot disagree.
 *
 * 1. A join key carries a watermark (an event-time column on either side): state on both sides is
 *    evicted by that key (Spark's `isWatermarkInJoinKeys` / key predicate).
 * 2. A range conjunct between a state-side column and the other side's watermarked column bounds
 *    the state side: `leftTime > rightTime + c` with the watermark W gives the state watermark
 *    `W + c` (one ms less for `>=`); the min over all such conjuncts (Spark's
 *    `getStateValueWatermark`). The checker needs one on the side whose unmatched rows must be
 *    closed; the operator also needs that side's own watermarked column to apply it to.
 */
import type { Attribute } from '../plan/attribute.js';
import { isNumeric } from '../plan/data-types.js';
import type { JoinNode } from '../plan/logical-plan.js';
import { bind } from './binder.js';
import type { BoundExpr } from './bound-expr.js';
import { splitJoinCondition, type EquiJoinKey, type SplitJoinCondition } from './join-condition.js';

/**
 * One solved range conjunct: state rows whose event time is at or below
 * `trunc((coefficient * W * 1000 + micros) / 1000) - adjustMs` (W the eviction watermark, ms) can
 * never match again.
 */
export interface RangeBound {
  readonly coefficient: number;
  readonly micros: number;
  /** 1 for an inclusive comparison (`<=`, `>=`), 0 for a strict one. */
  readonly adjustMs: number;
  /** The state-side column the conjunct bounds (for explain). */
  readonly stateColumn: Attribute;
  /** The other side's watermarked column W stands for; null when the bound is a constant. */
  readonly watermarkColumn: Attribute | null;
}

export interface JoinStateBounds {
  /** Equi-join keys and the other conjuncts by side (Spark's ExtractEquiJoinKeys). */
  readonly split: SplitJoinCondition;
  /** The first key position whose left, else right, expression is a watermarked column; -1 when none. */
  readonly watermarkKeyIndex: number;
  /** Range bounds on each side's state from the other side's watermark; empty when none. */
  readonly left: readonly RangeBound[];
  readonly right: readonly RangeBound[];
}

/** The state watermark (ms) range bounds give for the eviction watermark: the lowest of them. */
export function rangeStateWatermarkMs(bounds: readonly RangeBound[], evictionWatermarkMs: number): number {
  return Math.min(...bounds.map((b) => Math.trunc((b.coefficient * evictionWatermarkMs * 1000 + b.micros) / 1000) - b.adjustMs));
}

/** The watermarked column a key position evicts by (left key first, as Spark looks). */
export function watermarkKeyColumn(keys: readonly EquiJoinKey[], index: number): Attribute | null {
  const key = keys[index];
  if (!key) return null;
  const side = isWatermarkedColumn(key.left) ? key.left : key.right;
  return side.kind === 'ref' ? side.attribute : null;
}

const isWatermarked = (a: Attribute): boolean => a.eventTimeDelayMs !== null;

function isWatermarkedColumn(e: BoundExpr): boolean {
  return e.kind === 'ref' && e.path.length === 0 && isWatermarked(e.attribute);
}

/** @param condition bound to `leftAttrs ++ rightAttrs`; null for a join without condition. */
export function joinStateBounds(leftAttrs: readonly Attribute[], rightAttrs: readonly Attribute[], condition: BoundExpr | null): JoinStateBounds {
  const split = splitJoinCondition(condition, leftAttrs.length);
  let watermarkKeyIndex = split.keys.findIndex((k) => isWatermarkedColumn(k.left));
  if (watermarkKeyIndex < 0) watermarkKeyIndex = split.keys.findIndex((k) => isWatermarkedColumn(k.right));
  const leftWidth = leftAttrs.length;
  const conjuncts = split.full.flatMap(expandBetween);
  const forSide = (side: 'left' | 'right'): RangeBound[] => {
    // Spark: no watermark on the other side, no state value watermark.
    if (!(side === 'left' ? rightAttrs : leftAttrs).some(isWatermarked)) return [];
    const onSide = (o: number): boolean => (side === 'left' ? o < leftWidth : o >= leftWidth);
    return conjuncts.map((c) => solveConjunct(c, onSide)).filter((b): b is RangeBound => b !== null);
  };
  return { split, watermarkKeyIndex, left: forSide('left'), right: forSide('right') };
}

/** The bounds of a logical join, for the checker and explain; a condition that does not bind gives none. */
export function streamStreamJoinBounds(join: JoinNode): JoinStateBounds {
  let bound: BoundExpr | null = null;
  try {
    bound = join.condition ? bind(join.condition, [...join.left.output, ...join.right.output]) : null;
  } catch {
    bound = null;
  }
  return joinStateBounds(join.left.output, join.right.output, bound);
}

/** Spark rewrites `a BETWEEN lo AND hi` to `a >= lo AND a <= hi` before splitting conjuncts. */
function expandBetween(e: BoundExpr): BoundExpr[] {
  if (e.kind === 'call' && e.fn === 'between' && e.args.length === 3) {
    const [v, lo, hi] = e.args as [BoundExpr, BoundExpr, BoundExpr];
    return [
      { kind: 'call', fn: '>=', args: [v, lo], type: 'boolean' },
      { kind: 'call', fn: '<=', args: [v, hi], type: 'boolean' },
    ];
  }
  return [e];
}

function solveConjunct(c: BoundExpr, onSide: (ordinal: number) => boolean): RangeBound | null {
  if (c.kind !== 'call' || c.args.length !== 2) return null;
  const [a, b] = c.args as [BoundExpr, BoundExpr];
  const withAdjust = (bound: Omit<RangeBound, 'adjustMs'> | null, adjustMs: number): RangeBound | null => (bound ? { ...bound, adjustMs } : null);
  switch (c.fn) {
    case '<': return withAdjust(solveLessThan(a, b, onSide), 0);
    case '<=': return withAdjust(solveLessThan(a, b, onSide), 1);
    case '>': return withAdjust(solveLessThan(b, a, onSide), 0);
    case '>=': return withAdjust(solveLessThan(b, a, onSide), 1);
    default: return null;
  }
}

interface Term {
  readonly negated: boolean;
  /** A column (joined-row ordinal) or a constant in microseconds. */
  readonly ref: Extract<BoundExpr, { kind: 'ref' }> | null;
  readonly micros: number;
}

/**
 * Solves `lhs < rhs` for the side's time column: canonical form `lhs - rhs < 0` as a sum of terms;
 * exactly one term must be the side's timestamp column, negated (`... - sideTime < 0`, i.e.
 * `sideTime > rest`); every other term must be a constant or the other side's watermarked timestamp
 * column, replaced by the watermark.
 */
function solveLessThan(lhs: BoundExpr, rhs: BoundExpr, onSide: (ordinal: number) => boolean): Omit<RangeBound, 'adjustMs'> | null {
  const ordinals = new Set<number>();
  for (const e of [lhs, rhs]) collectRefs(e, ordinals);
  const mine = [...ordinals].filter(onSide);
  if (mine.length > 1 || ordinals.size - mine.length > 1) return null;

  const collected = collectTerms({ kind: 'call', fn: '-', args: [lhs, rhs], type: 'double' }, false);
  if (collected === null) return null;
  // Spark keeps the terms in an ExpressionSet: identical terms count once.
  const seen = new Set<string>();
  const terms = collected.filter((t) => {
    const id = `${t.negated}:${t.ref ? `#${t.ref.ordinal}` : t.micros}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
  // Any column of the state side is the constraint term, whatever its type, as in Spark: so
  // `leftValue > 10` bounds the left state at the constant 10 s (applied to the side's event-time
  // column), and the lowest bound wins; such a bound keeps later rows for good.
  const isConstraint = (t: Term): boolean => t.ref !== null && onSide(t.ref.ordinal);
  const constraint = terms.filter(isConstraint);
  if (constraint.length !== 1 || !constraint[0]!.negated) return null;
  const rest = terms.filter((t) => !isConstraint(t));
  if (rest.length === 0) return null;
  let coefficient = 0;
  let micros = 0;
  let watermarkColumn: Attribute | null = null;
  for (const t of rest) {
    const sign = t.negated ? -1 : 1;
    if (t.ref === null) {
      micros += sign * t.micros;
    } else if (!onSide(t.ref.ordinal) && t.ref.type === 'timestamp' && isWatermarked(t.ref.attribute)) {
      coefficient += sign;
      watermarkColumn = t.ref.attribute;
    } else {
      return null; // a column Spark cannot substitute: the expression does not evaluate
    }
  }
  return { coefficient, micros, stateColumn: constraint[0]!.ref!.attribute, watermarkColumn: coefficient === 0 ? null : watermarkColumn };
}

function collectRefs(e: BoundExpr, into: Set<number>): void {
  if (e.kind === 'ref') into.add(e.ordinal);
  if (e.kind === 'call') e.args.forEach((a) => collectRefs(a, into));
  if (e.kind === 'cast') collectRefs(e.child, into);
  if (e.kind === 'case') {
    e.branches.forEach(([c, v]) => { collectRefs(c, into); collectRefs(v, into); });
    if (e.otherwise) collectRefs(e.otherwise, into);
  }
  if (e.kind === 'timeWindow') collectRefs(e.time, into);
}

/** `a + b - c` (and `-a`) as signed terms, or null when some part is not a column, a constant, + or -. */
function collectTerms(e: BoundExpr, negated: boolean): Term[] | null {
  switch (e.kind) {
    case 'call': {
      if ((e.fn === '+' || e.fn === '-') && e.args.length === 2) {
        const l = collectTerms(e.args[0]!, negated);
        const r = collectTerms(e.args[1]!, e.fn === '-' ? !negated : negated);
        return l && r ? [...l, ...r] : null;
      }
      if (e.fn === '-' && e.args.length === 1) return collectTerms(e.args[0]!, !negated);
      return null;
    }
    case 'cast':
      return isNumeric(e.type) || e.type === 'timestamp' ? collectTerms(e.child, negated) : null;
    case 'ref':
      return e.path.length === 0 ? [{ negated, ref: e, micros: 0 }] : null;
    case 'literal': {
      if (typeof e.value !== 'number') return null;
      // Intervals are microseconds; plain numbers count as seconds (Spark multiplies them by 1e6,
      // and does the same to a timestamp literal's microseconds).
      const micros = e.type === 'interval' ? e.value : e.value * 1_000_000;
      return [{ negated, ref: null, micros }];
    }
    default:
      return null;
  }
}
