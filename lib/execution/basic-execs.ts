import { bind } from '../analysis/binder.js';
import { isGenerator } from '../analysis/bound-expr.js';
import type { Attribute } from '../plan/attribute.js';
import type { SortOrder } from '../plan/column.js';
import type { Expr } from '../plan/expressions.js';
import { StreamingQueryError } from '../errors/sluice-error.js';
import { compileAggregation, type PartialGroup } from './aggregation.js';
import type { EvalContext } from './eval-context.js';
import { compile, compileGenerator, type Row } from './evaluate.js';
import { eachRowDroppingRaising, type BatchContext, type Exec } from './physical.js';
import { compareValues, encodeKey } from './values.js';

/** This batch's rows of one streaming source. */
export class StreamScanExec implements Exec {
  readonly nodeName = 'StreamScan';
  readonly children: readonly Exec[] = [];
  constructor(readonly sourceName: string, readonly output: readonly Attribute[]) {}
  execute(ctx: BatchContext): Row[] {
    return ctx.sourceRows.get(this.sourceName) ?? [];
  }
}

/** A static relation: the same rows every batch. */
export class LocalScanExec implements Exec {
  readonly nodeName = 'LocalScan';
  readonly children: readonly Exec[] = [];
  constructor(private readonly rows: readonly (readonly unknown[])[], readonly output: readonly Attribute[]) {}
  execute(): Row[] {
    return this.rows.map((r) => [...r]);
  }
}

/** Keeps the child's rows but renames/qualifies its output (SubqueryAlias). */
export class PassThroughExec implements Exec {
  readonly nodeName = 'SubqueryAlias';
  readonly children: readonly Exec[];
  constructor(private readonly child: Exec, readonly output: readonly Attribute[]) {
    this.children = [child];
  }
  execute(ctx: BatchContext): Row[] {
    return this.child.execute(ctx);
  }
}

export class ProjectExec implements Exec {
  readonly nodeName = 'Project';
  readonly children: readonly Exec[];
  private readonly project: (input: Row[]) => Row[];

  constructor(private readonly child: Exec, exprs: readonly Expr[], readonly output: readonly Attribute[], ctx: EvalContext) {
    this.children = [child];
    const bound = exprs.map((e) => bind(e, child.output));
    const generatorIndex = bound.findIndex(isGenerator);
    const evals = bound.map((b, i) => (i === generatorIndex ? null : compile(b, ctx)));
    const width = evals.length;
    if (generatorIndex < 0) {
      const fs = evals as ((r: Row) => unknown)[];
      this.project = (input) => {
        const out = new Array<Row>(input.length);
        for (let r = 0; r < input.length; r++) {
          const row = input[r]!;
          const o = new Array<unknown>(width);
          for (let i = 0; i < width; i++) o[i] = fs[i]!(row);
          out[r] = o;
        }
        return out;
      };
    } else {
      const generate = compileGenerator(bound[generatorIndex]!, ctx);
      this.project = (input) => {
        const out: Row[] = [];
        for (const row of input) {
          const fixed = evals.map((f) => (f ? f(row) : null));
          for (const g of generate(row)) {
            const o = [...fixed];
            o[generatorIndex] = g;
            out.push(o);
          }
        }
        return out;
      };
    }
  }

  execute(ctx: BatchContext): Row[] {
    const input = this.child.execute(ctx);
    return ctx.dropRaisingRow ? eachRowDroppingRaising(this, ctx, input, this.project) : this.project(input);
  }
}

export class FilterExec implements Exec {
  readonly nodeName = 'Filter';
  readonly children: readonly Exec[];
  readonly output: readonly Attribute[];
  private readonly predicate: (row: Row) => unknown;
  constructor(private readonly child: Exec, condition: Expr, ctx: EvalContext) {
    this.children = [child];
    this.output = child.output;
    this.predicate = compile(bind(condition, child.output), ctx);
  }
  execute(ctx: BatchContext): Row[] {
    const input = this.child.execute(ctx);
    const keep = (rows: Row[]): Row[] => rows.filter((row) => this.predicate(row) === true);
    return ctx.dropRaisingRow ? eachRowDroppingRaising(this, ctx, input, keep) : keep(input);
  }
}

/** Event-time statistics of one batch (Spark's EventTimeStats), in ms. */
export interface EventTimeStats {
  max: number;
  min: number;
  sum: number;
  count: number;
}

