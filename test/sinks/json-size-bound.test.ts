/**
 * The bound the hop's size check uses before converting a row to JSON: never below the row's real
 * encoded size (else an oversized row would cross and block the shard), and loose only by a
 * constant factor, so that only rows near the limit are converted.
 */
import { describe, expect, it } from 'vitest';
import { Decimal } from '../../lib/core/decimal.js';
import { stringifyWithLongs } from '../../lib/core/long.js';
import { jsonBytesBound } from '../../lib/sinks/json-size-bound.js';

const exact = (v: unknown): number => Buffer.byteLength(stringifyWithLongs(v));

describe('jsonBytesBound', () => {
  const hard: [string, unknown][] = [
    ['control characters', '\u0000\u0001\u001f'.repeat(100)],
    ['quotes and backslashes', '"\\'.repeat(100)],
    ['multi-byte text', 'é€😀'.repeat(100)],
    ['a lone surrogate', '\ud800x\udfff'],
    ['extreme numbers', [-1.2345678901234567e-308, Number.MAX_VALUE, -Number.MIN_VALUE, 0.1 + 0.2, -0, Number.NaN, Infinity]],
    ['a long beyond 2^53 and a decimal', [-(2n ** 63n), new Decimal(-123456789012345678901234567890n, 10)]],
    ['nested structs, nulls, booleans, holes', [{ start: 1714521600000000, end: null, tags: ['a', undefined, true], 'ké"y': { x: false } }]],
  ];
  it.each(hard)('is never below the encoded size: %s', (_, value) => {
    expect(jsonBytesBound(value)).toBeGreaterThanOrEqual(exact(value));
  });

  it('is within 6x of a plain row\'s size, so a row far under the limit is never converted', () => {
    const row = [{ start: 1714521600000000, end: 1714521900000000 }, 'user-12345', 7, 'x'.repeat(200)];
    expect(jsonBytesBound(row)).toBeLessThan(6 * exact(row));
  });

  it('has no bound for values it cannot size cheaply (the check converts them)', () => {
    expect(jsonBytesBound(new Date(0))).toBe(Infinity);
    expect(jsonBytesBound([1, new Uint8Array(4)])).toBe(Infinity);
  });
});
