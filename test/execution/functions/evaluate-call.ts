/** Binds and compiles one expression over named, typed input columns, as a select would. */
import { bind } from '../../../lib/analysis/binder.js';
import { compile } from '../../../lib/execution/evaluate.js';
import { newEvalContext } from '../../../lib/execution/eval-context.js';
import { newAttribute } from '../../../lib/plan/attribute.js';
import type { Column } from '../../../lib/plan/column.js';
import { parseDataType, type DataType } from '../../../lib/plan/data-types.js';

export function evaluator(column: Column, schema: Record<string, string> = {}): { type: DataType; run: (...values: unknown[]) => unknown } {
  const input = Object.entries(schema).map(([name, type]) => newAttribute(name, parseDataType(type)));
  const bound = bind(column.expr, input);
  const f = compile(bound, newEvalContext());
  return { type: bound.type, run: (...values) => f(values) };
}
