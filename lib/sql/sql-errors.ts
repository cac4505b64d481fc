/**
 * Spark's parse errors. Spark's ParseException is an AnalysisException, so these are
 * AnalysisErrors carrying Spark's error class, message, SQLSTATE and `== SQL ==` pointer.
 */
import { AnalysisError } from '../errors/sluice-error.js';

function lineAndColumn(sql: string, offset: number): { line: number; column: number } {
  const before = sql.slice(0, offset).split('\n');
  return { line: before.length, column: before[before.length - 1]!.length };
}

/** Spark's `== SQL ==` block: the text, with `---^^^` under the error's position. */
function pointer(sql: string, offset: number): string {
  const { line, column } = lineAndColumn(sql, offset);
  const lines = sql.split('\n');
  return ['== SQL ==', ...lines.slice(0, line), `${'-'.repeat(column)}^^^`, ...lines.slice(line)].join('\n');
}

/**
 * `[PARSE_SYNTAX_ERROR] Syntax error at or near 'FROM'. SQLSTATE: 42601 (line 1, pos 13)`.
 * `near` is `at or near 'X'` or `at or near end of input`.
 */
export function syntaxError(sql: string, offset: number, near: string, errorClass = 'PARSE_SYNTAX_ERROR'): AnalysisError {
  const { line, column } = lineAndColumn(sql, offset);
  const sentence = errorClass === 'UNCLOSED_BRACKETED_COMMENT'
    ? 'Found an unclosed bracketed comment. Please, append */ at the end of the comment.'
    : `Syntax error ${near}.`;
  return new AnalysisError(`[${errorClass}] ${sentence} SQLSTATE: 42601 (line ${line}, pos ${column})\n\n${pointer(sql, offset)}`, {
    code: errorClass, errorClass, context: { line, position: column },
  });
}

/** A construct that parses in Spark but that Sluice's SQL does not run (yet). */
export function unsupportedSql(what: string, hint: string): AnalysisError {
  return new AnalysisError(`[UNSUPPORTED_FEATURE] Sluice's SQL does not support ${what}.`, {
    code: 'UNSUPPORTED_SQL', errorClass: 'UNSUPPORTED_FEATURE', hint,
  });
}

/** An analysis error with Spark's class, sentence and SQLSTATE. */
export function sqlAnalysisError(errorClass: string, sentence: string, sqlState: string, hint?: string): AnalysisError {
  return new AnalysisError(`[${errorClass}] ${sentence} SQLSTATE: ${sqlState}`, { code: errorClass, errorClass, ...(hint ? { hint } : {}) });
}
