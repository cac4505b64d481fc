import { newAttribute, withQualifier, type Attribute } from '../plan/attribute.js';
import { Column, literalExpr, toColumn, type ColumnLike, type SortOrder } from '../plan/column.js';
import { defaultName, unalias, type Expr } from '../plan/expressions.js';
import { intervalToDelayMs, parseInterval } from '../plan/intervals.js';
import { isStruct, typeToString } from '../plan/data-types.js';
import { collectNodes, isStreaming, type JoinType, type LogicalPlan } from '../plan/logical-plan.js';
import { bind, inheritedEventTimeDelay, resolveName } from '../analysis/binder.js';
import { isGenerator } from '../analysis/bound-expr.js';
import { explainPlan } from '../analysis/explain.js';
import { checkSingleWindowExpression } from '../analysis/time-windowing.js';
import { errors as unsupportedErrors, nodeExpressions, SAMPLE_MARKER } from '../analysis/unsupported-operation-checker.js';
import { AnalysisError, IllegalArgumentError } from '../errors/sluice-error.js';
import type { SourceRegistry } from '../sources/source.js';
import { runBatchQuery } from '../runtime/batch-runner.js';
import { parseExpression } from '../sql/index.js';
import { DataStreamWriter } from './data-stream-writer.js';
import { DataFrameWriter } from './data-frame-writer.js';
import { callOnStreamingUnsupported, limitPlan, showString, staticSessionWindowUnsupported, writeStreamNotAllowed } from './static-actions.js';
import { KeyValueGroupedDataFrame } from './key-value-grouped.js';

/**
 * What a DataFrame needs of the session that created it: the SQL conf. Structural, so that the
 * session module creates DataFrames without the two importing each other.
 */
export interface SessionConf {
  readonly conf: ReadonlyMap<string, string>;
  /** Temp views by lower-cased name, for `session.sql` (createOrReplaceTempView). */
  readonly tempViews?: Map<string, DataFrame>;
}

/** The sources of both sides of a join or union; one id must mean one source within a query. */
function mergeSources(a: SourceRegistry, b: SourceRegistry): SourceRegistry {
  if (b.size === 0 || a === b) return a;
  if (a.size === 0) return b;
  const merged = new Map(a);
  for (const [id, source] of b) {
    const existing = merged.get(id);
    if (existing && existing !== source) {
      throw new AnalysisError(`Two different sources of this query have the id '${id}'.`, {
        code: 'DUPLICATE_SOURCE_ID', hint: 'give each stream its own name (e.g. memoryStream(schema, name)), or read one stream once and reuse its DataFrame.',
      });
    }
    merged.set(id, source);
  }
  return merged;
}

/** Projects named expressions over a child, keeping plain column references as the same attribute. */
export function projectOutput(exprs: readonly Expr[], input: readonly Attribute[]): Attribute[] {
  return exprs.map((e) => {
    const bound = bind(e, input);
    if (e.kind === 'column' && bound.kind === 'ref' && bound.path.length === 0) return bound.attribute;
    return newAttribute(defaultName(e), bound.type, { eventTimeDelayMs: inheritedEventTimeDelay(bound) });
  });
}

function expandStar(exprs: readonly Expr[], input: readonly Attribute[]): Expr[] {
  return exprs.flatMap((e) => {
    if (e.kind !== 'star') return [e];
    const attrs = e.qualifier ? input.filter((a) => a.qualifier === e.qualifier) : input;
    return attrs.map((a): Expr => ({ kind: 'column', name: a.qualifier && e.qualifier ? `${a.qualifier}.${a.name}` : a.name }));
  });
}

