/**
 * Spark SQL's expression grammar, by recursive descent, with Spark's precedence (SqlBaseParser.g4),
 * lowest first: OR; AND; NOT; predicates (BETWEEN, IN, LIKE, RLIKE, IS [NOT] NULL, ...) on a value;
 * comparison (= == <> != < <= > >= <=>); |; ^; &; + - ||; * / % DIV; unary - + ~; postfix (.field,
 * ::type); primaries. Function calls stay generic (`{kind:'call', fn}` resolved at bind time);
 * only aggregates and the window functions become their own nodes.
 */
import { parseDataType, type DataType } from '../plan/data-types.js';
import { AGGREGATE_FUNCTIONS, type AggregateFunctionName, type Expr } from '../plan/expressions.js';
import { interval } from '../plan/column.js';
import { parseTimestamp } from '../core/timestamps.js';
import { AnalysisError } from '../errors/sluice-error.js';
import type { Token } from './lexer.js';
import { unsupportedSql } from './sql-errors.js';
import { RESERVED, TokenCursor } from './token-cursor.js';
import { aggregateCall, sessionWindowCall, windowCall } from './function-calls.js';

const COMPARISON: Record<string, string> = { '=': '=', '==': '=', '<>': '!=', '!=': '!=', '<': '<', '<=': '<=', '>': '>', '>=': '>=', '<=>': '<=>' };

const INTERVAL_UNITS = /^(YEAR|MONTH|WEEK|DAY|HOUR|MINUTE|SECOND|MILLISECOND|MICROSECOND)S?$/i;

const call = (fn: string, ...args: Expr[]): Expr => ({ kind: 'call', fn, args });
const not = (e: Expr): Expr => call('not', e);
const bool = (value: boolean): Expr => ({ kind: 'literal', value, type: 'boolean' });

export class ExpressionParser extends TokenCursor {
  // --- named expressions -----------------------------------------------------------------------

  /** `expr [AS] alias`, or `*` / `t.*`. */
  namedExpression(): Expr {
    const e = this.expression();
    if (this.acceptKeyword('AS')) return { kind: 'alias', child: e, name: this.name() };
    if (this.isName()) return { kind: 'alias', child: e, name: this.name() };
    return e;
  }

  // --- boolean expressions ---------------------------------------------------------------------

  expression(): Expr {
    return this.or();
  }

  private or(): Expr {
    let left = this.and();
    while (this.acceptKeyword('OR')) left = call('or', left, this.and());
    return left;
  }

  private and(): Expr {
    let left = this.not();
    while (this.acceptKeyword('AND')) left = call('and', left, this.not());
    return left;
  }

  private not(): Expr {
    if (this.acceptKeyword('NOT') || this.acceptOp('!')) return not(this.not());
    return this.predicate(this.comparison());
  }

  private predicate(value: Expr): Expr {
    if (this.acceptKeyword('IS')) {
      const negated = this.acceptKeyword('NOT');
      if (this.acceptKeyword('NULL')) return call(negated ? 'isnotnull' : 'isnull', value);
      for (const [word, v] of [['TRUE', true], ['FALSE', false]] as const) {
        if (this.acceptKeyword(word)) {
          const test = call('<=>', value, bool(v));
          return negated ? not(test) : test;
        }
      }
      if (this.acceptKeyword('DISTINCT')) {
        this.expectKeyword('FROM');
        const same = call('<=>', value, this.comparison());
        return negated ? same : not(same);
      }
      throw this.error();
    }
    const negated = this.acceptKeyword('NOT');
    let result: Expr;
    if (this.acceptKeyword('BETWEEN')) {
      const lower = this.comparison();
      this.expectKeyword('AND');
      result = call('between', value, lower, this.comparison());
    } else if (this.acceptKeyword('IN')) {
      this.expectOp('(');
      if (this.isKeyword('SELECT')) throw unsupportedSql('IN (subquery)', 'list the values, or join with the other DataFrame (a left semi join).');
      const values = [this.expression()];
      while (this.acceptOp(',')) values.push(this.expression());
      this.expectOp(')');
      result = call('in', value, ...values);
    } else if (this.acceptKeyword('LIKE') || this.acceptKeyword('ILIKE')) {
      const fn = this.isKeyword('LIKE', this.peek(-1)) ? 'like' : 'ilike';
      const pattern = this.comparison();
      if (this.acceptKeyword('ESCAPE')) {
        const t = this.token;
        if (t.kind !== 'string') throw this.error();
        this.pos++;
        result = call(fn, value, pattern, { kind: 'literal', value: t.text, type: 'string' });
      } else {
        result = call(fn, value, pattern);
      }
    } else if (this.acceptKeyword('RLIKE') || this.acceptKeyword('REGEXP')) {
      result = call('rlike', value, this.comparison());
    } else {
      if (negated) throw this.error();
      return value;
    }
    return negated ? not(result) : result;
  }

