/**
 * Spark SQL's tokens: identifiers (plain or `backquoted`), string literals in '...' or "..." with
 * backslash escapes, numbers with Spark's suffixes (10L, 1.5D, 2BD), operators, `--` and block
 * comments. Positions are kept so a syntax error can point where Spark's would.
 */
import { syntaxError } from './sql-errors.js';

export type TokenKind = 'ident' | 'quotedIdent' | 'string' | 'number' | 'op' | 'eof';

export interface Token {
  readonly kind: TokenKind;
  /** The identifier, the unescaped string, the number's text (suffix included), or the operator. */
  readonly text: string;
  /** Offset in the SQL text of the token's first character. */
  readonly start: number;
  readonly end: number;
}

// Longest first, so `<=>` wins over `<=` and `<`. `>>`/`<<` are not shift operators here: a type
// such as array<array<int>> must close with two `>` tokens.
const OPERATORS = ['<=>', '<>', '<=', '>=', '==', '!=', '||', '::', '(', ')', ',', '.', '*', '/', '%', '+', '-', '=', '<', '>', '&', '|', '^', '~', '!', '[', ']', ';', ':'];

const ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', b: '\b', 0: '\0', Z: '\x1a' };

export function tokenize(sql: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    if (/\s/.test(c)) { i++; continue; }
    if (sql.startsWith('--', i)) {
      while (i < sql.length && sql[i] !== '\n') i++;
      continue;
    }
    if (sql.startsWith('/*', i)) {
      const close = sql.indexOf('*/', i + 2);
      if (close < 0) throw syntaxError(sql, i, 'unclosed bracketed comment', 'UNCLOSED_BRACKETED_COMMENT');
      i = close + 2;
      continue;
    }
    const start = i;
    if (c === "'" || c === '"') {
      let text = '';
      i++;
      while (i < sql.length && sql[i] !== c) {
        if (sql[i] === '\\' && i + 1 < sql.length) {
          const next = sql[i + 1]!;
          // Spark keeps the backslash before % and _ so LIKE patterns stay escaped.
          text += next === '%' || next === '_' ? `\\${next}` : ESCAPES[next] ?? next;
          i += 2;
        } else {
          text += sql[i++];
        }
      }
      if (i >= sql.length) throw syntaxError(sql, start, `at or near '${c}'`);
      i++;
      tokens.push({ kind: 'string', text, start, end: i });
      continue;
    }
    if (c === '`') {
      let text = '';
      i++;
      for (;;) {
        if (i >= sql.length) throw syntaxError(sql, start, "at or near '`'");
        if (sql[i] === '`') {
          if (sql[i + 1] === '`') { text += '`'; i += 2; continue; }
          i++;
          break;
        }
        text += sql[i++];
      }
      tokens.push({ kind: 'quotedIdent', text, start, end: i });
      continue;
    }
    const number = /^(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:BD|[LSYDF])?(?![A-Za-z_0-9])/i.exec(sql.slice(i));
    if (number) {
      i += number[0].length;
      tokens.push({ kind: 'number', text: number[0], start, end: i });
      continue;
    }
    const word = /^[A-Za-z_0-9]+/.exec(sql.slice(i));
    if (word) {
      i += word[0].length;
      tokens.push({ kind: 'ident', text: word[0], start, end: i });
      continue;
    }
    const op = OPERATORS.find((o) => sql.startsWith(o, i));
    if (!op) throw syntaxError(sql, i, `at or near '${c}'`);
    i += op.length;
    tokens.push({ kind: 'op', text: op, start, end: i });
  }
  tokens.push({ kind: 'eof', text: '', start: sql.length, end: sql.length });
  return tokens;
}
