import { EventTimeWatermarkExec } from './basic-execs.js';
import { isStatefulExec, type Exec } from './physical.js';

/**
 * Spark's PropagateWatermarkSimulator (>= 3.4): walks the plan children-first. A watermark node
 * outputs the global watermark; a stateful operator's input is the min of its children's outputs
 * and it outputs `produceOutputWatermark(input)`; other nodes pass the min through. Returns each
 * stateful operator's input watermark (ms, never below 0). A global watermark of 0 skips the walk.
 */
export function propagateWatermark(root: Exec, globalWatermarkMs: number): ReadonlyMap<number, number> {
  return walk(root, globalWatermarkMs).inputs;
}

/**
 * The watermark of the plan's output (ms, never below 0): what a stage carries to the stage after
 * it. Below the global one after an operator that delays it (a time-interval join holds rows
 * until the interval has passed); null when no watermark reaches the root.
 */
export function outputWatermark(root: Exec, globalWatermarkMs: number): number | null {
  const out = walk(root, globalWatermarkMs).output;
  return out === null ? null : globalWatermarkMs === 0 ? 0 : Math.max(out, 0);
}

interface Walk {
  readonly inputs: ReadonlyMap<number, number>;
  readonly output: number | null;
}

/**
 * Per plan, its last walks by global watermark: a batch asks for the same two or three watermarks
 * (this batch's, the previous one's) several times, and the walk depends on nothing else (a plan's
 * operators and their produceOutputWatermark are fixed).
 */
const recentWalks = new WeakMap<Exec, Map<number, Walk>>();
const WALKS_KEPT = 4;

function walk(root: Exec, globalWatermarkMs: number): Walk {
  let walks = recentWalks.get(root);
  if (walks === undefined) recentWalks.set(root, (walks = new Map()));
  let result = walks.get(globalWatermarkMs);
  if (result === undefined) {
    result = walkPlan(root, globalWatermarkMs);
    if (walks.size >= WALKS_KEPT) walks.delete(walks.keys().next().value!);
    walks.set(globalWatermarkMs, result);
  }
  return result;
}

function walkPlan(root: Exec, globalWatermarkMs: number): Walk {
  const inputs = new Map<number, number>();
  const visit = (e: Exec): number | null => {
    const childOutputs = e.children.map(visit).filter((w): w is number => w !== null);
    const input = childOutputs.length > 0 ? Math.min(...childOutputs) : null;
    if (e instanceof EventTimeWatermarkExec) return globalWatermarkMs;
    if (isStatefulExec(e)) {
      inputs.set(e.operatorId, globalWatermarkMs === 0 ? 0 : Math.max(input ?? 0, 0));
      return input === null ? null : e.produceOutputWatermark(input);
    }
    return input;
  };
  const output = visit(root);
  return { inputs, output };
}