/** Gives every attribute of a plan a fresh id, so a DataFrame can be joined with itself. */
function newInstance(plan: LogicalPlan): LogicalPlan {
  const renamed = new Map<number, Attribute>();
  const fresh = (a: Attribute): Attribute => {
    let b = renamed.get(a.id);
    if (!b) {
      b = newAttribute(a.name, a.type, { qualifier: a.qualifier, eventTimeDelayMs: a.eventTimeDelayMs });
      renamed.set(a.id, b);
    }
    return b;
  };
  const visit = (p: LogicalPlan): LogicalPlan => {
    const output = p.output.map(fresh);
    switch (p.kind) {
      case 'StreamingRelation':
      case 'LocalRelation':
        return { ...p, output };
      case 'Union':
        return { ...p, children: p.children.map(visit), output };
      case 'Join':
      case 'Except':
      case 'Intersect':
        return { ...p, left: visit(p.left), right: visit(p.right), output };
      case 'EventTimeWatermark': {
        const child = visit(p.child);
        return { ...p, child, eventTime: fresh(p.eventTime), output };
      }
      case 'Deduplicate':
      case 'StatefulProcessing': {
        const child = visit(p.child);
        return { ...p, child, keys: p.keys.map(fresh), output } as LogicalPlan;
      }
      default:
        return { ...p, child: visit(p.child), output } as LogicalPlan;
    }
  };
  return visit(plan);
}

export type JoinHow = JoinType | 'left' | 'right' | 'outer' | 'full' | 'leftouter' | 'rightouter' | 'fullouter' | 'semi' | 'leftsemi' | 'anti' | 'leftanti';

function normalizeJoinType(how: JoinHow): JoinType {
  const h = how.toLowerCase().replace(/_/g, '');
  const map: Record<string, JoinType> = {
    inner: 'inner', left: 'left_outer', leftouter: 'left_outer', right: 'right_outer', rightouter: 'right_outer',
    outer: 'full_outer', full: 'full_outer', fullouter: 'full_outer', semi: 'left_semi', leftsemi: 'left_semi',
    anti: 'left_anti', leftanti: 'left_anti', cross: 'cross',
  };
  const t = map[h];
  if (!t) {
    throw new IllegalArgumentError(`Unsupported join type '${how}'.`, {
      code: 'UNSUPPORTED_JOIN_TYPE',
      hint: 'use one of inner, left_outer, right_outer, full_outer, left_semi, left_anti, cross.',
    });
  }
  return t;
}

/**
 * A DataFrame: an immutable logical plan plus the session it belongs to. Every transformation
 * analyses its arguments at once, so a wrong column or type fails at the call that introduced it.
 */
export class DataFrame {
  /**
   * `sources` binds the plan's source ids to live sources, for `writeStream.start()`; a DataFrame
   * built from ids alone (a deployable query's analysis) has none and is bound per run.
   */
  constructor(readonly session: SessionConf, readonly plan: LogicalPlan, readonly sources: SourceRegistry = new Map()) {}

  get columns(): string[] {
    return this.plan.output.map((a) => a.name);
  }

  get isStreaming(): boolean {
    return isStreaming(this.plan);
  }

  get schema(): { name: string; type: string }[] {
    return this.plan.output.map((a) => ({ name: a.name, type: typeToString(a.type) }));
  }

  private with(plan: LogicalPlan, other?: DataFrame): DataFrame {
    checkSingleWindowExpression(nodeExpressions(plan));
    return new DataFrame(this.session, plan, other ? mergeSources(this.sources, other.sources) : this.sources);
  }

  /** A Column for one of this DataFrame's columns (`df.col("value")`). */
  col(name: string): Column {
    resolveName(name, this.plan.output);
    return toColumn(name);
  }

  select(...cols: ColumnLike[]): DataFrame {
    const exprs = expandStar(cols.map((c) => toColumn(c).expr), this.plan.output);
    const generators = exprs.filter((e) => isGenerator(bind(e, this.plan.output)));
    if (generators.length > 1) {
      throw new AnalysisError('[UNSUPPORTED_GENERATOR.MULTI_GENERATOR] Only one generator (explode, sliding window) is allowed per select().', {
        code: 'MULTI_GENERATOR', errorClass: 'UNSUPPORTED_GENERATOR.MULTI_GENERATOR', hint: 'split the select() in two.',
      });
    }
    return this.with({ kind: 'Project', child: this.plan, exprs, output: projectOutput(exprs, this.plan.output) });
  }

