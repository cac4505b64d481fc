/**
 * Turns a parsed SELECT into DataFrame calls (FROM views and joins, WHERE, GROUP BY + HAVING,
 * the select list, DISTINCT, ORDER BY), so SQL is analysed exactly as the DataFrame API is.
 * An aggregation becomes groupBy(keys).agg(aggregates) and a projection over its output that
 * computes the select list from keys and aggregate results, as Spark's analyzer rewrites it.
 */
import { Column, type SortOrder } from '../plan/column.js';
import { assertNever, children, containsAggregate, defaultName, describe, type Expr } from '../plan/expressions.js';
import type { Attribute } from '../plan/attribute.js';
import { resolveName } from '../analysis/binder.js';
import { parseStatement, sqlAnalysisError, type Relation, type SelectStatement } from '../sql/index.js';
import type { DataFrame } from './data-frame.js';

/** Temp views by lower-cased name, as `createOrReplaceTempView` registered them. */
export type TempViews = ReadonlyMap<string, DataFrame>;

export function runSql(sql: string, views: TempViews): DataFrame {
  return planSelect(parseStatement(sql), views);
}

function planSelect(q: SelectStatement, views: TempViews): DataFrame {
  if (!q.from) {
    throw sqlAnalysisError('UNSUPPORTED_FEATURE', "Sluice's SQL does not support SELECT without FROM.", '0A000', 'select from a view registered with createOrReplaceTempView.');
  }
  let df = planRelation(q.from, views);
  if (q.where) df = df.filter(new Column(q.where));
  const aggregating = q.groupBy !== null || q.items.some(containsAggregate) || (q.having !== null && containsAggregate(q.having));
  if (aggregating) {
    df = planAggregate(df, q);
  } else {
    if (q.having) {
      throw sqlAnalysisError('MISSING_GROUP_BY', 'The query does not include a GROUP BY clause. Add GROUP BY or turn it into the window functions using OVER clauses.', '42803');
    }
    df = df.select(...q.items.map((e) => new Column(e)));
  }
  // Spark plans DISTINCT as an aggregation on every column (not dropDuplicates): on a stream it
  // keeps state per distinct row and follows the aggregation rules of the output modes.
  if (q.distinct) df = df.groupBy(...df.plan.output.map((a) => new Column(ref(a)))).agg();
  if (q.orderBy.length > 0) df = df.orderBy(...q.orderBy.map((o) => ordinalSort(o, df.columns)));
  return df;
}

function planRelation(r: Relation, views: TempViews): DataFrame {
  switch (r.kind) {
    case 'view': {
      const view = views.get(r.name.toLowerCase());
      if (!view) {
        const quoted = r.name.split('.').map((p) => `\`${p}\``).join('.');
        const known = [...views.keys()].map((k) => `\`${k}\``).join(', ');
        throw sqlAnalysisError(
          'TABLE_OR_VIEW_NOT_FOUND',
          `The table or view ${quoted} cannot be found. Verify the spelling and correctness of the schema and catalog.`,
          '42P01',
          known ? `the registered views are ${known}; register one with df.createOrReplaceTempView(name).` : 'register the DataFrame first: df.createOrReplaceTempView(name).',
        );
      }
      return view.as(r.alias ?? r.name.split('.').pop()!);
    }
    case 'subquery': {
      const inner = planSelect(r.query, views);
      return r.alias ? inner.as(r.alias) : inner;
    }
    case 'join': {
      const left = planRelation(r.left, views);
      const right = planRelation(r.right, views);
      return left.join(right, r.on ? new Column(r.on) : r.using ?? null, r.joinType);
    }
    default:
      return assertNever(r, 'relation');
  }
}

/** A structural key for "the same expression" (column names compared case-insensitively). */
function keyOf(e: Expr): string {
  return JSON.stringify(e, (k, v: unknown) => (k === 'name' && typeof v === 'string' ? v.toLowerCase() : typeof v === 'bigint' ? `${v}n` : v));
}