/**
 * Spark's EventTimeWatermarkExec: passes rows through and records the event-time statistics the
 * watermark tracker reads after the batch.
 */
export class EventTimeWatermarkExec implements Exec {
  readonly nodeName = 'EventTimeWatermark';
  readonly children: readonly Exec[];
  readonly output: readonly Attribute[];
  stats: EventTimeStats = { max: -Infinity, min: Infinity, sum: 0, count: 0 };
  /** Rows of the last batch whose event time was NULL: no watermark, and a window() drops them. */
  nullEventTimeRows = 0;
  private readonly ordinal: number;
  private readonly isWindow: boolean;

  constructor(
    private readonly child: Exec, eventTime: Attribute, readonly delayMs: number, output: readonly Attribute[],
    /** Where rows carry the event time when not at the attribute's place (partial aggregates: first). */
    ordinal?: number,
  ) {
    this.children = [child];
    this.output = output;
    this.ordinal = ordinal ?? child.output.findIndex((a) => a.id === eventTime.id);
    this.isWindow = ordinal === undefined && typeof eventTime.type === 'object';
  }

  execute(ctx: BatchContext): Row[] {
    const rows = this.child.execute(ctx);
    const stats: EventTimeStats = { max: -Infinity, min: Infinity, sum: 0, count: 0 };
    const i = this.ordinal;
    let nulls = 0;
    for (const row of rows) {
      const v = row[i];
      if (v === null || v === undefined) {
        nulls++;
        continue;
      }
      const ms = Math.floor((this.isWindow ? (v as { end: number }).end - 1 : (v as number)) / 1000);
      if (ms > stats.max) stats.max = ms;
      if (ms < stats.min) stats.min = ms;
      stats.sum += ms;
      stats.count++;
    }
    this.stats = stats;
    this.nullEventTimeRows = nulls;
    return rows;
  }
}

export class UnionExec implements Exec {
  readonly nodeName = 'Union';
  constructor(readonly children: readonly Exec[], readonly output: readonly Attribute[]) {}
  execute(ctx: BatchContext): Row[] {
    return this.children.flatMap((c) => c.execute(ctx));
  }
}

export function compileSortOrders(orders: readonly SortOrder[], input: readonly Attribute[], ctx: EvalContext): (a: Row, b: Row) => number {
  const keys = orders.map((o) => ({ f: compile(bind(o.expr, input), ctx), sign: o.descending ? -1 : 1, descending: o.descending }));
  return (a, b) => {
    for (const k of keys) {
      const x = k.f(a);
      const y = k.f(b);
      // Spark: NULLS FIRST for ascending, NULLS LAST for descending.
      const c = compareValues(x, y);
      if (c !== 0) return k.sign * c;
    }
    return 0;
  };
}

export class SortExec implements Exec {
  readonly nodeName = 'Sort';
  readonly children: readonly Exec[];
  readonly output: readonly Attribute[];
  private readonly compare: (a: Row, b: Row) => number;
  constructor(private readonly child: Exec, orders: readonly SortOrder[], ctx: EvalContext) {
    this.children = [child];
    this.output = child.output;
    this.compare = compileSortOrders(orders, child.output, ctx);
  }
  execute(ctx: BatchContext): Row[] {
    return [...this.child.execute(ctx)].sort(this.compare);
  }
}

/** A non-incremental aggregation: static subtrees and batch queries. */
export class HashAggregateExec implements Exec {
  readonly nodeName = 'HashAggregate';
  readonly children: readonly Exec[];
  private readonly agg;
  constructor(private readonly child: Exec, groupingExprs: readonly Expr[], aggregateExprs: readonly Expr[], readonly output: readonly Attribute[], ctx: EvalContext) {
    this.children = [child];
    this.agg = compileAggregation(groupingExprs, aggregateExprs, child.output, ctx);
  }
  execute(ctx: BatchContext): Row[] {
    const groups = new Map<string, PartialGroup>();
    for (const row of this.child.execute(ctx)) this.agg.groupInto(row, groups);
    // A global aggregate over no rows still yields one row (count = 0), as in SQL.
    if (groups.size === 0 && this.agg.keyCount === 0) return [this.agg.resultRow([], this.agg.initialBuffers())];
    return [...groups.values()].map(([k, b]) => this.agg.resultRow(k, b));
  }
}