  /** As in PySpark, the value is a Column: wrap SQL text in `expr('...')`. */
  withColumn(name: string, c: Column): DataFrame {
    if (!(c instanceof Column)) {
      throw new IllegalArgumentError(`[NOT_COLUMN] Argument \`col\` should be a Column, got ${typeof c}.`, {
        code: 'NOT_COLUMN', errorClass: 'NOT_COLUMN', hint: `for SQL text use withColumn(name, expr(${JSON.stringify(String(c))})).`,
      });
    }
    const existing = this.plan.output.findIndex((a) => a.name.toLowerCase() === name.toLowerCase());
    const named = c.alias(name);
    const cols: ColumnLike[] = this.plan.output.map((a, i) => (i === existing ? named : new Column({ kind: 'column', name: a.qualifier ? `${a.qualifier}.${a.name}` : a.name })));
    if (existing < 0) cols.push(named);
    return this.selectAttributes(cols);
  }

  /** select() with SQL expression strings: `selectExpr('amount * 2 AS x', 'user')`. */
  selectExpr(...exprs: string[]): DataFrame {
    return this.select(...exprs.map((e) => new Column(parseExpression(e))));
  }

  withColumnRenamed(from: string, to: string): DataFrame {
    if (!this.plan.output.some((a) => a.name.toLowerCase() === from.toLowerCase())) return this;
    return this.selectAttributes(this.plan.output.map((a) => {
      const ref = new Column({ kind: 'column', name: a.qualifier ? `${a.qualifier}.${a.name}` : a.name });
      return a.name.toLowerCase() === from.toLowerCase() ? ref.alias(to) : ref;
    }));
  }

  /** select() by attribute, robust to duplicate names after a join. */
  private selectAttributes(cols: ColumnLike[]): DataFrame {
    const exprs = cols.map((c) => toColumn(c).expr);
    const input = this.plan.output;
    const output = exprs.map((e, i) => {
      const original = input[i];
      if (original && e.kind === 'column') return original;
      const inner = unalias(e);
      if (original && e.kind === 'alias' && inner.kind === 'column') {
        return newAttribute(e.name, original.type, { eventTimeDelayMs: original.eventTimeDelayMs });
      }
      return projectOutput([e], input)[0]!;
    });
    const positional = exprs.map((e, i): Expr => {
      const original = input[i];
      if (!original) return e;
      if (e.kind === 'column') return { kind: 'column', name: `#${original.id}` };
      const inner = unalias(e);
      if (e.kind === 'alias' && inner.kind === 'column') return { kind: 'alias', child: { kind: 'column', name: `#${original.id}` }, name: e.name };
      return e;
    });
    return this.with({ kind: 'Project', child: this.plan, exprs: positional, output });
  }

  /** Keeps the rows where `condition` holds: a Column, or SQL text (`'amount > 100'`). */
  filter(condition: Column | string): DataFrame {
    if (typeof condition === 'string') condition = new Column(parseExpression(condition));
    const bound = bind(condition.expr, this.plan.output);
    if (bound.type !== 'boolean' && bound.type !== 'null') {
      throw new AnalysisError(`[DATATYPE_MISMATCH.FILTER_NOT_BOOLEAN] Filter expression has type ${typeToString(bound.type)}, not boolean.`, { code: 'FILTER_NOT_BOOLEAN' });
    }
    return this.with({ kind: 'Filter', child: this.plan, condition: condition.expr, output: this.plan.output });
  }

  where(condition: Column | string): DataFrame {
    return this.filter(condition);
  }

  /**
   * Declares `eventTime` as the event-time column, with rows up to `delay` late still accepted.
   * The watermark used by batch N is max(event time seen before N) - delay; it never decreases.
   */
  withWatermark(eventTime: string, delay: string): DataFrame {
    // Spark checks the delay before resolving the column.
    const delayMs = intervalToDelayMs(parseInterval(delay));
    if (delayMs < 0) {
      throw new IllegalArgumentError(`delay threshold (${delay}) should not be negative.`, {
        code: 'NEGATIVE_WATERMARK_DELAY', hint: 'use a delay of 0 seconds or more, e.g. "10 minutes".',
      });
    }
    const { attribute } = resolveName(eventTime, this.plan.output);
    if (attribute.type !== 'timestamp' && !isStruct(attribute.type)) {
      throw new AnalysisError(
        `Event time must be defined on a window or a timestamp, but ${attribute.name} is of type ${typeToString(attribute.type)}.`,
        { code: 'EVENT_TIME_IS_NOT_ON_TIMESTAMP_TYPE', errorClass: 'EVENT_TIME_IS_NOT_ON_TIMESTAMP_TYPE', hint: `convert the column first, e.g. withColumn("${attribute.name}", timestamp_seconds(col("${attribute.name}"))).` },
      );
    }
    const output = this.plan.output.map((a) => {
      if (a.id === attribute.id) return Object.freeze({ ...a, eventTimeDelayMs: delayMs });
      if (a.eventTimeDelayMs !== null) return Object.freeze({ ...a, eventTimeDelayMs: null });
      return a;
    });
    const marked = output.find((a) => a.id === attribute.id)!;
    return this.with({ kind: 'EventTimeWatermark', child: this.plan, eventTime: marked, delayMs, delayText: delay, output });
  }

