import { durationToMicros } from '../plan/intervals.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';

/** Spark's triggers. `processingTime` with 0 ms runs batches back to back. */
export type Trigger =
  | { readonly kind: 'processingTime'; readonly intervalMs: number }
  | { readonly kind: 'once' }
  | { readonly kind: 'availableNow' };

export const Trigger = {
  ProcessingTime(interval: string | number): Trigger {
    const intervalMs = typeof interval === 'number' ? interval : durationToMicros(interval, 'trigger interval') / 1000;
    if (!(intervalMs >= 0)) {
      throw new IllegalArgumentError(`Trigger interval must not be negative: ${interval}`, { code: 'INVALID_TRIGGER', hint: 'use e.g. "10 seconds", or 0 to run batches back to back.' });
    }
    return { kind: 'processingTime', intervalMs };
  },
  Once(): Trigger {
    return { kind: 'once' };
  },
  AvailableNow(): Trigger {
    return { kind: 'availableNow' };
  },
};
