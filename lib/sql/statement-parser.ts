/**
 * One SELECT statement: SELECT [DISTINCT] items [FROM relation [JOIN ...]] [WHERE] [GROUP BY]
 * [HAVING] [ORDER BY]. The result is a small tree that lib/api/sql-query.ts turns into DataFrame
 * calls, so SQL and the DataFrame API share one analysis.
 */
import type { Expr } from '../plan/expressions.js';
import type { JoinType } from '../plan/logical-plan.js';
import type { SortOrder } from '../plan/column.js';
import { ExpressionParser } from './expression-parser.js';
import { sqlAnalysisError, unsupportedSql } from './sql-errors.js';

export type Relation =
  | { readonly kind: 'view'; readonly name: string; readonly alias: string | null; readonly position: number }
  | { readonly kind: 'subquery'; readonly query: SelectStatement; readonly alias: string | null }
  | {
    readonly kind: 'join';
    readonly left: Relation;
    readonly right: Relation;
    readonly joinType: JoinType;
    readonly on: Expr | null;
    readonly using: readonly string[] | null;
  };

export interface SelectStatement {
  readonly distinct: boolean;
  readonly items: readonly Expr[];
  readonly from: Relation | null;
  readonly where: Expr | null;
  /** null without GROUP BY; `[]` never (Spark needs at least one key after GROUP BY). */
  readonly groupBy: readonly Expr[] | null;
  readonly having: Expr | null;
  readonly orderBy: readonly SortOrder[];
}

const JOIN_TYPES: readonly (readonly [readonly string[], JoinType])[] = [
  [['INNER'], 'inner'], [['CROSS'], 'cross'],
  [['LEFT', 'OUTER'], 'left_outer'], [['LEFT', 'SEMI'], 'left_semi'], [['LEFT', 'ANTI'], 'left_anti'], [['LEFT'], 'left_outer'],
  [['RIGHT', 'OUTER'], 'right_outer'], [['RIGHT'], 'right_outer'],
  [['FULL', 'OUTER'], 'full_outer'], [['FULL'], 'full_outer'],
  [['SEMI'], 'left_semi'], [['ANTI'], 'left_anti'],
];

export class StatementParser extends ExpressionParser {
  statement(): SelectStatement {
    const first = this.token.kind === 'ident' ? this.token.text.toUpperCase() : '';
    if (['WITH', 'CREATE', 'INSERT', 'UPDATE', 'DELETE', 'MERGE', 'DROP', 'ALTER', 'VALUES', 'TABLE', 'FROM', 'EXPLAIN', 'SET', 'SHOW', 'DESCRIBE'].includes(first)) {
      throw unsupportedSql(`${first} statements`, 'session.sql() runs one SELECT over temp views; build other steps with the DataFrame API.');
    }
    const query = this.select();
    this.end();
    return query;
  }

  private select(): SelectStatement {
    this.expectKeyword('SELECT');
    const distinct = this.acceptKeyword('DISTINCT');
    if (!distinct) this.acceptKeyword('ALL');
    const items = [this.namedExpression()];
    while (this.acceptOp(',')) {
      if (this.isKeyword('FROM')) {
        throw sqlAnalysisError('TRAILING_COMMA_IN_SELECT', 'Trailing comma detected in SELECT clause. Remove the trailing comma before the FROM clause.', '42601');
      }
      items.push(this.namedExpression());
    }
    const from = this.acceptKeyword('FROM') ? this.relation() : null;
    const where = this.acceptKeyword('WHERE') ? this.expression() : null;
    let groupBy: Expr[] | null = null;
    if (this.acceptKeyword('GROUP', 'BY')) {
      groupBy = [this.expression()];
      while (this.acceptOp(',')) groupBy.push(this.expression());
    }
    const having = this.acceptKeyword('HAVING') ? this.expression() : null;
    const orderBy: SortOrder[] = [];
    if (this.acceptKeyword('ORDER', 'BY')) {
      do orderBy.push(this.sortItem()); while (this.acceptOp(','));
    }
    if (this.isKeyword('LIMIT')) throw unsupportedSql('LIMIT', 'streaming queries cannot be limited in Sluice; filter the rows instead.');
    if (['UNION', 'EXCEPT', 'INTERSECT'].some((w) => this.isKeyword(w))) {
      throw unsupportedSql(`${this.token.text.toUpperCase()} in SQL text`, 'run each SELECT with session.sql() and combine them with DataFrame.union/except/intersect.');
    }
    return { distinct, items, from, where, groupBy, having, orderBy };
  }

  private sortItem(): SortOrder {
    const expr = this.expression();
    const descending = this.acceptKeyword('DESC') ? true : (this.acceptKeyword('ASC'), false);
    if (this.acceptKeyword('NULLS')) {
      if (!this.acceptKeyword('FIRST') && !this.acceptKeyword('LAST')) throw this.error();
      throw unsupportedSql('NULLS FIRST/LAST', "drop it: Sluice sorts NULLs as Spark's default (first ascending, last descending).");
    }
    return { expr, descending };
  }

  private relation(): Relation {
    let left = this.relationPrimary();
    for (;;) {
      if (this.acceptOp(',')) {
        left = { kind: 'join', left, right: this.relationPrimary(), joinType: 'cross', on: null, using: null };
        continue;
      }
      const joinType = this.joinType();
      if (!joinType) return left;
      const right = this.relationPrimary();
      let on: Expr | null = null;
      let using: string[] | null = null;
      if (this.acceptKeyword('ON')) on = this.expression();
      else if (this.acceptKeyword('USING')) {
        this.expectOp('(');
        using = [this.name()];
        while (this.acceptOp(',')) using.push(this.name());
        this.expectOp(')');
      }
      left = { kind: 'join', left, right, joinType, on, using };
    }
  }

  /** `[INNER|CROSS|LEFT [OUTER|SEMI|ANTI]|RIGHT [OUTER]|FULL [OUTER]] JOIN`, or null. */
  private joinType(): JoinType | null {
    if (this.acceptKeyword('JOIN')) return 'inner';
    for (const [words, type] of JOIN_TYPES) {
      if (this.acceptKeyword(...words, 'JOIN')) return type;
    }
    if (this.acceptKeyword('NATURAL')) throw unsupportedSql('NATURAL JOIN', 'name the columns: JOIN ... USING (a, b).');
    return null;
  }

  private relationPrimary(): Relation {
    if (this.acceptOp('(')) {
      if (!this.isKeyword('SELECT')) throw this.error();
      const query = this.select();
      this.expectOp(')');
      return { kind: 'subquery', query, alias: this.relationAlias() };
    }
    const position = this.token.start;
    const parts = [this.name()];
    while (this.acceptOp('.')) parts.push(this.name());
    return { kind: 'view', name: parts.join('.'), alias: this.relationAlias(), position };
  }

  private relationAlias(): string | null {
    if (this.acceptKeyword('AS')) return this.name();
    return this.isName() ? this.name() : null;
  }
}