  groupBy(...cols: ColumnLike[]): GroupedData {
    return new GroupedData(this, cols.map((c) => toColumn(c).expr));
  }

  /**
   * Groups rows by the key columns for arbitrary stateful processing (Spark's groupByKey):
   * `transformWithState`, `flatMapGroupsWithState`, `mapGroupsWithState`.
   */
  groupByKey(...keyColumns: string[]): KeyValueGroupedDataFrame<DataFrame> {
    return new KeyValueGroupedDataFrame(this.plan, keyColumns, (plan) => this.with(plan));
  }

  /** Aggregation over the whole stream (no grouping keys). */
  agg(...aggs: Column[]): DataFrame {
    return this.groupBy().agg(...aggs);
  }

  dropDuplicates(columns?: readonly string[]): DataFrame {
    return this.deduplicate(columns, false);
  }

  /**
   * Drops a row whose key was seen within the watermark delay; state expires with the watermark.
   * Without a watermark the query is refused at start(), where Spark refuses it.
   */
  dropDuplicatesWithinWatermark(columns?: readonly string[]): DataFrame {
    return this.deduplicate(columns, true);
  }

  /**
   * Spark's `sample(fraction, seed)`. A stream cannot be sampled: start() refuses it with Spark's
   * message. Sluice has no batch sampler, so a static DataFrame refuses it here.
   */
  sample(fraction: number, seed?: number): DataFrame {
    if (!isStreaming(this.plan)) throw unsupportedErrors.sampleInBatch();
    if (!(fraction >= 0 && fraction <= 1)) {
      throw new IllegalArgumentError(`requirement failed: Sampling fraction (${fraction}) must be on interval [0, 1] without replacement`, { code: 'SAMPLE_FRACTION' });
    }
    const condition: Expr = { kind: 'call', fn: SAMPLE_MARKER, args: [literalExpr(fraction), literalExpr(seed ?? null)] };
    return this.with({ kind: 'Filter', child: this.plan, condition, output: this.plan.output });
  }

  private deduplicate(columns: readonly string[] | undefined, withinWatermark: boolean): DataFrame {
    const keys = columns === undefined || columns === null ? [...this.plan.output] : columns.map((c) => resolveName(c, this.plan.output).attribute);
    return this.with({ kind: 'Deduplicate', child: this.plan, keys, withinWatermark, output: this.plan.output });
  }

  orderBy(...orders: (ColumnLike | SortOrder)[]): DataFrame {
    const sortOrders = orders.map((o): SortOrder => (typeof o === 'string' || o instanceof Column ? { expr: toColumn(o).expr, descending: false } : o));
    sortOrders.forEach((o) => bind(o.expr, this.plan.output));
    return this.with({ kind: 'Sort', child: this.plan, orders: sortOrders, output: this.plan.output });
  }

  sort(...orders: (ColumnLike | SortOrder)[]): DataFrame {
    return this.orderBy(...orders);
  }

  /** Registers this DataFrame as a temp view of its session, for `session.sql('... FROM name')`. */
  createOrReplaceTempView(name: string): void {
    if (!this.session.tempViews) {
      throw new IllegalArgumentError('This DataFrame was not created by a SluiceSession, so it has no catalog for temp views.', { code: 'NO_SESSION_CATALOG' });
    }
    this.session.tempViews.set(name.toLowerCase(), this);
  }

  /** Names this DataFrame so its columns can be referred to as `alias.column` (e.g. in joins). */
  as(alias: string): DataFrame {
    return this.with({ kind: 'SubqueryAlias', child: this.plan, alias, output: this.plan.output.map((a) => withQualifier(a, alias)) });
  }

