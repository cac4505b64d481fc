/**
 * Spark's TimeWindowing / SessionWindowing analyzer rules refuse an operator whose expressions hold
 * more than one distinct window()/session_window(): each would multiply the rows (a cartesian
 * product). Spark raises it when the DataFrame is defined (analysis is eager), for batch and
 * streaming alike; the same window written twice (grouping key and select) is one expression.
 */
import { exists, type Expr } from '../plan/expressions.js';
import { AnalysisError } from '../errors/sluice-error.js';

export const MULTIPLE_WINDOWS_MESSAGE =
  'Multiple time/session window expressions would result in a cartesian product of rows, therefore they are currently not supported.';

export function checkSingleWindowExpression(expressions: readonly Expr[]): void {
  const windows = new Set<string>();
  for (const e of expressions) {
    exists(e, (x) => {
      if (x.kind === 'timeWindow' || x.kind === 'sessionWindow') windows.add(JSON.stringify(x));
      return false;
    });
  }
  if (windows.size > 1) {
    throw new AnalysisError(MULTIPLE_WINDOWS_MESSAGE, {
      code: 'MULTIPLE_TIME_WINDOW_EXPRESSIONS',
      errorClass: '_LEGACY_ERROR_TEMP_1039',
      hint: 'group by one window() or session_window(); for several window sizes, run one aggregation per size (one query each, or a union of their results downstream).',
    });
  }
}
