import { bind } from '../analysis/binder.js';
import type { Attribute } from '../plan/attribute.js';
import type { Expr } from '../plan/expressions.js';
import type { JoinType } from '../plan/logical-plan.js';
import type { EvalContext } from './eval-context.js';
import { compile, type Row } from './evaluate.js';
import type { BatchContext, Exec } from './physical.js';

/**
 * A join without state: both inputs are complete for this batch. Used for stream-static joins
 * (the static side is recomputed every batch, as in Spark) and for batch queries.
 */
export class HashJoinExec implements Exec {
  readonly nodeName = 'BroadcastNestedLoopJoin';
  readonly children: readonly Exec[];
  private readonly matches: (row: Row) => boolean;
  private readonly leftWidth: number;
  private readonly rightWidth: number;

  constructor(
    private readonly left: Exec,
    private readonly right: Exec,
    readonly joinType: JoinType,
    condition: Expr | null,
    readonly output: readonly Attribute[],
    ctx: EvalContext,
  ) {
    this.children = [left, right];
    this.leftWidth = left.output.length;
    this.rightWidth = right.output.length;
    const predicate = condition ? compile(bind(condition, [...left.output, ...right.output]), ctx) : null;
    this.matches = predicate ? (row) => predicate(row) === true : () => true;
  }

  execute(ctx: BatchContext): Row[] {
    const leftRows = this.left.execute(ctx);
    const rightRows = this.right.execute(ctx);
    const nullsLeft = new Array<unknown>(this.leftWidth).fill(null);
    const nullsRight = new Array<unknown>(this.rightWidth).fill(null);
    const rightMatched = new Uint8Array(rightRows.length);
    const out: Row[] = [];
    for (const l of leftRows) {
      let matched = false;
      for (let j = 0; j < rightRows.length; j++) {
        const joined = [...l, ...rightRows[j]!];
        if (!this.matches(joined)) continue;
        matched = true;
        rightMatched[j] = 1;
        if (this.joinType === 'left_semi') break;
        if (this.joinType !== 'left_anti') out.push(joined);
      }
      if (this.joinType === 'left_semi' && matched) out.push([...l]);
      if (this.joinType === 'left_anti' && !matched) out.push([...l]);
      if (!matched && (this.joinType === 'left_outer' || this.joinType === 'full_outer')) out.push([...l, ...nullsRight]);
    }
    if (this.joinType === 'right_outer' || this.joinType === 'full_outer') {
      rightRows.forEach((r, j) => {
        if (!rightMatched[j]) out.push([...nullsLeft, ...r]);
      });
    }
    return out;
  }
}
