/**
 * Shrinks a mismatching case to a smaller one that still mismatches: drop whole steps, then an
 * input from a step, then single rows; keep a candidate only if the engines still disagree. Each
 * try runs Spark, so tries are bounded.
 */
import type { DiffCase } from './case-format.js';

export async function shrink(c: DiffCase, stillDiffers: (candidate: DiffCase) => Promise<boolean>, maxTries: number): Promise<{ smallest: DiffCase; tries: number }> {
  let best = c;
  let tries = 0;
  const attempt = async (steps: DiffCase['steps']): Promise<boolean> => {
    if (tries >= maxTries) return false;
    tries++;
    const candidate = { ...best, id: `${c.id}/shrunk`, steps };
    if (await stillDiffers(candidate)) {
      best = candidate;
      return true;
    }
    return false;
  };
  let progress = true;
  while (progress && tries < maxTries) {
    progress = false;
    for (let s = best.steps.length - 1; s >= 0; s--) {
      if (s < best.steps.length && (await attempt(best.steps.filter((_, i) => i !== s)))) progress = true;
    }
    for (let s = 0; s < best.steps.length; s++) {
      for (const name of Object.keys(best.steps[s]!)) {
        const steps = best.steps.map((st, i) => (i === s ? Object.fromEntries(Object.entries(st).filter(([k]) => k !== name)) : st));
        if (await attempt(steps)) progress = true;
        const rows = best.steps[s]?.[name];
        for (let r = (rows?.length ?? 0) - 1; r >= 0; r--) {
          const cur = best.steps[s]?.[name];
          if (!cur || r >= cur.length) continue;
          const fewer = best.steps.map((st, i) => (i === s ? { ...st, [name]: cur.filter((_, j) => j !== r) } : st));
          if (await attempt(fewer)) progress = true;
        }
      }
    }
  }
  return { smallest: best, tries };
}
