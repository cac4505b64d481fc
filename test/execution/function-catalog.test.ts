import { describe, expect, it } from 'vitest';
import { bind } from '../../lib/analysis/binder.js';
import { compile } from '../../lib/execution/evaluate.js';
import { newEvalContext } from '../../lib/execution/eval-context.js';
import { implementedFunctionNames } from '../../lib/execution/functions/index.js';
import { newAttribute } from '../../lib/plan/attribute.js';
import { builtinFunctionNames } from '../../lib/plan/function-catalog/index.js';
import { concat_ws } from '../../lib/plan/functions.js';
import type { Expr } from '../../lib/plan/expressions.js';

describe('the scalar function catalog', () => {
  it('declares a signature for exactly the functions it implements', () => {
    expect([...builtinFunctionNames()].sort()).toEqual([...implementedFunctionNames()].sort());
  });

  it('checks arity with Spark WRONG_NUM_ARGS before anything runs', () => {
    const call: Expr = { kind: 'call', fn: 'concat_ws', args: [] };
    expect(() => bind(call, [])).toThrow(/\[WRONG_NUM_ARGS\.WITHOUT_SUGGESTION\] The `concat_ws` requires > 0 parameters but the actual number is 0\./);
  });

  it('still names an unknown function as Spark does', () => {
    const call: Expr = { kind: 'call', fn: 'no_such_fn', args: [] };
    expect(() => bind(call, [])).toThrow(/\[UNRESOLVED_ROUTINE\] Cannot resolve function `no_such_fn`/);
  });

  it('evaluates a catalog function through the compiled closure (concat_ws skips NULLs, flattens arrays)', () => {
    const input = [newAttribute('a', 'string'), newAttribute('b', 'string'), newAttribute('xs', { kind: 'array', element: 'string' })];
    const bound = bind(concat_ws('-', 'a', 'b', 'xs').expr, input);
    expect(bound.type).toBe('string');
    const run = compile(bound, newEvalContext());
    expect(run(['x', null, ['y', null, 'z']])).toBe('x-y-z');
    expect(run([null, null, []])).toBe('');
  });
});
