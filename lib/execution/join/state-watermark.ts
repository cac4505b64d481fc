import type { JoinStateBounds, RangeBound } from '../../analysis/streaming-join-helper.js';
import { rangeStateWatermarkMs } from '../../analysis/streaming-join-helper.js';
import type { Attribute } from '../../plan/attribute.js';
import { isStruct } from '../../plan/data-types.js';

/**
 * How a stream-stream join evicts each side's state (Spark's StreamingSymmetricHashJoinHelper
 * `getStateWatermarkPredicates`), from the bounds the analysis found (lib/analysis/
 * streaming-join-helper.ts, shared with the checker and explain):
 *
 * 1. A join key carries a watermark: on both sides, state whose key at that position is `<=` the
 *    eviction watermark goes (key predicate; for a window struct, its end is compared).
 * 2. Otherwise, a side with a watermarked column and range bounds from the other side's watermark:
 *    state rows whose own watermarked column is `<=` the lowest bound go (value predicate).
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

/** The threshold (ms) below which (inclusive) this side's state rows are evicted. */
export function stateWatermarkMs(cleanup: StateCleanup, evictionWatermarkMs: number): number {
  if (cleanup.kind === 'key') return evictionWatermarkMs;
  return rangeStateWatermarkMs(cleanup.bounds, evictionWatermarkMs);
}

export function planStateCleanup(leftAttrs: readonly Attribute[], rightAttrs: readonly Attribute[], bounds: JoinStateBounds): JoinStateCleanup {
  const keyIndex = bounds.watermarkKeyIndex;
  const forSide = (side: 'left' | 'right'): StateCleanup | null => {
    if (keyIndex >= 0) {
      const key = side === 'left' ? bounds.split.keys[keyIndex]!.left : bounds.split.keys[keyIndex]!.right;
      return { kind: 'key', keyIndex, keyIsStruct: isStruct(key.type) };
    }
    const attrs = side === 'left' ? leftAttrs : rightAttrs;
    const sideBounds = side === 'left' ? bounds.left : bounds.right;
    // Spark applies the value watermark to the side's first watermarked column; without one, none.
    const ordinal = attrs.findIndex((a) => a.eventTimeDelayMs !== null);
    if (ordinal < 0 || sideBounds.length === 0) return null;
    return { kind: 'value', ordinal, isStruct: isStruct(attrs[ordinal]!.type), bounds: sideBounds };
  };
  return { left: forSide('left'), right: forSide('right') };
}
