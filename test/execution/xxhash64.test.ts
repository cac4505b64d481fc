import { describe, expect, it } from 'vitest';
import { compileValueHasher, hashHi, hashLo, xxhash64, xxhash64Int, xxhash64Long } from '../../lib/execution/xxhash64.js';
import { arrayOf, structOf, type DataType } from '../../lib/plan/data-types.js';

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
const M64 = (1n << 64n) - 1n;
/** The last hash as an unsigned BigInt. */
const last = (): bigint => (BigInt(hashHi >>> 0) << 32n) | BigInt(hashLo >>> 0);

/** A straightforward BigInt XXH64, written from the spec, to check the 32-bit-halves version. */
function referenceXxh64(input: Uint8Array, seed = 0n): bigint {
  const P1 = 0x9e3779b185ebca87n, P2 = 0xc2b2ae3d27d4eb4fn, P3 = 0x165667b19e3779f9n, P4 = 0x85ebca77c2b2ae63n, P5 = 0x27d4eb2f165667c5n;
  const rotl = (x: bigint, r: bigint): bigint => ((x << r) | (x >> (64n - r))) & M64;
  const round = (acc: bigint, lane: bigint): bigint => (rotl((acc + lane * P2) & M64, 31n) * P1) & M64;
  const merge = (acc: bigint, v: bigint): bigint => (((acc ^ round(0n, v)) * P1) + P4) & M64;
  const view = new DataView(input.buffer, input.byteOffset, input.byteLength);
  const lane = (i: number): bigint => view.getBigUint64(i, true);
  let i = 0;
  let h: bigint;
  if (input.length >= 32) {
    let v1 = (seed + P1 + P2) & M64, v2 = (seed + P2) & M64, v3 = seed, v4 = (seed - P1) & M64;
    for (; i + 32 <= input.length; i += 32) {
      v1 = round(v1, lane(i)); v2 = round(v2, lane(i + 8)); v3 = round(v3, lane(i + 16)); v4 = round(v4, lane(i + 24));
    }
    h = (rotl(v1, 1n) + rotl(v2, 7n) + rotl(v3, 12n) + rotl(v4, 18n)) & M64;
    h = merge(merge(merge(merge(h, v1), v2), v3), v4);
  } else {
    h = (seed + P5) & M64;
  }
  h = (h + BigInt(input.length)) & M64;
  for (; i + 8 <= input.length; i += 8) h = ((rotl(h ^ round(0n, lane(i)), 27n) * P1) + P4) & M64;
  if (i + 4 <= input.length) {
    h = ((rotl(h ^ ((BigInt(view.getUint32(i, true)) * P1) & M64), 23n) * P2) + P3) & M64;
    i += 4;
  }
  for (; i < input.length; i++) h = (rotl(h ^ ((BigInt(input[i]!) * P5) & M64), 11n) * P1) & M64;
  h ^= h >> 33n; h = (h * P2) & M64;
  h ^= h >> 29n; h = (h * P3) & M64;
  h ^= h >> 32n;
  return h;
}