  // --- value expressions -----------------------------------------------------------------------

  private comparison(): Expr {
    let left = this.bitOr();
    for (;;) {
      const fn = this.token.kind === 'op' ? COMPARISON[this.token.text] : undefined;
      if (!fn) return left;
      this.pos++;
      left = call(fn, left, this.bitOr());
    }
  }

  private leftAssociative(next: () => Expr, operators: Record<string, string>): Expr {
    let left = next();
    for (;;) {
      const t = this.token;
      const key = t.kind === 'op' ? t.text : t.kind === 'ident' ? t.text.toUpperCase() : '';
      const fn = Object.hasOwn(operators, key) ? operators[key] : undefined;
      if (!fn) return left;
      this.pos++;
      left = call(fn, left, next());
    }
  }

  // Spark's FunctionRegistry names for the operators, so the function registry resolves them.
  private bitOr = (): Expr => this.leftAssociative(this.bitXor, { '|': '|' });
  private bitXor = (): Expr => this.leftAssociative(this.bitAnd, { '^': '^' });
  private bitAnd = (): Expr => this.leftAssociative(this.additive, { '&': '&' });
  private additive = (): Expr => this.leftAssociative(this.multiplicative, { '+': '+', '-': '-', '||': 'concat' });
  private multiplicative = (): Expr => this.leftAssociative(this.unary, { '*': '*', '/': '/', '%': '%', DIV: 'div' });

  private unary = (): Expr => {
    if (this.acceptOp('-')) {
      // `-5` is the literal -5 (Spark's `number` rule), so -2147483648 is an int.
      if (this.token.kind === 'number' && !this.isOp('::', this.peek())) return this.number(this.tokens[this.pos++]!, true);
      return call('-', this.unary());
    }
    if (this.acceptOp('+')) return this.unary();
    if (this.acceptOp('~')) return call('~', this.unary());
    return this.postfix(this.primary());
  };

  private postfix(e: Expr): Expr {
    for (;;) {
      if (this.isOp('.') && this.isFieldName(this.peek())) {
        this.pos++;
        const field = this.tokens[this.pos++]!.text;
        e = e.kind === 'column' ? { kind: 'column', name: `${e.name}.${field}` } : call('get_field', e, { kind: 'literal', value: field, type: 'string' });
      } else if (this.acceptOp('::')) {
        e = { kind: 'cast', child: e, to: this.dataType() };
      } else if (this.isOp('[')) {
        throw unsupportedSql('subscripts (x[i])', 'use element_at(x, i + 1) for arrays, or x.field for structs.');
      } else {
        return e;
      }
    }
  }

  // --- primaries -------------------------------------------------------------------------------

  private primary(): Expr {
    const t = this.token;
    switch (t.kind) {
      case 'number':
        this.pos++;
        return this.number(t);
      case 'string':
        return { kind: 'literal', value: this.strings(), type: 'string' };
      case 'quotedIdent':
        return this.columnOrCall();
      case 'op':
        if (this.acceptOp('(')) {
          if (this.isKeyword('SELECT')) throw unsupportedSql('scalar subqueries', 'join with the other DataFrame instead.');
          const inner = this.expression();
          if (this.isOp(',')) throw unsupportedSql('row constructors ((a, b))', 'use struct(a, b).');
          this.expectOp(')');
          return inner;
        }
        if (this.acceptOp('*')) return { kind: 'star' };
        throw this.error();
      case 'ident':
        return this.keywordPrimary(t) ?? this.columnOrCall();
      default:
        throw this.error();
    }
  }