function planAggregate(input: DataFrame, q: SelectStatement): DataFrame {
  const inputAttrs = input.plan.output;
  const keys = (q.groupBy ?? []).map((g) => groupingExpr(g, q.items, inputAttrs));
  const aggregates = new Map<string, Expr>();
  const collect = (e: Expr): void => {
    if (e.kind === 'aggregate') {
      if (e.args.some(containsAggregate)) {
        throw sqlAnalysisError('NESTED_AGGREGATE_FUNCTION', 'It is not allowed to use an aggregate function in the argument of another aggregate function. Please use the inner aggregate function in a sub-query.', '42607');
      }
      if (!aggregates.has(keyOf(e))) aggregates.set(keyOf(e), e);
      return;
    }
    children(e).forEach(collect);
  };
  q.items.forEach(collect);
  if (q.having) collect(q.having);
  const aggList = [...aggregates.values()];
  // Keys and aggregates take the name the select list gives them, so a plain `SELECT keys, aggs`
  // projects the aggregation's own attributes (the sink finds its key columns by identity).
  const selectName = (e: Expr): string | null => {
    const item = q.items.find((it) => it.kind === 'alias' && keyOf(it.child) === keyOf(e));
    return item && item.kind === 'alias' ? item.name : null;
  };
  const named = (e: Expr): Column => {
    const name = selectName(e);
    return name === null ? new Column(e) : new Column(e).alias(name);
  };
  const grouped = input.groupBy(...keys.map(named)).agg(...aggList.map(named));
  const out = grouped.plan.output;
  const refs = new Map<string, Expr>();
  keys.forEach((k, i) => { if (!refs.has(keyOf(k))) refs.set(keyOf(k), ref(out[i]!)); });
  aggList.forEach((a, i) => refs.set(keyOf(a), ref(out[keys.length + i]!)));
  // A column grouped by one name may be selected by another (`e.user` for `user`).
  const keyIds = new Map<number, Expr>();
  keys.forEach((k, i) => {
    if (k.kind === 'column') keyIds.set(resolveName(k.name, inputAttrs).attribute.id, ref(out[i]!));
  });

  const rewrite = (e: Expr): Expr => {
    const found = refs.get(keyOf(e));
    if (found) return found;
    if (e.kind === 'column') {
      const byId = keyIds.get(resolveName(e.name, inputAttrs).attribute.id);
      if (byId) return byId;
      throw missingAggregation(e);
    }
    if (e.kind === 'star') throw missingAggregation(e);
    return mapChildren(e, rewrite);
  };

  let df = grouped;
  if (q.having) {
    const aliases = new Map(q.items.flatMap((it) => (it.kind === 'alias' ? [[it.name.toLowerCase(), it.child] as const] : [])));
    const viaAliases = (e: Expr): Expr => {
      if (e.kind === 'column' && !refs.has(keyOf(e)) && aliases.has(e.name.toLowerCase()) && !resolvesIn(e.name, inputAttrs)) {
        return aliases.get(e.name.toLowerCase())!;
      }
      return e.kind === 'aggregate' ? e : mapChildren(e, viaAliases);
    };
    df = df.filter(new Column(rewrite(viaAliases(q.having))));
  }
  const byId = new Map(out.map((a) => [`#${a.id}`, a]));
  const projected = q.items.map((item) => {
    const name = item.kind === 'alias' ? item.name : defaultName(item);
    const e = rewrite(item.kind === 'alias' ? item.child : item);
    // The aggregation's attribute itself where its name is already the one selected.
    if (e.kind === 'column' && byId.get(e.name)?.name === name) return new Column(e);
    return new Column(e).alias(name);
  });
  const identity = !q.having && projected.length === out.length
    && projected.every((c, i) => c.expr.kind === 'column' && c.expr.name === `#${out[i]!.id}`);
  return identity ? df : df.select(...projected);
}

/** GROUP BY 1 (a select item's position) and GROUP BY alias, as Spark allows by default. */
function groupingExpr(g: Expr, items: readonly Expr[], input: readonly Attribute[]): Expr {
  if (g.kind === 'literal' && g.type === 'int') {
    const item = items[Number(g.value) - 1];
    if (!item) {
      throw sqlAnalysisError('GROUP_BY_POS_OUT_OF_RANGE', `GROUP BY position ${String(g.value)} is not in select list (valid range is [1, ${items.length}]).`, '42805');
    }
    if (containsAggregate(item)) {
      throw sqlAnalysisError('GROUP_BY_POS_AGGREGATE', `GROUP BY ${String(g.value)} refers to an expression ${describe(item)} that contains an aggregate function. Aggregate functions are not allowed in GROUP BY.`, '42903');
    }
    return item.kind === 'alias' ? item.child : item;
  }
  if (g.kind === 'column' && !resolvesIn(g.name, input)) {
    const aliased = items.find((it) => it.kind === 'alias' && it.name.toLowerCase() === g.name.toLowerCase());
    if (aliased && aliased.kind === 'alias') return aliased.child;
  }
  return g;
}

function resolvesIn(name: string, input: readonly Attribute[]): boolean {
  try {
    resolveName(name, input);
    return true;
  } catch {
    return false;
  }
}

function missingAggregation(e: Expr): Error {
  const text = describe(e);
  return sqlAnalysisError(
    'MISSING_AGGREGATION',
    `The non-aggregating expression "${text}" is based on columns which are not participating in the GROUP BY clause.`,
    '42803',
    `add the columns or the expression to the GROUP BY, aggregate the expression, or use "first(${text})" if you do not care which of the values within a group is returned.`,
  );
}

/** ORDER BY 1: the output column at that position. */
function ordinalSort(o: SortOrder, columns: readonly string[]): SortOrder {
  if (o.expr.kind === 'literal' && o.expr.type === 'int') {
    const name = columns[Number(o.expr.value) - 1];
    if (name === undefined) {
      throw sqlAnalysisError('ORDER_BY_POS_OUT_OF_RANGE', `ORDER BY position ${String(o.expr.value)} is not in select list (valid range is [1, ${columns.length}]).`, '42805');
    }
    return { expr: { kind: 'column', name }, descending: o.descending };
  }
  return o;
}

const ref = (a: Attribute): Expr => ({ kind: 'column', name: `#${a.id}` });

/** The same node with each child replaced by `f(child)`. */
function mapChildren(e: Expr, f: (e: Expr) => Expr): Expr {
  switch (e.kind) {
    case 'column':
    case 'literal':
    case 'star':
      return e;
    case 'alias':
      return { ...e, child: f(e.child) };
    case 'call':
      return { ...e, args: e.args.map(f) };
    case 'cast':
      return { ...e, child: f(e.child) };
    case 'case':
      return { ...e, branches: e.branches.map(([c, v]) => [f(c), f(v)] as const), otherwise: e.otherwise ? f(e.otherwise) : null };
    case 'timeWindow':
      return { ...e, timeColumn: f(e.timeColumn) };
    case 'sessionWindow':
      return { ...e, timeColumn: f(e.timeColumn), gap: f(e.gap) };
    case 'aggregate':
      return { ...e, args: e.args.map(f) };
    default:
      return assertNever(e, 'expression');
  }
}
