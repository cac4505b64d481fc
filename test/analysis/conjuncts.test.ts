import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { bind } from '../../lib/analysis/binder.js';
import { splitConjuncts } from '../../lib/analysis/conjuncts.js';
import { col } from '../../lib/plan/functions.js';

const stream = () => new SluiceSession().memoryStream('a int, b int').df;

describe('splitConjuncts', () => {
  const cond = col('a').gt(1).and(col('b').lt(2).and(col('a').eq(col('b')))).or(col('a').isNull());
  it('splits nested ANDs in order and leaves an OR whole', () => {
    const and = col('a').gt(1).and(col('b').lt(2).and(col('a').eq(col('b'))));
    expect(splitConjuncts(and.expr).map((e) => (e.kind === 'call' ? e.fn : e.kind))).toEqual(['>', '<', '=']);
    expect(splitConjuncts(cond.expr)).toEqual([cond.expr]);
  });

  it('splits a bound condition the same way', () => {
    const input = stream().plan.output;
    const bound = bind(col('a').gt(1).and(col('b').lt(2)).expr, input);
    expect(splitConjuncts(bound).map((e) => e.type)).toEqual(['boolean', 'boolean']);
    expect(splitConjuncts(bound)).toHaveLength(2);
  });
});