  /** Literals and forms that start with a keyword; null when the word is a name. */
  private keywordPrimary(t: Token): Expr | null {
    const word = t.text.toUpperCase();
    const next = this.peek();
    switch (word) {
      case 'NULL': this.pos++; return { kind: 'literal', value: null, type: 'null' };
      case 'TRUE': this.pos++; return bool(true);
      case 'FALSE': this.pos++; return bool(false);
      case 'CASE': this.pos++; return this.caseWhen();
      case 'CAST':
      case 'TRY_CAST':
        if (!this.isOp('(', next)) return null;
        this.pos += 2;
        return this.cast(word === 'TRY_CAST');
      case 'INTERVAL':
        if (next.kind !== 'string' && next.kind !== 'number' && !this.isOp('-', next)) return null;
        this.pos++;
        return this.intervalLiteral();
      case 'TIMESTAMP':
      case 'TIMESTAMP_LTZ':
        if (next.kind !== 'string') return null;
        this.pos += 2;
        return this.timestampLiteral(next);
      case 'DATE':
        if (next.kind !== 'string') return null;
        this.pos += 2;
        return { kind: 'cast', child: { kind: 'literal', value: next.text, type: 'string' }, to: this.typeFromText('date', next) };
      case 'CURRENT_TIMESTAMP':
      case 'CURRENT_DATE':
        if (this.isOp('(', next)) return null;
        this.pos++;
        return call(word.toLowerCase());
      default:
        if (RESERVED.has(word)) throw this.error();
        return null;
    }
  }

  private strings(): string {
    let text = '';
    while (this.token.kind === 'string') text += this.tokens[this.pos++]!.text;
    return text;
  }

  private number(t: Token, negative = false): Expr {
    const text = t.text.toUpperCase();
    const suffix = /(BD|[LSYDF])$/.exec(text)?.[1];
    const digits = suffix ? text.slice(0, -suffix.length) : text;
    if (suffix === 'D' || suffix === 'F' || /[.E]/.test(digits) || suffix === 'BD') {
      // Spark types 1.5 and 2BD as decimal; Sluice has no decimal yet, so they are doubles.
      return { kind: 'literal', value: (negative ? -1 : 1) * Number(digits), type: 'double' };
    }
    const value = negative ? -BigInt(digits) : BigInt(digits);
    if (suffix === 'L') return this.numberLiteral(value, 'long');
    return this.numberLiteral(value, value <= 2147483647n && value >= -2147483648n ? 'int' : 'long');
  }

  /** An int or long literal in Sluice's value form (a long beyond 2^53 is a bigint). */
  private numberLiteral(value: number | bigint, type: DataType): Expr {
    if (type === 'double') return { kind: 'literal', value: Number(value), type };
    const big = BigInt(value);
    if (type === 'int' && (big > 2147483647n || big < -2147483648n)) return this.numberLiteral(big, 'long');
    if (big > 9223372036854775807n || big < -9223372036854775808n) {
      return { kind: 'literal', value: Number(big), type: 'double' };
    }
    const safe = big <= BigInt(Number.MAX_SAFE_INTEGER) && big >= BigInt(Number.MIN_SAFE_INTEGER);
    return { kind: 'literal', value: safe ? Number(big) : big, type };
  }

  private caseWhen(): Expr {
    const subject = this.isKeyword('WHEN') ? null : this.expression();
    const branches: [Expr, Expr][] = [];
    while (this.acceptKeyword('WHEN')) {
      const condition = this.expression();
      this.expectKeyword('THEN');
      branches.push([subject ? call('=', subject, condition) : condition, this.expression()]);
    }
    if (branches.length === 0) throw this.error();
    const otherwise = this.acceptKeyword('ELSE') ? this.expression() : null;
    this.expectKeyword('END');
    return { kind: 'case', branches, otherwise };
  }

  private cast(tryCast: boolean): Expr {
    const child = this.expression();
    this.expectKeyword('AS');
    const to = this.dataType();
    this.expectOp(')');
    return { kind: 'cast', child, to, ...(tryCast ? { try: true } : {}) };
  }

  /** A type's text (`int`, `decimal(10,2)`, `array<struct<a:int>>`), given to parseDataType. */
  private dataType(): DataType {
    const first = this.token;
    if (first.kind !== 'ident' && first.kind !== 'quotedIdent') throw this.error();
    this.pos++;
    if (this.isOp('<') || this.isOp('(')) {
      let depth = 0;
      do {
        if (this.isOp('<') || this.isOp('(')) depth++;
        else if (this.isOp('>') || this.isOp(')')) depth--;
        else if (this.token.kind === 'eof') throw this.error();
        this.pos++;
      } while (depth > 0);
    }
    return this.typeFromText(this.sql.slice(first.start, this.peek(-1).end), first);
  }

