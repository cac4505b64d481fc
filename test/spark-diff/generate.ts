/**
 * Seeded random steps for a shape: keys from a small set with NULLs, event times around a clock
 * that moves forward with a chosen out-of-order spread, some rows far behind the watermark, NULL
 * values and event times, empty steps and inputs missing from a step.
 */
import { createPrng } from '../../lib/local/sample-events.js';
import type { DiffCase, Json } from './case-format.js';

export interface GeneratorOptions {
  readonly maxSteps: number;
  readonly maxRowsPerStep: number;
  /** Seconds an event time may lag the clock. */
  readonly spread: number;
}

export function generateCase(shapeName: string, shape: Json, seed: number, options: GeneratorOptions): DiffCase {
  // The shape's name is mixed in so one seed gives each shape its own data (and step count).
  const random = createPrng([...shapeName].reduce((h, ch) => Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0, seed ^ 2166136261));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const chance = (p: number): boolean => random() < p;
  const streams = (shape.inputs as Json[]).filter((i) => i.kind === 'stream').map((i) => i.name as string);
  const steps: Record<string, unknown[][]>[] = [];
  let clock = Math.floor(random() * 20);
  const nSteps = 2 + Math.floor(random() * Math.max(1, options.maxSteps - 1));
  for (let s = 0; s < nSteps; s++) {
    const step: Record<string, unknown[][]> = {};
    for (const name of streams) {
      if (chance(0.15)) continue; // no offset for this input in this step
      const rows: unknown[][] = [];
      const n = chance(0.1) ? 0 : 1 + Math.floor(random() * options.maxRowsPerStep);
      for (let r = 0; r < n; r++) {
        const key = chance(0.06) ? null : pick(['a', 'b', 'c']);
        let ts: number | null = clock - Math.floor(random() * (options.spread + 1)) + Math.floor(random() * 3);
        if (chance(0.08)) ts = Math.max(0, clock - 60 - Math.floor(random() * 30)); // far behind the watermark
        if (chance(0.04)) ts = null;
        if (ts !== null && chance(0.2)) ts += 0.5;
        const value = chance(0.06) ? null : Math.floor(random() * 10);
        rows.push([key, ts === null ? null : Math.max(0, ts), value]);
      }
      step[name] = rows;
    }
    steps.push(step);
    clock += Math.floor(random() * 16);
  }
  return { id: `${shapeName}/seed-${seed}`, shape: shapeName, ...shape, steps };
}
