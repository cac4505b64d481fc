import { describe, expect, it } from 'vitest';
import { bind } from '../../lib/analysis/binder.js';
import { compile } from '../../lib/execution/evaluate.js';
import { newEvalContext } from '../../lib/execution/eval-context.js';
import { newAttribute } from '../../lib/plan/attribute.js';
import type { Expr } from '../../lib/plan/expressions.js';
import { AnalysisError } from '../../lib/errors/sluice-error.js';

describe('unary minus (Spark UnaryMinus)', () => {
  const input = [newAttribute('i', 'int'), newAttribute('d', 'double'), newAttribute('t', 'timestamp')];
  const minus = (name: string): Expr => ({ kind: 'call', fn: '-', args: [{ kind: 'column', name }] });
  const run = (e: Expr, row: unknown[]): unknown => compile(bind(e, input), newEvalContext())(row);

  it('negates numbers and intervals, keeps the type, and passes NULL', () => {
    expect(bind(minus('i'), input).type).toBe('int');
    expect(bind(minus('d'), input).type).toBe('double');
    expect(run(minus('i'), [3, 1.5, 0])).toBe(-3);
    expect(run(minus('d'), [3, 1.5, 0])).toBe(-1.5);
    expect(run(minus('i'), [null, null, null])).toBeNull();
    expect(Object.is(run(minus('i'), [0, 0, 0]), 0)).toBe(true);
    const interval: Expr = { kind: 'call', fn: '-', args: [{ kind: 'literal', value: 5_000_000, type: 'interval' }] };
    expect(bind(interval, input).type).toBe('interval');
    expect(run(interval, [0, 0, 0])).toBe(-5_000_000);
  });

  it('refuses a timestamp, as Spark does', () => {
    expect(() => bind(minus('t'), input)).toThrow(AnalysisError);
    expect(() => bind(minus('t'), input)).toThrow(/DATATYPE_MISMATCH/);
  });
});