  private typeFromText(text: string, at: Token): DataType {
    try {
      return parseDataType(text);
    } catch (cause) {
      throw new AnalysisError(`[UNSUPPORTED_DATATYPE] Unsupported data type "${text.toUpperCase()}".`, {
        code: 'UNSUPPORTED_DATATYPE', errorClass: 'UNSUPPORTED_DATATYPE', cause, context: { position: at.start },
        hint: (cause as Error).message,
      });
    }
  }

  /** `INTERVAL '5 minutes'`, `INTERVAL 5 MINUTES`, `INTERVAL '5' MINUTE`, `INTERVAL 1 HOUR 30 MINUTES`. */
  private intervalLiteral(): Expr {
    const start = this.token;
    if (start.kind === 'string' && !INTERVAL_UNITS.test(this.peek().text)) {
      this.pos++;
      return { kind: 'literal', value: interval(start.text).micros, type: 'interval' };
    }
    const parts: string[] = [];
    while (this.token.kind === 'number' || this.token.kind === 'string' || this.isOp('-')) {
      const sign = this.acceptOp('-') ? '-' : '';
      const amount = this.token;
      if (amount.kind !== 'number' && amount.kind !== 'string') throw this.error();
      this.pos++;
      const unit = this.token;
      if (unit.kind !== 'ident' || !INTERVAL_UNITS.test(unit.text)) throw this.error();
      this.pos++;
      parts.push(`${sign}${amount.text} ${unit.text}`);
    }
    if (parts.length === 0) throw this.error();
    return { kind: 'literal', value: interval(parts.join(' ')).micros, type: 'interval' };
  }

  private timestampLiteral(t: Token): Expr {
    const micros = parseTimestamp(t.text);
    if (micros === null) {
      throw new AnalysisError(`[INVALID_TYPED_LITERAL] The value of the typed literal "TIMESTAMP" is invalid: '${t.text}'.`, {
        code: 'INVALID_TYPED_LITERAL', errorClass: 'INVALID_TYPED_LITERAL',
      });
    }
    return { kind: 'literal', value: micros, type: 'timestamp' };
  }

  /** A (dotted) column name, `t.*`, or a function call `name(args)`. */
  private columnOrCall(): Expr {
    const first = this.token;
    const name = this.name();
    if (this.isOp('(') && first.kind === 'ident') {
      this.pos++;
      return this.functionCall(name.toLowerCase(), first);
    }
    const parts = [name];
    while (this.isOp('.')) {
      if (this.isOp('*', this.peek())) {
        this.pos += 2;
        return { kind: 'star', qualifier: parts.join('.') };
      }
      if (!this.isFieldName(this.peek())) break;
      this.pos++;
      parts.push(this.tokens[this.pos++]!.text);
    }
    return { kind: 'column', name: parts.join('.') };
  }

  /** After `name(`: an aggregate, a window, or a generic call resolved when the query is bound. */
  private functionCall(fn: string, at: Token): Expr {
    const distinct = this.acceptKeyword('DISTINCT');
    if (!distinct) this.acceptKeyword('ALL');
    const args: Expr[] = [];
    if (!this.isOp(')')) {
      do args.push(this.expression()); while (this.acceptOp(','));
    }
    this.expectOp(')');
    const ignoreNulls = this.acceptKeyword('IGNORE', 'NULLS');
    if (!ignoreNulls) this.acceptKeyword('RESPECT', 'NULLS');
    if (ignoreNulls && fn !== 'first' && fn !== 'last') throw this.error(this.peek(-2));
    if (ignoreNulls) args.push(bool(true));
    if (this.isKeyword('OVER')) throw unsupportedSql('window functions (OVER)', 'use DataFrame.withWindowFunction on a static DataFrame.');
    if (this.isKeyword('FILTER') && this.isOp('(', this.peek())) throw unsupportedSql('aggregate FILTER (WHERE ...)', 'aggregate a CASE WHEN expression instead.');
    const star = args.findIndex((a) => a.kind === 'star' && !a.qualifier);
    if ((AGGREGATE_FUNCTIONS as readonly string[]).includes(fn)) {
      if (star >= 0 && (fn !== 'count' || args.length !== 1)) throw this.error(this.peek(-1));
      return aggregateCall(fn as AggregateFunctionName, star >= 0 ? [] : args, distinct);
    }
    if (star >= 0) throw this.error(at);
    if (distinct) throw unsupportedSql(`DISTINCT in ${fn}()`, 'DISTINCT applies to aggregate functions only.');
    if (fn === 'window') return windowCall(args, at);
    if (fn === 'session_window') return sessionWindowCall(args, at);
    return call(fn, ...args);
  }
}
