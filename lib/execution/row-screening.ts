/**
 * Row-at-a-time isolation of a batch's expression evaluation, before any state is touched: which
 * of one source's rows raise a data error (an ANSI error: a zero divisor, a malformed cast) on
 * their own. A batch holding such rows fails as a whole; finding them one failing run at a time
 * costs a search per row, so one pass here names all of them.
 *
 * The pass runs, for each row alone, the plan's row-local operators above the source (project,
 * filter, alias, watermark, union, a join with a static relation), then what the first stateful
 * operator above them evaluates per input row before it reads or merges state (an aggregate's or
 * a session window's keys, session and input expressions; a stream-stream join side's keys and
 * its conditions on that side alone, for the rows its watermark does not drop), or, when the
 * whole plan is row-local, what the sink computes per row (the partial aggregation before a
 * repartition hop). The batch run evaluates exactly these expressions on exactly these rows, so
 * a row raises here if and only if it raises there. Not found here: errors that depend on several
 * rows (a sum that overflows) or on state (a join condition on both sides, any expression above
 * a stateful operator, whose input rows depend on state): the search in
 * lib/query/data-error-search.ts finds those, bounded by the invocation's deadline and resumed by
 * the retry. A join condition on both sides is not screened per record pair: the pairs it meets
 * depend on the join's state and on the order the join matches its inputs, and the record to
 * blame for a pair is the later one in shard order only while no earlier culprit was withheld, so
 * screening pairs would be the join replayed record by record with state open, which is what the
 * search's runs are. Deduplication and the arbitrary
 * stateful operators evaluate nothing of their own per row (their keys and event time are
 * columns, computed below them, where they are screened).
 */
import { EventTimeWatermarkExec, FilterExec, PassThroughExec, ProjectExec, StreamScanExec, UnionExec } from './basic-execs.js';
import { HashJoinExec } from './hash-join-exec.js';
import type { Row } from './evaluate.js';
import type { BatchContext, Exec } from './physical.js';

/**
 * An operator that can evaluate, for one row of its input `child` (an index into `children`),
 * what its `execute` evaluates for that row before it touches state.
 */
export interface RowScreeningExec extends Exec {
  screenInputRow(row: Row, ctx: BatchContext, child: number): void;
}

function screensInputRows(e: Exec): e is RowScreeningExec {
  return typeof (e as Partial<RowScreeningExec>).screenInputRow === 'function';
}

function readsAnyStream(e: Exec): boolean {
  return e instanceof StreamScanExec || e.children.some(readsAnyStream);
}

/** Operators whose output for a set of rows is the union of their outputs for each row alone. */
function isRowLocal(e: Exec): boolean {
  if (e instanceof HashJoinExec) return isRowLocalJoin(e);
  const local = e instanceof StreamScanExec || e instanceof ProjectExec || e instanceof FilterExec
    || e instanceof PassThroughExec || e instanceof EventTimeWatermarkExec || e instanceof UnionExec;
  return local && e.children.every(isRowLocal);
}

/**
 * A join of a stream with a static relation, when each stream row's output and the pairs whose
 * condition it evaluates do not depend on the other stream rows: every join type that preserves
 * only the stream side (or neither). Not a left semi join with the stream on the right (a static
 * row stops at its first matching stream row) nor an outer join preserving the static side.
 */
function isRowLocalJoin(join: HashJoinExec): boolean {
  const [left, right] = join.children as [Exec, Exec];
  const streamOnLeft = readsAnyStream(left);
  const [stream, other] = streamOnLeft ? [left, right] : [right, left];
  if (readsAnyStream(other)) return false;
  const preservesOnlyStream = join.joinType === 'inner' || join.joinType === 'cross'
    || (streamOnLeft ? ['left_outer', 'left_semi', 'left_anti'].includes(join.joinType) : join.joinType === 'right_outer');
  return preservesOnlyStream && isRowLocal(stream);
}

function readsSource(e: Exec, sourceName: string): boolean {
  return (e instanceof StreamScanExec && e.sourceName === sourceName) || e.children.some((c) => readsSource(c, sourceName));
}

/** A row-local part of the plan over the source, and what consumes each of its rows. */
interface ScreenedPart {
  readonly rows: Exec;
  readonly consume: ((row: Row, ctx: BatchContext) => void) | null;
}

function screenedParts(root: Exec, sourceName: string, screenOutputRow: ((row: Row) => void) | null): ScreenedPart[] {
  const parts: ScreenedPart[] = [];
  const visit = (e: Exec, consume: ScreenedPart['consume']): void => {
    if (!readsSource(e, sourceName)) return;
    if (isRowLocal(e)) {
      parts.push({ rows: e, consume });
      return;
    }
    e.children.forEach((child, i) => visit(child, screensInputRows(e) ? (row, ctx) => e.screenInputRow(row, ctx, i) : null));
  };
  visit(root, screenOutputRow ? (row) => screenOutputRow(row) : null);
  return parts;
}

export interface ScreeningOptions {
  /** The batch's context (watermarks, output mode); its source rows and stores are not used. */
  readonly ctx: BatchContext;
  readonly sourceName: string;
  readonly rows: readonly Row[];
  /** Errors that belong to a row's values; any other error is thrown. */
  readonly isDataError: (error: unknown) => boolean;
  /** What the sink evaluates per row, when the whole plan is row-local (absent: nothing). */
  readonly screenOutputRow?: (row: Row) => void;
}

/** The rows (by index) that raise a data error on their own, each with its error. */
export function screenRows(root: Exec, options: ScreeningOptions): Map<number, unknown> {
  const { ctx, sourceName, rows, isDataError } = options;
  const noState = (): never => {
    throw new Error('row screening must not touch state');
  };
  // The batch's context with other rows and no state; its other members (methods on its
  // prototype included, which a spread would drop) through the prototype chain.
  const contextWith = (sourceRows: Row[]): BatchContext => Object.assign(Object.create(ctx) as BatchContext, {
    sourceRows: new Map([[sourceName, sourceRows]]), store: noState,
  });
  const run = (part: ScreenedPart, context: BatchContext): void => {
    const out = part.rows.execute(context);
    if (part.consume) for (const row of out) part.consume(row, context);
  };
  // A part that raises with no source row at all (a static relation in a union) blames no row.
  const parts = screenedParts(root, sourceName, options.screenOutputRow ?? null).filter((part) => {
    try {
      run(part, contextWith([]));
      return true;
    } catch (error) {
      if (isDataError(error)) return false;
      throw error;
    }
  });
  const raised = new Map<number, unknown>();
  if (parts.length === 0) return raised;
  for (let i = 0; i < rows.length; i++) {
    const context = contextWith([[...rows[i]!]]);
    try {
      for (const part of parts) run(part, context);
    } catch (error) {
      if (!isDataError(error)) throw error;
      raised.set(i, error);
    }
  }
  return raised;
}