  alias(name: string): DataFrame {
    return this.as(name);
  }

  /**
   * Joins with another DataFrame: `on` is a condition Column, a using-column name or list, or
   * omitted (no condition). Stream-stream joins need watermarks for outer and semi types.
   */
  join(other: DataFrame, on?: Column | string | readonly string[] | null, how: JoinHow = 'inner'): DataFrame {
    const joinType = normalizeJoinType(how);
    const left = this.plan;
    const leftIds = new Set(collectNodes(left, (n): n is LogicalPlan => true).flatMap((n) => n.output.map((a) => a.id)));
    const sharesAttributes = collectNodes(other.plan, (n): n is LogicalPlan => true).some((n) => n.output.some((a) => leftIds.has(a.id)));
    const right = sharesAttributes ? newInstance(other.plan) : other.plan;
    const nullable = (attrs: readonly Attribute[]): Attribute[] => [...attrs];
    const joinOutput = joinType === 'left_semi' || joinType === 'left_anti'
      ? [...left.output]
      : [...nullable(left.output), ...nullable(right.output)];

    if (on === undefined || on === null || on instanceof Column) {
      const condition = on instanceof Column ? on.expr : null;
      if (condition) bind(condition, [...left.output, ...right.output]);
      return this.with({ kind: 'Join', left, right, joinType, condition, usingColumns: null, output: joinOutput }, other);
    }
    const using = typeof on === 'string' ? [on] : [...on];
    const pairs = using.map((name) => ({
      name,
      l: resolveName(name, left.output).attribute,
      r: resolveName(name, right.output).attribute,
    }));
    const ref = (a: Attribute): Expr => ({ kind: 'column', name: `#${a.id}` });
    const condition = pairs
      .map((p): Expr => ({ kind: 'call', fn: '=', args: [ref(p.l), ref(p.r)] }))
      .reduce((a, b) => ({ kind: 'call', fn: 'and', args: [a, b] }));
    const join: LogicalPlan = { kind: 'Join', left, right, joinType, condition, usingColumns: using, output: joinOutput };
    // SQL USING: one copy of each using column first, then the rest of each side.
    const usedIds = new Set(pairs.flatMap((p) => [p.l.id, p.r.id]));
    const usingExprs: Expr[] = pairs.map((p) => {
      if (joinType === 'right_outer') return ref(p.r);
      if (joinType === 'full_outer') return { kind: 'alias', name: p.name, child: { kind: 'call', fn: 'coalesce', args: [ref(p.l), ref(p.r)] } };
      return ref(p.l);
    });
    const rest = joinOutput.filter((a) => !usedIds.has(a.id)).map(ref);
    const exprs = [...usingExprs, ...rest];
    return this.with({ kind: 'Project', child: join, exprs, output: projectOutput(exprs, joinOutput) }, other);
  }

  /** Union by position (Spark's `union`): the columns keep this DataFrame's names. */
  union(other: DataFrame): DataFrame {
    if (other.plan.output.length !== this.plan.output.length) {
      throw new AnalysisError(
        `[NUM_COLUMNS_MISMATCH] UNION can only be performed on inputs with the same number of columns, but the first input has ${this.plan.output.length} columns and the second input has ${other.plan.output.length} columns.`,
        { code: 'NUM_COLUMNS_MISMATCH', errorClass: 'NUM_COLUMNS_MISMATCH' },
      );
    }
    const children = this.plan.kind === 'Union' ? [...this.plan.children, other.plan] : [this.plan, other.plan];
    return this.with({ kind: 'Union', children, output: this.plan.output }, other);
  }

  unionAll(other: DataFrame): DataFrame {
    return this.union(other);
  }

  except(other: DataFrame, all = false): DataFrame {
    return this.with({ kind: 'Except', left: this.plan, right: other.plan, all, output: this.plan.output }, other);
  }

  exceptAll(other: DataFrame): DataFrame {
    return this.except(other, true);
  }

  intersect(other: DataFrame, all = false): DataFrame {
    return this.with({ kind: 'Intersect', left: this.plan, right: other.plan, all, output: this.plan.output }, other);
  }

