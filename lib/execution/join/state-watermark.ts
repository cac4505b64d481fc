import type { BoundExpr } from '../../analysis/bound-expr.js';
import type { Attribute } from '../../plan/attribute.js';
import { isNumeric, isStruct } from '../../plan/data-types.js';
import type { EquiJoinKey } from './join-condition.js';

/**
 * Spark's state watermarks for a stream-stream join (StreamingSymmetricHashJoinHelper and
 * StreamingJoinHelper.getStateValueWatermark). Which state rows of a side can never match again:
 *
 * 1. A join key carries a watermark (an event-time column or a window over one, on either side): on
 *    both sides, state whose key at that position is `<=` the eviction watermark goes (key predicate;
 *    for a window struct, its end is compared).
 * 2. Otherwise, for a side that has a watermarked column, a range condition between that column and
 *    the other side's watermarked column bounds it: `leftTime > rightTime + c` with the watermark W
 *    gives the left state watermark `W + c` (one ms less for `>=`); the min over all such conjuncts.
 *    State rows whose own watermarked column is `<=` it go (value predicate).
 *
 * Whether a side gets a predicate depends only on the query's shape; its threshold on the watermark.
 */
export type StateCleanup =
  | { readonly kind: 'key'; readonly keyIndex: number; readonly keyIsStruct: boolean }
  | { readonly kind: 'value'; readonly ordinal: number; readonly isStruct: boolean; readonly bounds: readonly RangeBound[] };

export interface JoinStateCleanup {
  readonly left: StateCleanup | null;
  readonly right: StateCleanup | null;
}

/** One solved range conjunct: state watermark = trunc((coefficient * W * 1000 + micros) / 1000) - adjustMs. */
export interface RangeBound {
  readonly coefficient: number;
  readonly micros: number;
  readonly adjustMs: number;
}

/** The threshold (ms) below which (inclusive) this side's state rows are evicted. */
export function stateWatermarkMs(cleanup: StateCleanup, evictionWatermarkMs: number): number {
  if (cleanup.kind === 'key') return evictionWatermarkMs;
  return Math.min(...cleanup.bounds.map((b) => Math.trunc((b.coefficient * evictionWatermarkMs * 1000 + b.micros) / 1000) - b.adjustMs));
}

const isWatermarked = (a: Attribute): boolean => a.eventTimeDelayMs !== null;

function watermarkedKeyIndex(keys: readonly BoundExpr[]): number {
  return keys.findIndex((k) => k.kind === 'ref' && k.path.length === 0 && isWatermarked(k.attribute));
}

/**
 * @param full the non-key conjuncts, bound to `left.output ++ right.output`.
 */
export function planStateCleanup(
  leftAttrs: readonly Attribute[],
  rightAttrs: readonly Attribute[],
  keys: readonly EquiJoinKey[],
  full: readonly BoundExpr[],
): JoinStateCleanup {
  let keyIndex = watermarkedKeyIndex(keys.map((k) => k.left));
  if (keyIndex < 0) keyIndex = watermarkedKeyIndex(keys.map((k) => k.right));
  const leftWidth = leftAttrs.length;
  const conjuncts = full.flatMap(expandBetween);

  const forSide = (side: 'left' | 'right'): StateCleanup | null => {
    if (keyIndex >= 0) {
      const key = side === 'left' ? keys[keyIndex]!.left : keys[keyIndex]!.right;
      return { kind: 'key', keyIndex, keyIsStruct: isStruct(key.type) };
    }
    const attrs = side === 'left' ? leftAttrs : rightAttrs;
    const other = side === 'left' ? rightAttrs : leftAttrs;
    const ordinal = attrs.findIndex(isWatermarked);
    if (ordinal < 0 || !other.some(isWatermarked)) return null;
    const onSide = (o: number): boolean => (side === 'left' ? o < leftWidth : o >= leftWidth);
    const bounds = conjuncts.map((c) => solveConjunct(c, onSide)).filter((b): b is RangeBound => b !== null);
    if (bounds.length === 0) return null;
    return { kind: 'value', ordinal, isStruct: isStruct(attrs[ordinal]!.type), bounds };
  };
  return { left: forSide('left'), right: forSide('right') };
}

/** Spark rewrites `a BETWEEN lo AND hi` to `a >= lo AND a <= hi` before splitting conjuncts. */
function expandBetween(e: BoundExpr): BoundExpr[] {
  if (e.kind === 'call' && e.fn === 'and' && e.args.length === 2) return e.args.flatMap(expandBetween);
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
  const isConstraint = (t: Term): boolean => t.ref !== null && onSide(t.ref.ordinal) && t.ref.type === 'timestamp';
  const constraint = terms.filter(isConstraint);
  if (constraint.length !== 1 || !constraint[0]!.negated) return null;
  const rest = terms.filter((t) => !isConstraint(t));
  if (rest.length === 0) return null;
  let coefficient = 0;
  let micros = 0;
  for (const t of rest) {
    const sign = t.negated ? -1 : 1;
    if (t.ref === null) {
      micros += sign * t.micros;
    } else if (!onSide(t.ref.ordinal) && t.ref.type === 'timestamp' && isWatermarked(t.ref.attribute)) {
      coefficient += sign;
    } else {
      return null; // a column Spark cannot substitute: the expression does not evaluate
    }
  }
  return { coefficient, micros };
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

/** `a + b - c` as signed terms, or null when some part is not a column, a constant, + or -. */
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
