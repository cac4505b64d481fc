/**
 * Requests in flight that adapt to throttling, additive increase / multiplicative decrease as in
 * TCP: one more after `limit` successes, half as many after a throttle (never below `min`). One
 * limiter lives as long as its sink, so a warm container keeps what it learned about the table.
 */
import { sleep } from './dynamodb-cost.js';

export class AdaptiveConcurrency {
  private successes = 0;
  /** The most requests ever in flight at once (diagnostics and tests). */
  peak = 0;

  constructor(public limit = 64, readonly min = 4, readonly max = 256) {
    if (!(min >= 1 && limit >= min && max >= limit)) throw new RangeError(`need 1 <= min <= limit <= max, got ${min}, ${limit}, ${max}`);
  }

  succeeded(): void {
    if (++this.successes < this.limit) return;
    this.successes = 0;
    this.limit = Math.min(this.max, this.limit + 1);
  }

  throttled(): void {
    this.successes = 0;
    this.limit = Math.max(this.min, Math.floor(this.limit / 2));
  }
}

export interface AdaptiveRunOptions {
  /** Whether an error is a throttle: the item is retried (after a back-off) with fewer in flight. */
  readonly isThrottle: (error: unknown) => boolean;
  /** Throttles one item may meet before its error is thrown (default 4). */
  readonly maxThrottlesPerItem?: number;
  readonly backoffMs?: (attempt: number) => number;
}

/**
 * Runs `fn` over `items` with at most `limiter.limit` in flight. The first error that is not a
 * throttle (or a throttle too many) is thrown once nothing is in flight any more.
 */
export function runAdaptive<T>(items: readonly T[], limiter: AdaptiveConcurrency, fn: (item: T) => Promise<void>, options: AdaptiveRunOptions): Promise<void> {
  const maxThrottles = options.maxThrottlesPerItem ?? 4;
  const backoff = options.backoffMs ?? ((attempt: number) => Math.min(50 * 2 ** attempt, 2_000) * (0.5 + Math.random() / 2));
  const queue = items.map((item) => ({ item, throttles: 0 }));
  let inFlight = 0;
  let failure: { error: unknown } | null = null;
  return new Promise<void>((resolve, reject) => {
    const pump = (): void => {
      if (failure) {
        if (inFlight === 0) reject(failure.error);
        return;
      }
      if (queue.length === 0 && inFlight === 0) {
        resolve();
        return;
      }
      while (inFlight < limiter.limit && queue.length > 0) {
        const job = queue.shift()!;
        inFlight++;
        limiter.peak = Math.max(limiter.peak, inFlight);
        void (async () => {
          try {
            await fn(job.item);
            limiter.succeeded();
          } catch (error) {
            if (options.isThrottle(error) && job.throttles < maxThrottles) {
              limiter.throttled();
              job.throttles++;
              await sleep(backoff(job.throttles));
              queue.unshift(job);
            } else {
              failure ??= { error };
            }
          } finally {
            inFlight--;
            pump();
          }
        })();
      }
    };
    pump();
  });
}
