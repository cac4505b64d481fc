/**
 * Spark's progress rates (ProgressContext.constructNewProgress, Spark 3.1+):
 *   inputRowsPerSecond     = rows ÷ seconds from the previous trigger's start to this one's
 *   processedRowsPerSecond = rows ÷ seconds this trigger took (at least 1 ms)
 * Without a previous trigger Spark divides by +∞, so the first batch reports 0. A rate that is not
 * a finite number (two triggers in the same millisecond) Spark leaves out of its JSON; so does
 * Sluice, by leaving it out of the record (JSON.stringify would write null).
 */
export interface ProgressRates {
  /** Absent when the interval since the previous trigger is zero (Spark's NaN or ∞). */
  readonly inputRowsPerSecond?: number;
  readonly processedRowsPerSecond: number;
}

/**
 * @param triggerIntervalMs this trigger's start minus the previous one's on the trigger clock; null
 *   when there is none known. A negative interval (the previous start came from another container's
 *   clock, ahead of this one) says nothing about the input rate: treated as none known.
 */
export function progressRates(numInputRows: number, triggerIntervalMs: number | null, processingMs: number): ProgressRates {
  const processedRowsPerSecond = numInputRows / (Math.max(1, processingMs) / 1000);
  if (triggerIntervalMs === null || triggerIntervalMs < 0) return { inputRowsPerSecond: 0, processedRowsPerSecond };
  const inputRowsPerSecond = numInputRows / (triggerIntervalMs / 1000);
  return Number.isFinite(inputRowsPerSecond) ? { inputRowsPerSecond, processedRowsPerSecond } : { processedRowsPerSecond };
}
