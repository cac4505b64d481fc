import { EventTimeWatermarkExec } from './basic-execs.js';
import { isStatefulExec, type Exec } from './physical.js';

/**
 * Spark's PropagateWatermarkSimulator (>= 3.4): walks the plan children-first. A watermark node
 * outputs the global watermark; a stateful operator's input is the min of its children's outputs
 * and it outputs `produceOutputWatermark(input)`; other nodes pass the min through. Returns each
 * stateful operator's input watermark (ms, never below 0). A global watermark of 0 skips the walk.
 */
export function propagateWatermark(root: Exec, globalWatermarkMs: number): Map<number, number> {
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
  visit(root);
  return inputs;
}
