import type { BoundExpr } from './bound-expr.js';
import { boundExists } from './bound-expr.js';
import { splitConjuncts } from './conjuncts.js';
import { isNondeterministicFunction } from '../plan/function-catalog/index.js';

/**
 * Spark's ExtractEquiJoinKeys + JoinConditionSplitPredicates for a stream-stream join, over a
 * condition bound against `left.output ++ right.output`.
 *
 * - Equi-join keys: conjuncts `l = r` (or `l <=> r`) where one operand reads only the left input and
 *   the other only the right input (both must read something). They leave the condition.
 * - What remains is split into conjuncts reading only the left input (`leftOnly`, the left
 *   pre-join filter), only the right input (`rightOnly`), and the rest (`bothSides`, checked on the
 *   joined row). A conjunct reading no column at all belongs to both one-side filters, as in Spark;
 *   a non-deterministic conjunct always goes to `bothSides`.
 *
 * Left-side expressions are bound to the left row, right-side ones are rebased onto the right row;
 * `bothSides` and `full` stay bound to the joined row.
 */
export interface EquiJoinKey {
  readonly left: BoundExpr;
  readonly right: BoundExpr;
  /** `<=>`: NULL matches NULL. With `=`, a NULL key never matches. */
  readonly nullSafe: boolean;
}

export interface SplitJoinCondition {
  readonly keys: readonly EquiJoinKey[];
  readonly leftOnly: BoundExpr | null;
  readonly rightOnly: BoundExpr | null;
  readonly bothSides: BoundExpr | null;
  /** Every non-key conjunct (joined-row ordinals): what Spark derives the state watermarks from. */
  readonly full: readonly BoundExpr[];
}

type Side = 'left' | 'right' | 'both' | 'none';

function refOrdinals(e: BoundExpr): number[] {
  const out: number[] = [];
  boundExists(e, (x) => {
    if (x.kind === 'ref') out.push(x.ordinal);
    return false;
  });
  return out;
}

export function sideOf(e: BoundExpr, leftWidth: number): Side {
  const ordinals = refOrdinals(e);
  if (ordinals.length === 0) return 'none';
  const anyLeft = ordinals.some((o) => o < leftWidth);
  const anyRight = ordinals.some((o) => o >= leftWidth);
  return anyLeft && anyRight ? 'both' : anyLeft ? 'left' : 'right';
}

function isDeterministic(e: BoundExpr): boolean {
  return !boundExists(e, (x) => x.kind === 'call' && isNondeterministicFunction(x.fn, x.udf));
}

/** Moves every column reference `offset` positions left: joined-row ordinals -> right-row ordinals. */
export function rebase(e: BoundExpr, offset: number): BoundExpr {
  if (offset === 0) return e;
  switch (e.kind) {
    case 'ref':
      return { ...e, ordinal: e.ordinal - offset };
    case 'literal':
      return e;
    case 'call':
      return { ...e, args: e.args.map((a) => rebase(a, offset)) };
    case 'aggregate':
      return { ...e, args: e.args.map((a) => rebase(a, offset)) };
    case 'cast':
      return { ...e, child: rebase(e.child, offset) };
    case 'case':
      return {
        ...e,
        branches: e.branches.map(([c, v]) => [rebase(c, offset), rebase(v, offset)] as const),
        otherwise: e.otherwise ? rebase(e.otherwise, offset) : null,
      };
    case 'timeWindow':
      return { ...e, time: rebase(e.time, offset) };
    case 'sessionWindow':
      return { ...e, time: rebase(e.time, offset), gap: rebase(e.gap, offset) };
    default: {
      const never: never = e;
      throw new Error(`Unknown bound expression ${JSON.stringify(never)}`);
    }
  }
}

function conjunction(parts: readonly BoundExpr[]): BoundExpr | null {
  if (parts.length === 0) return null;
  return parts.reduce((a, b) => ({ kind: 'call', fn: 'and', args: [a, b], type: 'boolean' }));
}

export function splitJoinCondition(condition: BoundExpr | null, leftWidth: number): SplitJoinCondition {
  const keys: EquiJoinKey[] = [];
  const rest: BoundExpr[] = [];
  for (const c of condition ? splitConjuncts(condition) : []) {
    if (c.kind === 'call' && (c.fn === '=' || c.fn === '<=>') && c.args.length === 2) {
      const [a, b] = c.args as [BoundExpr, BoundExpr];
      const sa = sideOf(a, leftWidth);
      const sb = sideOf(b, leftWidth);
      const nullSafe = c.fn === '<=>';
      if (sa === 'left' && sb === 'right') {
        keys.push({ left: a, right: rebase(b, leftWidth), nullSafe });
        continue;
      }
      if (sa === 'right' && sb === 'left') {
        keys.push({ left: b, right: rebase(a, leftWidth), nullSafe });
        continue;
      }
    }
    rest.push(c);
  }
  const leftOnly: BoundExpr[] = [];
  const rightOnly: BoundExpr[] = [];
  const bothSides: BoundExpr[] = [];
  for (const c of rest) {
    if (!isDeterministic(c)) {
      bothSides.push(c);
      continue;
    }
    const side = sideOf(c, leftWidth);
    if (side === 'left' || side === 'none') leftOnly.push(c);
    if (side === 'right' || side === 'none') rightOnly.push(rebase(c, leftWidth));
    if (side === 'both') bothSides.push(c);
  }
  return {
    keys,
    leftOnly: conjunction(leftOnly),
    rightOnly: conjunction(rightOnly),
    bothSides: conjunction(bothSides),
    full: rest,
  };
}
