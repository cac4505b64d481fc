/**
 * The streamed state payload: the same bytes as the whole text compressed at once (so a re-run of a
 * batch writes the same hash, and readers see no new format), with no piece of text larger than
 * PIECE_BYTES plus one element, however large the state.
 */
import { gunzipSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { Decimal } from '../../lib/core/decimal.js';
import { decodeStateJson, encodeStateJson } from '../../lib/aws/state-json.js';
import { gzipJsonParts, PIECE_BYTES, type PayloadStats } from '../../lib/aws/state-payload-stream.js';

const entries = (n: number, value: (i: number) => unknown): [string, unknown][] =>
  Array.from({ length: n }, (_, i) => [`[{"start":1714521600000000},"user-${String(i).padStart(7, '0')}"]`, value(i)]);

describe('gzipJsonParts', () => {
  it('writes the bytes of the whole payload compressed at once, tagged values included, across many pieces', async () => {
    const special = [Number.NaN, -0, Infinity, undefined, 2n ** 60n, new Decimal(12345n, 2), new Uint8Array([1, 2, 3])];
    const e = entries(40_000, (i) => (i % 1000 === 7 ? [i, special[(i / 1000) % special.length | 0]] : [i, (i % 997) / 10]));
    const stats: PayloadStats = { largestPiece: 0, textLength: 0 };
    const streamed = await gzipJsonParts(['{"e":[', { elements: e }, ']}'], stats);
    const whole = encodeStateJson({ e }, e.map((x) => x[1]));
    expect(stats.textLength).toBe(whole.length);
    expect(stats.textLength).toBeGreaterThan(4 * PIECE_BYTES);
    expect(streamed.equals(gzipSync(whole))).toBe(true);
    const back = decodeStateJson(gunzipSync(streamed).toString('utf8')) as { e: [string, unknown][] };
    expect(back.e[7]![1]).toEqual([7, Number.NaN]);
    expect(back.e[2007]![1]).toEqual([2007, Infinity]);
  });

  it('a delta: puts and removals, either empty', async () => {
    const puts = entries(3, (i) => ({ count: i }));
    for (const [p, r] of [[puts, ['a', 'b']], [[], ['a']], [puts, []], [[], []]] as [[string, unknown][], string[]][]) {
      const streamed = await gzipJsonParts(['{"p":[', { elements: p }, '],"r":[', { elements: r }, ']}']);
      expect(streamed.equals(gzipSync(encodeStateJson({ p, r }, p.map((x) => x[1]))))).toBe(true);
    }
  });

  it('never holds the text of the whole state: pieces stay near PIECE_BYTES, large values alone in theirs', async () => {
    const stats: PayloadStats = { largestPiece: 0, textLength: 0 };
    await gzipJsonParts(['{"e":[', { elements: entries(200_000, (i) => [i, i / 3]) }, ']}'], stats);
    expect(stats.textLength).toBeGreaterThan(20 * PIECE_BYTES);
    expect(stats.largestPiece).toBeLessThanOrEqual(PIECE_BYTES * 1.1);

    const big = 'x'.repeat(PIECE_BYTES);
    const large: PayloadStats = { largestPiece: 0, textLength: 0 };
    await gzipJsonParts(['{"e":[', { elements: entries(40, () => big) }, ']}'], large);
    expect(large.textLength).toBeGreaterThan(40 * PIECE_BYTES);
    // One element longer than a piece makes the slices shrink to one element each.
    expect(large.largestPiece).toBeLessThan(3 * PIECE_BYTES);
  });
});
