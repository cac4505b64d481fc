/** Token-level helpers shared by the expression and statement parsers, and Spark's reserved words. */
import { AnalysisError } from '../errors/sluice-error.js';
import type { Token } from './lexer.js';
import { syntaxError } from './sql-errors.js';

/**
 * Words that end an expression or a clause; they are not taken as implicit aliases or bare column
 * names (Spark's non-ANSI mode allows more of them as names; backquote them here).
 */
export const RESERVED = new Set([
  'SELECT', 'FROM', 'WHERE', 'GROUP', 'BY', 'HAVING', 'ORDER', 'LIMIT', 'AS', 'AND', 'OR', 'NOT', 'IS',
  'NULL', 'BETWEEN', 'IN', 'LIKE', 'ILIKE', 'RLIKE', 'REGEXP', 'CASE', 'WHEN', 'THEN', 'ELSE', 'END',
  'JOIN', 'ON', 'USING', 'INNER', 'LEFT', 'RIGHT', 'FULL', 'OUTER', 'SEMI', 'ANTI', 'CROSS', 'TRUE',
  'FALSE', 'DISTINCT', 'ALL', 'UNION', 'EXCEPT', 'INTERSECT', 'DIV', 'ESCAPE', 'OVER', 'SORT', 'CLUSTER', 'DISTRIBUTE', 'NATURAL',
]);

export class TokenCursor {
  protected pos = 0;

  constructor(protected readonly sql: string, protected readonly tokens: readonly Token[]) {}

  // --- token helpers ---------------------------------------------------------------------------

  protected get token(): Token {
    return this.tokens[this.pos]!;
  }

  protected peek(offset = 1): Token {
    return this.tokens[Math.min(this.pos + offset, this.tokens.length - 1)]!;
  }

  protected isKeyword(word: string, t: Token = this.token): boolean {
    return t.kind === 'ident' && t.text.toUpperCase() === word;
  }

  protected acceptKeyword(...words: string[]): boolean {
    if (words.every((w, i) => this.isKeyword(w, this.peek(i)))) {
      this.pos += words.length;
      return true;
    }
    return false;
  }

  protected expectKeyword(word: string): void {
    if (!this.acceptKeyword(word)) throw this.error();
  }

  protected isOp(op: string, t: Token = this.token): boolean {
    return t.kind === 'op' && t.text === op;
  }

  protected acceptOp(op: string): boolean {
    if (!this.isOp(op)) return false;
    this.pos++;
    return true;
  }

  protected expectOp(op: string): void {
    if (!this.acceptOp(op)) throw this.error();
  }

  /** Spark's message for the token where parsing stopped. */
  protected error(t: Token = this.token): AnalysisError {
    if (t.kind === 'eof') return syntaxError(this.sql, t.start, 'at or near end of input');
    return syntaxError(this.sql, t.start, `at or near '${this.sql.slice(t.start, t.end)}'`);
  }

  end(): void {
    this.acceptOp(';');
    if (this.token.kind !== 'eof') throw this.error();
  }

  /** An identifier usable as a name: backquoted, or a plain word that is not reserved. */
  protected isName(t: Token = this.token): boolean {
    return t.kind === 'quotedIdent' || (t.kind === 'ident' && !RESERVED.has(t.text.toUpperCase()) && !/^\d/.test(t.text));
  }

  protected name(): string {
    if (!this.isName()) throw this.error();
    return this.tokens[this.pos++]!.text;
  }

  /** After a dot any word names a field or column, reserved or not (`w.end`). */
  protected isFieldName(t: Token): boolean {
    return t.kind === 'quotedIdent' || (t.kind === 'ident' && !/^\d/.test(t.text));
  }
}
