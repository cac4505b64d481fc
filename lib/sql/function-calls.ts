/** The function calls the parser builds nodes for: aggregates and the two window functions. */
import type { AggregateFunctionName, Expr } from '../plan/expressions.js';
import { sessionWindowExpr, timeWindowExpr } from '../plan/window-expressions.js';
import { AnalysisError } from '../errors/sluice-error.js';
import type { Token } from './lexer.js';

/** An aggregate; `first(x, true)`/`last(x, true)` skip NULLs (args: [] for count(*)). */
export function aggregateCall(fn: AggregateFunctionName, args: Expr[], distinct: boolean): Expr {
  if ((fn === 'first' || fn === 'last') && args.length === 2) {
    const flag = args[1]!;
    if (flag.kind !== 'literal' || typeof flag.value !== 'boolean') {
      throw new AnalysisError(`[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] The second argument of ${fn}() must be a boolean literal (ignoreNulls).`, {
        code: 'DATATYPE_MISMATCH', errorClass: 'DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE',
      });
    }
    return { kind: 'aggregate', fn, args: [args[0]!], distinct, ignoreNulls: flag.value };
  }
  return { kind: 'aggregate', fn, args, distinct, ignoreNulls: false };
}

/** `window(ts, size[, slide[, start]])` with literal durations. */
export function windowCall(args: Expr[], at: Token): Expr {
  if (args.length < 2 || args.length > 4) throw wrongArgs('window', args.length, '[2, 3, 4]', at);
  const [time, ...durations] = args as [Expr, ...Expr[]];
  const [size, slide, start] = durations.map((d) => duration('window', d));
  return timeWindowExpr(time, size!, slide, start);
}

/** `session_window(ts, gap)`: a literal gap, or an expression giving one per row. */
export function sessionWindowCall(args: Expr[], at: Token): Expr {
  if (args.length !== 2) throw wrongArgs('session_window', args.length, '2', at);
  const gap = args[1]!;
  return sessionWindowExpr(args[0]!, gap.kind === 'literal' && gap.type === 'string' ? String(gap.value) : gap);
}

/** A window length: a string ('5 minutes') or an INTERVAL literal (microseconds). */
function duration(fn: string, e: Expr): string | number {
  if (e.kind === 'literal' && e.type === 'string') return String(e.value);
  if (e.kind === 'literal' && e.type === 'interval') return Number(e.value);
  throw new AnalysisError(`The duration and time inputs to ${fn} must be an integer, long or string literal.`, {
    code: 'NON_FOLDABLE_INPUT', hint: "write the duration as a literal, e.g. '5 minutes' or INTERVAL 5 MINUTES.",
  });
}

function wrongArgs(fn: string, given: number, expected: string, at: Token): AnalysisError {
  return new AnalysisError(
    `[WRONG_NUM_ARGS.WITHOUT_SUGGESTION] The \`${fn}\` requires ${expected} parameters but the actual number is ${given}.`,
    { code: 'WRONG_NUM_ARGS', errorClass: 'WRONG_NUM_ARGS.WITHOUT_SUGGESTION', context: { position: at.start } },
  );
}
