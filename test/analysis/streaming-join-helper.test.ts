import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { explainPlan } from '../../lib/analysis/explain.js';
import { streamStreamJoinBounds } from '../../lib/analysis/streaming-join-helper.js';
import { checkStreamingQuery } from '../../lib/analysis/unsupported-operation-checker.js';
import { planStateCleanup } from '../../lib/execution/join/state-watermark.js';
import { Column, interval, toExpr, type ColumnOrValue } from '../../lib/plan/column.js';
import { col } from '../../lib/plan/functions.js';
import type { JoinNode } from '../../lib/plan/logical-plan.js';

// The checker (may this outer join start?), explain and the join operator (what does it evict?)
// read one solver. These are the conditions on which the checker's old copy disagreed with the
// operator's: it had no unary minus and read a plain number in a range as an unknown constant.

const session = new SluiceSession();
const noConf = new Map<string, string>();
/** `a` without a watermark (the preserved side), `b` with one: Spark's "state value watermark" shape. */
const s1 = (): DataFrame => session.memoryStream('a timestamp').df;
const s2 = (): DataFrame => session.memoryStream('b timestamp').df.withWatermark('b', '1 second');
/** Both sides watermarked, so the operator can apply a bound to either. */
const w1 = (): DataFrame => session.memoryStream('k int, a timestamp').df.withWatermark('a', '1 second');
const w2 = (): DataFrame => session.memoryStream('k2 int, b timestamp').df.withWatermark('b', '1 second');

/** Spark's UnaryMinus; the DataFrame API has no operator for it yet. */
const negate = (c: ColumnOrValue): Column => new Column({ kind: 'call', fn: '-', args: [toExpr(c)] });
const asDouble = (name: string): Column => col(name).cast('double');

const accepted = (df: DataFrame): boolean => {
  try {
    checkStreamingQuery(df.plan, 'append', noConf);
    return true;
  } catch {
    return false;
  }
};

