import type { BoundCall } from '../../analysis/bound-expr.js';
import type { EvalContext } from '../eval-context.js';

/** A compiled expression over a positional row (the same shape as evaluate.ts's Evaluator, which imports this table). */
export type Evaluator = (row: unknown[]) => unknown;

/**
 * The evaluation half of a scalar function (its signature: lib/plan/function-catalog). `compile`
 * runs once per query; the closure it returns runs per row, so parse literal arguments (patterns,
 * formats) here, not in the closure.
 */
export interface ScalarFunctionImplementation {
  readonly name: string;
  compile(args: readonly Evaluator[], call: BoundCall, ctx: EvalContext): Evaluator;
}

/** Most functions return NULL when any argument is NULL: this wraps a function of non-NULL values. */
export function nullIntolerant(args: readonly Evaluator[], f: (values: unknown[]) => unknown): Evaluator {
  return (row) => {
    const values = new Array<unknown>(args.length);
    for (let i = 0; i < args.length; i++) {
      const v = args[i]!(row);
      if (v === null || v === undefined) return null;
      values[i] = v;
    }
    return f(values);
  };
}
