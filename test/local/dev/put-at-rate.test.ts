/** `sluice dev --rate`: parsing, and the pacing of the puts (a fake clock, no timing). */
import { describe, expect, it } from 'vitest';
import { parseRate, putAtRate } from '../../../lib/local/dev/put-at-rate.js';

describe('parseRate', () => {
  it('reads records per second or per minute', () => {
    expect(parseRate('200/s')).toBe(200);
    expect(parseRate('50')).toBe(50);
    expect(parseRate('30/min')).toBe(0.5);
  });
  it('refuses what is not a positive rate', () => {
    for (const bad of ['0/s', '-3/s', 'fast', '10/h']) expect(() => parseRate(bad)).toThrow(/--rate must look like 200\/s/);
  });
});

describe('putAtRate', () => {
  it('puts in order, in chunks of a tenth of a second\'s records, waiting the chunk\'s share of a second between them', async () => {
    const chunks: number[][] = [];
    const waits: number[] = [];
    let now = 1_000_000;
    const realNow = Date.now;
    Date.now = () => now;
    try {
      await putAtRate(async (chunk) => { chunks.push([...chunk]); }, Array.from({ length: 45 }, (_, i) => i), 100,
        async (ms) => { waits.push(Math.round(ms)); now += ms; });
    } finally {
      Date.now = realNow;
    }
    expect(chunks.map((c) => c.length)).toEqual([10, 10, 10, 10, 5]);
    expect(chunks.flat()).toEqual(Array.from({ length: 45 }, (_, i) => i));
    expect(waits).toEqual([100, 100, 100, 100]);
  });

  it('puts one record at a time below 10 per second', async () => {
    const waits: number[] = [];
    let now = 0;
    const realNow = Date.now;
    Date.now = () => now;
    try {
      await putAtRate(async () => {}, [1, 2, 3], 2, async (ms) => { waits.push(ms); now += ms; });
    } finally {
      Date.now = realNow;
    }
    expect(waits).toEqual([500, 500]);
  });
});