  /** A SQL window function column, e.g. `row_number` over `partitionBy` ordered by `orderBy` (batch only). */
  withWindowFunction(name: string, fn: 'row_number' | 'rank' | 'dense_rank', partitionBy: ColumnLike[], orderBy: (ColumnLike | SortOrder)[]): DataFrame {
    const orders = orderBy.map((o): SortOrder => (typeof o === 'string' || o instanceof Column ? { expr: toColumn(o).expr, descending: false } : o));
    return this.with({
      kind: 'WindowFunction',
      child: this.plan,
      fn,
      partitionBy: partitionBy.map((c) => toColumn(c).expr),
      orderBy: orders,
      output: [...this.plan.output, newAttribute(name, 'int')],
    });
  }

  /** Test-only fault injection: the first row matching `condition` fails its batch once. */
  failOnce(condition: Column, message: string): DataFrame {
    bind(condition.expr, this.plan.output);
    return this.with({ kind: 'FailOnce', child: this.plan, condition: condition.expr, message, token: { fired: false }, output: this.plan.output });
  }

  /** The logical plan and, for a streaming query, the incremental plan (stateful operators). */
  explain(outputMode?: 'append' | 'update' | 'complete'): string {
    return explainPlan(this.plan, outputMode, this.session.conf);
  }

  get writeStream(): DataStreamWriter<DataFrame> {
    if (!isStreaming(this.plan)) throw writeStreamNotAllowed();
    // foreachBatch hands each micro-batch's output over as a static DataFrame of this session.
    return new DataStreamWriter(this, (batch) => new DataFrame(this.session, {
      kind: 'LocalRelation', name: 'foreachBatch', rows: batch.rows, output: batch.schema.map((f) => newAttribute(f.name, f.type)),
    }));
  }

  /** Writes a static DataFrame to a sink: `df.write.sink(sink).batchId(id).save()`. */
  get write(): DataFrameWriter {
    if (isStreaming(this.plan)) throw callOnStreamingUnsupported('write', 'a streaming DataFrame is written with writeStream...start().');
    return new DataFrameWriter(this);
  }

  /** Runs a batch (static) query to completion and returns its rows. */
  collect(): unknown[][] {
    return runBatchQuery(this.plan);
  }

  /** The number of rows of a static DataFrame. */
  count(): number {
    return runBatchQuery(this.plan).length;
  }

  /** The first `n` rows (static DataFrames; Sluice does not limit a stream). */
  limit(n: number): DataFrame {
    return this.with(limitPlan(this.plan, n));
  }

  take(n: number): unknown[][] {
    return this.limit(n).collect();
  }

  /** The first row, or undefined when there is none (Spark's `first()` raises; `head()` gives None). */
  first(): unknown[] | undefined {
    return this.take(1)[0];
  }

  /** Prints the first `numRows` rows as Spark's `show()`, cells cut at 20 characters unless `truncate` is false (or a width). */
  show(numRows = 20, truncate: boolean | number = true): void {
    console.log(this.showString(numRows, truncate));
  }

  showString(numRows = 20, truncate: boolean | number = true): string {
    return showString(this.plan, numRows, truncate);
  }
}

export class GroupedData {
  constructor(private readonly df: DataFrame, private readonly keys: readonly Expr[]) {}

  agg(...aggs: Column[]): DataFrame {
    if (!isStreaming(this.df.plan) && this.keys.some((k) => unalias(k).kind === 'sessionWindow')) throw staticSessionWindowUnsupported();
    const input = this.df.plan.output;
    const aggExprs = aggs.map((a) => a.expr);
    const keyOutput = projectOutput(this.keys, input);
    const aggOutput = aggExprs.map((e) => newAttribute(defaultName(e), bind(e, input).type));
    const plan: LogicalPlan = {
      kind: 'Aggregate',
      child: this.df.plan,
      groupingExprs: this.keys,
      aggregateExprs: [...this.keys, ...aggExprs],
      output: [...keyOutput, ...aggOutput],
    };
    checkSingleWindowExpression(plan.aggregateExprs);
    return new DataFrame(this.df.session, plan, this.df.sources);
  }

  count(): DataFrame {
    return this.agg(new Column({ kind: 'aggregate', fn: 'count', args: [], distinct: false, ignoreNulls: false }).alias('count'));
  }
}
