/** Spark SQL text: expression strings (`expr('amount * 2 AS x')`) and SELECT statements. */
import type { Expr } from '../plan/expressions.js';
import { tokenize } from './lexer.js';
import { StatementParser, type SelectStatement } from './statement-parser.js';

export type { Relation, SelectStatement } from './statement-parser.js';
export { sqlAnalysisError } from './sql-errors.js';

/** Parses one expression, optionally named (`amount * 2 AS x`), as Spark's `expr()` does. */
export function parseExpression(sql: string): Expr {
  const parser = new StatementParser(sql, tokenize(sql));
  const e = parser.namedExpression();
  parser.end();
  return e;
}

/** Parses one SELECT statement (a trailing `;` allowed). */
export function parseStatement(sql: string): SelectStatement {
  return new StatementParser(sql, tokenize(sql)).statement();
}