describe('xxhash64', () => {
  it('matches the published XXH64 test vectors', () => {
    const vectors: [bigint, string, bigint][] = [
      [0n, '', 0xef46db3751d8e999n],
      [0n, 'a', 0xd24ec4f1a98c6e5bn],
      [0n, 'abc', 0x44bc2cf5ad770999n],
      [0n, '1234', 0xd8316e61d84f6ba4n],
      [0n, '12345678', 0xd2d02f08cf7cfd4an],
      [0n, '123456789012345', 0xc377d78ade001a3cn],
      [0n, '1234567890123456', 0xb61c33dc6c59f270n],
      [0n, '1234567890123456789012345678901', 0x8f367cb873a5376en],
      [0n, '12345678901234567890123456789012', 0x40fd1aa52d98274cn],
      [0n, 'The quick brown fox jumps over the lazy dog', 0x0b242d361fda71bcn],
      [5381n, '', 0xaf382146d5c3cacfn],
      [5381n, 'abc', 0x19d1c1b5c673451fn],
      [5381n, '12345678901234567890123456789012', 0x38ea26e7c55f8095n],
      [0xcafen, 'this is a test', 0x4228c3215949e862n],
    ];
    for (const [seed, text, expected] of vectors) {
      expect(xxhash64(utf8(text), seed).toString(16), `${text} / ${seed}`).toBe(expected.toString(16));
      expect(referenceXxh64(utf8(text), seed).toString(16), `reference ${text}`).toBe(expected.toString(16));
    }
  });

  it('agrees with the BigInt reference on every length up to 300 and random seeds', () => {
    let state = 12345;
    const next = (): number => ((state = (Math.imul(state, 1103515245) + 12345) >>> 0) >>> 8) & 0xff;
    for (let len = 0; len <= 300; len++) {
      const bytes = new Uint8Array(len);
      for (let i = 0; i < len; i++) bytes[i] = next();
      const seed = BigInt(next()) << BigInt(next() % 57) | BigInt(next());
      expect(xxhash64(bytes, seed), `length ${len}`).toBe(referenceXxh64(bytes, seed));
    }
  });

  it('hashes ints and longs as their little-endian bytes', () => {
    const le = (n: bigint, size: 4 | 8): Uint8Array => {
      const b = new Uint8Array(size);
      const v = new DataView(b.buffer);
      if (size === 4) v.setInt32(0, Number(n), true);
      else v.setBigInt64(0, n, true);
      return b;
    };
    for (const n of [0n, 1n, -1n, 123n, 2147483647n, -2147483648n]) {
      xxhash64Int(Number(n), 0, 42);
      expect(last()).toBe(referenceXxh64(le(n, 4), 42n));
    }
    for (const n of [0n, 1n, -1n, 1714574400000000n, -(2n ** 40n) - 5n, 2n ** 53n - 1n]) {
      const hi = Number(BigInt.asIntN(32, n >> 32n));
      const lo = Number(BigInt.asIntN(32, n));
      xxhash64Long(hi, lo, 0, 42);
      expect(last()).toBe(referenceXxh64(le(n, 8), 42n));
      compileValueHasher('long')(Number(n), 0, 42);
      expect(last()).toBe(referenceXxh64(le(n, 8), 42n));
    }
  });

  it("gives Spark's xxhash64('Spark', array(123), 2) = 5602566077635097486", () => {
    compileValueHasher('string')('Spark', 0, 42);
    compileValueHasher(arrayOf('int'))([123], hashHi, hashLo);
    compileValueHasher('int')(2, hashHi, hashLo);
    expect(BigInt.asIntN(64, last())).toBe(5602566077635097486n);
  });

  it('hashes strings as UTF-8, including non-ASCII and long strings', () => {
    for (const s of ['', 'ascii', 'naïve', '日本語', '😀 emoji', 'x'.repeat(1000) + 'é']) {
      compileValueHasher('string')(s, 0, 42);
      expect(last(), s).toBe(referenceXxh64(utf8(s), 42n));
    }
  });

  it('leaves the hash unchanged for NULL, and folds array elements and struct fields in order', () => {
    const hash = (type: DataType, v: unknown): bigint => {
      compileValueHasher(type)(v, 0, 42);
      return last();
    };
    expect(hash('string', null)).toBe(42n);
    expect(hash(arrayOf('int'), [1, null, 2])).toBe(hash(arrayOf('int'), [1, 2]));
    expect(hash(arrayOf('int'), [1, 2])).not.toBe(hash(arrayOf('int'), [2, 1]));
    const s = structOf([{ name: 'a', type: 'long' }, { name: 'b', type: 'string' }]);
    expect(hash(s, { a: 1, b: 'x' })).not.toBe(hash(s, { a: 1, b: 'y' }));
    expect(hash('double', -0)).toBe(hash('double', 0));
    expect(hash('double', 1.5)).not.toBe(hash('double', 2.5));
    expect(hash('boolean', true)).toBe(hash('int', 1));
  });
});