describe('stream-stream join state bounds: one solver for the checker, explain and the operator', () => {
  it('accepts a range bound written with unary minus', () => {
    const cond = col('a').gt(col('b').plus(negate(interval('10 seconds'))));
    expect(accepted(s1().join(s2(), cond, 'left_outer'))).toBe(true);
    expect(accepted(s1().join(s2(), cond, 'left_semi'))).toBe(true);
    // The same bound with both sides negated (as numbers: a timestamp has no unary minus).
    const flipped = negate(col('a').cast('double')).lt(negate(col('b').cast('double')).plus(10));
    expect(accepted(s1().join(s2(), flipped, 'left_outer'))).toBe(true);
    const upper = col('a').lt(col('b').plus(negate(interval('10 seconds'))));
    expect(accepted(s1().join(s2(), upper, 'left_outer'))).toBe(false);
  });

  it('reads a plain number in a range as seconds, as the operator evicts', () => {
    const df = w1().join(w2(), col('k').eq(col('k2')).and(asDouble('a').gt(asDouble('b').plus(10))), 'left_outer');
    expect(accepted(df)).toBe(true);
    const text = explainPlan(df.plan, 'append', noConf);
    expect(text).toContain('left rows are removed once a <= watermark(b) + 10 seconds');
    expect(text).toContain('right rows are never removed');

    // No column of the other side: a constant bound (seconds since the epoch), as Spark solves it.
    const constant = w1().join(w2(), col('k').eq(col('k2')).and(asDouble('a').gt(1_700_000_000)), 'left_outer');
    expect(accepted(constant)).toBe(true);
    expect(explainPlan(constant.plan, 'append', noConf)).toContain('left rows are removed once a <= 2023-11-14 22:13:20');

    const unary = w1().join(w2(), col('k').eq(col('k2')).and(col('a').geq(col('b').plus(negate(interval('5 seconds'))))), 'left_outer');
    expect(explainPlan(unary.plan, 'append', noConf)).toContain('left rows are removed once a < watermark(b) - 5 seconds');
  });

  it('the checker accepts an outer join exactly when the operator can evict the preserved side', () => {
    const conditions: [string, Column][] = [
      ['interval', col('a').gt(col('b').plus(interval('10 seconds')))],
      ['unary minus', col('a').gt(col('b').plus(negate(interval('10 seconds'))))],
      ['number as seconds', asDouble('a').geq(asDouble('b').minus(5))],
      ['between', col('a').between(col('b').minus(interval('5 seconds')), col('b').plus(interval('5 seconds')))],
      ['upper bound only', col('a').lt(col('b').plus(interval('10 seconds')))],
      ['a constant', asDouble('a').gt(1_700_000_000)],
      ['a string is no bound', col('a').cast('string').gt(col('b').plus(interval('10 seconds')).cast('string'))],
    ];
    for (const [name, range] of conditions) {
      for (const how of ['left_outer', 'right_outer'] as const) {
        const df = how === 'left_outer' ? w1().join(w2(), col('k').eq(col('k2')).and(range), how) : w2().join(w1(), col('k2').eq(col('k')).and(range), how);
        const join = df.plan as JoinNode;
        const bounds = streamStreamJoinBounds(join);
        const cleanup = planStateCleanup(join.left.output, join.right.output, bounds);
        const preserved = how === 'left_outer' ? cleanup.left : cleanup.right;
        expect(accepted(df), `${name}, ${how}`).toBe(preserved !== null);
      }
    }
  });

  it('gives the operator the numbers the executor always used', () => {
    const df = w1().join(w2(), col('k').eq(col('k2')).and(col('a').gt(col('b').plus(negate(interval('10 seconds'))))), 'inner');
    const bounds = streamStreamJoinBounds(df.plan as JoinNode);
    expect(bounds.watermarkKeyIndex).toBe(-1);
    expect(bounds.left.map((b) => [b.coefficient, b.micros, b.adjustMs, b.stateColumn.name, b.watermarkColumn?.name])).toEqual([[1, -10_000_000, 0, 'a', 'b']]);
    expect(bounds.right).toEqual([]);
    const numeric = w1().join(w2(), col('k').eq(col('k2')).and(asDouble('a').leq(asDouble('b').plus(2))), 'inner');
    expect(streamStreamJoinBounds(numeric.plan as JoinNode).right.map((b) => [b.coefficient, b.micros, b.adjustMs])).toEqual([[1, -2_000_000, 1]]);
  });

  it('a non-time column of the state side compared with a constant is a bound too, as Spark solves it', () => {
    // Spark's getStateValueWatermark takes any state-side column as the constraint term: `v > 10`
    // gives the constant 10 s, applied to the side's event-time column, and the lowest bound wins,
    // so left rows after 10 s are kept for good (confirmed on PySpark 4.0.1 by spark-diff,
    // join-left-outer-non-key-condition/violated). `v2 < 300` bounds nothing (wrong direction).
    const left = (): DataFrame => session.memoryStream('k int, a timestamp, v long').df.withWatermark('a', '1 second');
    const right = (): DataFrame => session.memoryStream('k2 int, b timestamp, v2 long').df.withWatermark('b', '1 second');
    const range = col('a').between(col('b').minus(interval('5 seconds')), col('b').plus(interval('5 seconds')));
    const df = left().join(right(), col('k').eq(col('k2')).and(range).and(col('v').gt(10)).and(col('v2').lt(300)), 'left_outer');
    const join = df.plan as JoinNode;
    const bounds = streamStreamJoinBounds(join);
    expect(bounds.left.map((b) => [b.stateColumn.name, b.coefficient, b.micros])).toEqual([['a', 1, -5_000_000], ['v', 0, 10_000_000]]);
    expect(bounds.right.map((b) => b.stateColumn.name)).toEqual(['b']);
    const cleanup = planStateCleanup(join.left.output, join.right.output, bounds);
    expect(cleanup.left).toMatchObject({ kind: 'value', ordinal: 1 });
  });
});