/** dropDuplicates on static data. */
export class DistinctExec implements Exec {
  readonly nodeName = 'Distinct';
  readonly children: readonly Exec[];
  readonly output: readonly Attribute[];
  private readonly keyOrdinals: number[];
  constructor(private readonly child: Exec, keys: readonly Attribute[]) {
    this.children = [child];
    this.output = child.output;
    this.keyOrdinals = keys.map((k) => child.output.findIndex((a) => a.id === k.id));
  }
  execute(ctx: BatchContext): Row[] {
    const seen = new Set<string>();
    return this.child.execute(ctx).filter((row) => {
      const k = encodeKey(this.keyOrdinals.map((i) => row[i]));
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    });
  }
}

/** EXCEPT / INTERSECT [ALL] over whole inputs (batch semantics). */
export class SetOperationExec implements Exec {
  readonly nodeName: string;
  readonly children: readonly Exec[];
  constructor(private readonly op: 'Except' | 'Intersect', private readonly all: boolean, private readonly left: Exec, private readonly right: Exec, readonly output: readonly Attribute[]) {
    this.nodeName = op;
    this.children = [left, right];
  }
  execute(ctx: BatchContext): Row[] {
    const counts = new Map<string, number>();
    for (const row of this.right.execute(ctx)) {
      const k = encodeKey(row);
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    const emitted = new Set<string>();
    const out: Row[] = [];
    for (const row of this.left.execute(ctx)) {
      const k = encodeKey(row);
      const n = counts.get(k) ?? 0;
      const keep = this.op === 'Except' ? n === 0 : n > 0;
      if (this.all) {
        if (this.op === 'Except' && n > 0) counts.set(k, n - 1);
        else if (this.op === 'Intersect' && n > 0) { counts.set(k, n - 1); out.push(row); }
        else if (this.op === 'Except') out.push(row);
        continue;
      }
      if (keep && !emitted.has(k)) {
        emitted.add(k);
        out.push(row);
      }
    }
    return out;
  }
}

/** `row_number()`/`rank()`/`dense_rank()` OVER (PARTITION BY .. ORDER BY ..), batch only. */
export class WindowFunctionExec implements Exec {
  readonly nodeName = 'Window';
  readonly children: readonly Exec[];
  private readonly partition: ((r: Row) => unknown)[];
  private readonly compare: (a: Row, b: Row) => number;
  constructor(private readonly child: Exec, private readonly fn: string, partitionBy: readonly Expr[], orderBy: readonly SortOrder[], readonly output: readonly Attribute[], ctx: EvalContext) {
    this.children = [child];
    this.partition = partitionBy.map((e) => compile(bind(e, child.output), ctx));
    this.compare = compileSortOrders(orderBy, child.output, ctx);
  }
  execute(ctx: BatchContext): Row[] {
    const groups = new Map<string, Row[]>();
    for (const row of this.child.execute(ctx)) {
      const k = encodeKey(this.partition.map((f) => f(row)));
      let g = groups.get(k);
      if (!g) groups.set(k, (g = []));
      g.push(row);
    }
    const out: Row[] = [];
    for (const rows of groups.values()) {
      rows.sort(this.compare);
      let rank = 0;
      let dense = 0;
      rows.forEach((row, i) => {
        const tie = i > 0 && this.compare(rows[i - 1]!, row) === 0;
        if (!tie) { rank = i + 1; dense++; }
        const value = this.fn === 'row_number' ? i + 1 : this.fn === 'rank' ? rank : dense;
        out.push([...row, value]);
      });
    }
    return out;
  }
}

/** Test-only: fails the batch once, the first time a row matches. */
export class FailOnceExec implements Exec {
  readonly nodeName = 'FailOnce';
  readonly children: readonly Exec[];
  readonly output: readonly Attribute[];
  private readonly predicate: (row: Row) => unknown;
  constructor(private readonly child: Exec, condition: Expr, private readonly message: string, private readonly token: { fired: boolean }, ctx: EvalContext) {
    this.children = [child];
    this.output = child.output;
    this.predicate = compile(bind(condition, child.output), ctx);
  }
  execute(ctx: BatchContext): Row[] {
    const rows = this.child.execute(ctx);
    if (!this.token.fired && rows.some((r) => this.predicate(r) === true)) {
      this.token.fired = true;
      throw new StreamingQueryError(this.message, { code: 'INJECTED_FAULT' });
    }
    return rows;
  }
}
