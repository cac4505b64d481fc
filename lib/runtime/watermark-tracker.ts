import type { EventTimeStats } from '../execution/basic-execs.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';

export type MultipleWatermarkPolicy = 'min' | 'max';

export const WATERMARK_POLICY_CONF = 'spark.sql.streaming.multipleWatermarkPolicy';

export function parseWatermarkPolicy(value: string | undefined): MultipleWatermarkPolicy {
  const v = (value ?? 'min').toLowerCase();
  if (v === 'min' || v === 'max') return v;
  throw new IllegalArgumentError(`${WATERMARK_POLICY_CONF} must be one of the following: valid values are 'min' and 'max' (got '${value}').`, {
    code: 'INVALID_WATERMARK_POLICY',
  });
}

/**
 * Spark's WatermarkTracker. After each batch, every watermark operator that saw rows proposes
 * `max event time - delay`; one that never saw rows counts as 0. The global watermark is the min
 * (or max) of those and never goes backwards. Per-operator values live only in memory: after a
 * restart they start again from the global watermark kept in the checkpoint.
 */
export class WatermarkTracker {
  private readonly operatorWatermarks = new Map<number, number>();

  constructor(private readonly policy: MultipleWatermarkPolicy, private globalMs = 0) {}

  get currentWatermarkMs(): number {
    return this.globalMs;
  }

  setWatermark(ms: number): void {
    this.globalMs = Math.max(this.globalMs, ms);
  }

  update(stats: readonly { stats: EventTimeStats; delayMs: number }[]): void {
    if (stats.length === 0) return;
    stats.forEach(({ stats: s, delayMs }, index) => {
      if (s.count > 0) {
        const proposed = s.max - delayMs;
        const previous = this.operatorWatermarks.get(index);
        if (previous === undefined || proposed > previous) this.operatorWatermarks.set(index, proposed);
      } else if (!this.operatorWatermarks.has(index)) {
        this.operatorWatermarks.set(index, 0);
      }
    });
    const values = [...this.operatorWatermarks.values()];
    const chosen = this.policy === 'min' ? Math.min(...values) : Math.max(...values);
    if (chosen > this.globalMs) this.globalMs = chosen;
  }
}
