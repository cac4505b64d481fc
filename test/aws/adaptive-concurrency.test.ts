import { describe, expect, it } from 'vitest';
import { AdaptiveConcurrency, runAdaptive } from '../../lib/aws/adaptive-concurrency.js';

const throttle = Object.assign(new Error('throttled'), { code: 'SINK_THROTTLED' });
const isThrottle = (e: unknown): boolean => (e as { code?: string }).code === 'SINK_THROTTLED';
const tick = (): Promise<void> => new Promise((r) => setTimeout(r, 1));

describe('runAdaptive', () => {
  it('runs every item with up to `limit` in flight', async () => {
    const limiter = new AdaptiveConcurrency(64);
    const done: number[] = [];
    await runAdaptive(Array.from({ length: 500 }, (_, i) => i), limiter, async (i) => { await tick(); done.push(i); }, { isThrottle });
    expect(done.sort((a, b) => a - b)).toEqual(Array.from({ length: 500 }, (_, i) => i));
    expect(limiter.peak).toBeGreaterThanOrEqual(64);
    expect(limiter.peak).toBeLessThanOrEqual(limiter.limit);
    expect(limiter.limit).toBeGreaterThan(64); // no throttle: it grew
  });

  it('a table that throttles above 10 in flight: fewer in flight, every item written once', async () => {
    const limiter = new AdaptiveConcurrency(64);
    let inFlight = 0;
    let throttles = 0;
    const written = new Map<number, number>();
    await runAdaptive(Array.from({ length: 300 }, (_, i) => i), limiter, async (i) => {
      inFlight++;
      try {
        await tick();
        if (inFlight > 10) { throttles++; throw throttle; }
        written.set(i, (written.get(i) ?? 0) + 1);
      } finally {
        inFlight--;
      }
    }, { isThrottle, backoffMs: () => 1, maxThrottlesPerItem: 20 });
    expect([...written.values()].every((n) => n === 1)).toBe(true);
    expect(written.size).toBe(300);
    expect(throttles).toBeGreaterThan(0);
    expect(limiter.limit).toBeLessThanOrEqual(16);
  });

  it('throws a throttle that persists, and any other error, once nothing is in flight', async () => {
    let running = 0;
    await expect(runAdaptive([1, 2, 3], new AdaptiveConcurrency(2, 1), async () => { throw throttle; }, { isThrottle, backoffMs: () => 1, maxThrottlesPerItem: 2 }))
      .rejects.toBe(throttle);
    const boom = new Error('boom');
    await expect(runAdaptive([1, 2, 3, 4], new AdaptiveConcurrency(4, 1), async (i) => {
      running++;
      await tick();
      running--;
      if (i === 1) throw boom;
    }, { isThrottle })).rejects.toBe(boom);
    expect(running).toBe(0);
  });
});
