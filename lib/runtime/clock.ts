/** Time source for triggers and batch timestamps; tests swap in a ManualClock. */
export interface Clock {
  nowMs(): number;
}

export const systemClock: Clock = { nowMs: () => Date.now() };

/** Spark's StreamManualClock: starts at 0 (or a given time) and moves only when told to. */
export class ManualClock implements Clock {
  constructor(private timeMs = 0) {}
  nowMs(): number {
    return this.timeMs;
  }
  advance(ms: number): void {
    this.timeMs += ms;
  }
}
