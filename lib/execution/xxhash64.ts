import type { Decimal } from '../core/decimal.js';
import type { DataType } from '../plan/data-types.js';

/**
 * XXH64 (xxHash, 64-bit) computed on two unsigned 32-bit halves, so no BigInt on the hot path,
 * plus Spark's way of feeding typed values to it (`XxHash64Function`, seed 42 in HLL++):
 * int and boolean as 4 bytes, long and timestamp as 8 bytes, double as its IEEE bits, string as
 * UTF-8, arrays and structs element by element with the running hash as the next seed, NULL
 * skipped. A value therefore hashes as it does in Spark, and HyperLogLog registers match Spark's.
 *
 * Results go to `hashHi` / `hashLo` (read them right after the call): no allocation per hash.
 * All 64-bit quantities are kept as two *signed* int32 halves, so they stay small integers in V8
 * (an unsigned half above 2^31 would be boxed as a heap number whenever it is stored).
 */

// The five XXH64 primes, as [high, low] int32 halves.
const P1H = 0x9e3779b1 | 0, P1L = 0x85ebca87 | 0;
const P2H = 0xc2b2ae3d | 0, P2L = 0x27d4eb4f | 0;
const P3H = 0x165667b1 | 0, P3L = 0x9e3779f9 | 0;
const P4H = 0x85ebca77 | 0, P4L = 0xc2b2ae63 | 0;
const P5H = 0x27d4eb2f | 0, P5L = 0x165667c5 | 0;
// -P1 mod 2^64 (P1L is not 0, so no carry into the high half).
const NEG_P1H = ~P1H, NEG_P1L = (~P1L + 1) | 0;
const TWO_32 = 0x1_0000_0000;

/** High and low halves (signed int32) of the last hash computed. */
export let hashHi = 0;
export let hashLo = 0;

// Scratch result of the 64-bit helpers below.
let rH = 0;
let rL = 0;

/** (ah:al) * (bh:bl) mod 2^64. */
function mul(ah: number, al: number, bh: number, bl: number): void {
  const a0 = al & 0xffff, a1 = al >>> 16, b0 = bl & 0xffff, b1 = bl >>> 16;
  const p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  const mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  rL = ((mid & 0xffff) << 16) | (p00 & 0xffff);
  const carry = p11 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16);
  rH = (carry + Math.imul(ah, bl) + Math.imul(al, bh)) | 0;
}

function add(ah: number, al: number, bh: number, bl: number): void {
  const lo = (al >>> 0) + (bl >>> 0);
  rL = lo | 0;
  rH = (ah + bh + (lo >= TWO_32 ? 1 : 0)) | 0;
}

/** Rotate left by 0 < r < 32. */
function rotl(h: number, l: number, r: number): void {
  rH = (h << r) | (l >>> (32 - r));
  rL = (l << r) | (h >>> (32 - r));
}

/** XXH64's round: rotl(acc + input * P2, 31) * P1. */
function round(accH: number, accL: number, inH: number, inL: number): void {
  mul(inH, inL, P2H, P2L);
  add(accH, accL, rH, rL);
  rotl(rH, rL, 31);
  mul(rH, rL, P1H, P1L);
}

/** acc = (acc ^ round(0, val)) * P1 + P4. */
function mergeRound(accH: number, accL: number, vH: number, vL: number): void {
  round(0, 0, vH, vL);
  mul(accH ^ rH, accL ^ rL, P1H, P1L);
  add(rH, rL, P4H, P4L);
}

/** The final avalanche; writes hashHi/hashLo. */
function avalanche(h: number, l: number): void {
  // h ^= h >>> 33
  l ^= h >>> 1;
  mul(h, l, P2H, P2L);
  h = rH;
  l = rL;
  // h ^= h >>> 29
  l ^= (l >>> 29) | (h << 3);
  h ^= h >>> 29;
  mul(h, l, P3H, P3L);
  h = rH;
  l = rL;
  // h ^= h >>> 32
  hashLo = l ^ h;
  hashHi = h;
}

/** The tail steps for one 8-byte lane: h ^= round(0, lane); h = rotl(h, 27) * P1 + P4. */
function tail8(h: number, l: number, laneH: number, laneL: number): void {
  round(0, 0, laneH, laneL);
  rotl(h ^ rH, l ^ rL, 27);
  mul(rH, rL, P1H, P1L);
  add(rH, rL, P4H, P4L);
}

/** The tail step for one 4-byte word: h ^= word * P1; h = rotl(h, 23) * P2 + P3. */
function tail4(h: number, l: number, word: number): void {
  mul(0, word, P1H, P1L);
  rotl(h ^ rH, l ^ rL, 23);
  mul(rH, rL, P2H, P2L);
  add(rH, rL, P3H, P3L);
}

function u32(b: Uint8Array, i: number): number {
  return b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24);
}

/** XXH64 of `bytes[0, length)` with a 64-bit seed given as halves; result in hashHi/hashLo. */
export function xxhash64Bytes(bytes: Uint8Array, length: number, seedHi: number, seedLo: number): void {
  let i = 0;
  let h: number;
  let l: number;
  if (length >= 32) {
    add(seedHi, seedLo, P1H, P1L);
    add(rH, rL, P2H, P2L);
    let v1h = rH, v1l = rL;
    add(seedHi, seedLo, P2H, P2L);
    let v2h = rH, v2l = rL;
    let v3h = seedHi, v3l = seedLo;
    add(seedHi, seedLo, NEG_P1H, NEG_P1L);
    let v4h = rH, v4l = rL;
    const limit = length - 32;
    do {
      round(v1h, v1l, u32(bytes, i + 4), u32(bytes, i)); v1h = rH; v1l = rL;
      round(v2h, v2l, u32(bytes, i + 12), u32(bytes, i + 8)); v2h = rH; v2l = rL;
      round(v3h, v3l, u32(bytes, i + 20), u32(bytes, i + 16)); v3h = rH; v3l = rL;
      round(v4h, v4l, u32(bytes, i + 28), u32(bytes, i + 24)); v4h = rH; v4l = rL;
      i += 32;
    } while (i <= limit);
    rotl(v1h, v1l, 1); h = rH; l = rL;
    rotl(v2h, v2l, 7); add(h, l, rH, rL); h = rH; l = rL;
    rotl(v3h, v3l, 12); add(h, l, rH, rL); h = rH; l = rL;
    rotl(v4h, v4l, 18); add(h, l, rH, rL); h = rH; l = rL;
    mergeRound(h, l, v1h, v1l); h = rH; l = rL;
    mergeRound(h, l, v2h, v2l); h = rH; l = rL;
    mergeRound(h, l, v3h, v3l); h = rH; l = rL;
    mergeRound(h, l, v4h, v4l); h = rH; l = rL;
  } else {
    add(seedHi, seedLo, P5H, P5L);
    h = rH;
    l = rL;
  }
  add(h, l, 0, length | 0);
  h = rH;
  l = rL;
  while (i + 8 <= length) {
    tail8(h, l, u32(bytes, i + 4), u32(bytes, i));
    h = rH;
    l = rL;
    i += 8;
  }
  if (i + 4 <= length) {
    tail4(h, l, u32(bytes, i));
    h = rH;
    l = rL;
    i += 4;
  }
  while (i < length) {
    // h ^= byte * P5; h = rotl(h, 11) * P1
    mul(0, bytes[i]!, P5H, P5L);
    rotl(h ^ rH, l ^ rL, 11);
    mul(rH, rL, P1H, P1L);
    h = rH;
    l = rL;
    i++;
  }
  avalanche(h, l);
}

/** XXH64 of the 4 bytes of a 32-bit integer, little-endian (Spark's `hashInt`). */
export function xxhash64Int(value: number, seedHi: number, seedLo: number): void {
  add(seedHi, seedLo, P5H, P5L);
  add(rH, rL, 0, 4);
  tail4(rH, rL, value | 0);
  avalanche(rH, rL);
}

/** XXH64 of the 8 bytes of a 64-bit integer given as halves, little-endian (Spark's `hashLong`). */
export function xxhash64Long(hi: number, lo: number, seedHi: number, seedLo: number): void {
  add(seedHi, seedLo, P5H, P5L);
  add(rH, rL, 0, 8);
  tail8(rH, rL, hi | 0, lo | 0);
  avalanche(rH, rL);
}

/** Convenience for tests and tools: XXH64 as an unsigned BigInt. */
export function xxhash64(bytes: Uint8Array, seed: bigint = 0n): bigint {
  const s = BigInt.asUintN(64, seed);
  xxhash64Bytes(bytes, bytes.length, Number(BigInt.asIntN(32, s >> 32n)), Number(BigInt.asIntN(32, s)));
  return (BigInt(hashHi >>> 0) << 32n) | BigInt(hashLo >>> 0);
}

let scratch = new Uint8Array(256);
const encoder = new TextEncoder();
const doubleView = new DataView(new ArrayBuffer(8));

function hashString(s: string, seedHi: number, seedLo: number): void {
  const n = s.length;
  if (n * 3 > scratch.length) scratch = new Uint8Array(Math.max(n * 3, scratch.length * 2));
  let ascii = true;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c > 0x7f) {
      ascii = false;
      break;
    }
    scratch[i] = c;
  }
  const length = ascii ? n : encoder.encodeInto(s, scratch).written;
  xxhash64Bytes(scratch, length, seedHi, seedLo);
}

function hashLongNumber(v: number | bigint, seedHi: number, seedLo: number): void {
  if (typeof v === 'bigint') {
    // A long beyond 2^53: its two's-complement halves, as Spark hashes the 64-bit value.
    xxhash64Long(Number(BigInt.asIntN(32, v >> 32n)), Number(BigInt.asIntN(32, v)), seedHi, seedLo);
  } else if (Number.isSafeInteger(v)) {
    const hi = Math.floor(v / TWO_32);
    xxhash64Long(hi | 0, (v - hi * TWO_32) | 0, seedHi, seedLo);
  } else {
    hashDouble(v, seedHi, seedLo);
  }
}

function hashDouble(v: number, seedHi: number, seedLo: number): void {
  // -0.0 counts as 0.0 (Spark normalizes it for grouping and distinct); NaN has one bit pattern.
  doubleView.setFloat64(0, v === 0 ? 0 : Number.isNaN(v) ? NaN : v);
  xxhash64Long(doubleView.getInt32(0), doubleView.getInt32(4), seedHi, seedLo);
}

/**
 * A hasher for values of `type`: folds a value into the running 64-bit hash (seedHi:seedLo) the
 * way Spark's XxHash64Function does. A NULL value leaves the hash unchanged (hashHi/hashLo = seed).
 */
export type ValueHasher = (value: unknown, seedHi: number, seedLo: number) => void;

export function compileValueHasher(type: DataType): ValueHasher {
  const skipNull = (inner: ValueHasher): ValueHasher => (v, sh, sl) => {
    if (v === null || v === undefined) {
      hashHi = sh;
      hashLo = sl;
    } else {
      inner(v, sh, sl);
    }
  };
  switch (type) {
    case 'int':
    case 'date': // days since the epoch, an int in Spark
      return skipNull((v, sh, sl) => xxhash64Int(v as number, sh, sl));
    case 'binary':
      return skipNull((v, sh, sl) => xxhash64Bytes(v as Uint8Array, (v as Uint8Array).length, sh, sl));
    case 'boolean':
      return skipNull((v, sh, sl) => xxhash64Int(v ? 1 : 0, sh, sl));
    case 'long':
    case 'timestamp':
    case 'interval':
      return skipNull((v, sh, sl) => hashLongNumber(v as number | bigint, sh, sl));
    case 'double':
      return skipNull((v, sh, sl) => hashDouble(v as number, sh, sl));
    case 'string':
      return skipNull((v, sh, sl) => hashString(String(v), sh, sl));
    case 'null':
      return skipNull(() => {
        throw new Error('a value of type null must be NULL');
      });
    default:
      if (type.kind === 'decimal') {
        // Spark: a decimal that fits a long hashes its unscaled long, a wider one its BigInteger's bytes.
        if (type.precision <= 18) return skipNull((v, sh, sl) => hashLongNumber(canonicalLong((v as Decimal).unscaled), sh, sl));
        return skipNull((v, sh, sl) => {
          const bytes = twosComplementBytes((v as Decimal).unscaled);
          xxhash64Bytes(bytes, bytes.length, sh, sl);
        });
      }
      if (type.kind === 'map') {
        const key = compileValueHasher(type.key);
        const value = compileValueHasher(type.value);
        return skipNull((v, sh, sl) => {
          let h = sh;
          let l = sl;
          for (const [k, x] of v as Map<unknown, unknown>) {
            key(k, h, l);
            value(x, hashHi, hashLo);
            h = hashHi;
            l = hashLo;
          }
          hashHi = h;
          hashLo = l;
        });
      }
      if (type.kind === 'array') {
        const element = compileValueHasher(type.element);
        return skipNull((v, sh, sl) => {
          let h = sh;
          let l = sl;
          for (const x of v as readonly unknown[]) {
            element(x, h, l);
            h = hashHi;
            l = hashLo;
          }
          hashHi = h;
          hashLo = l;
        });
      }
      {
        const fields = type.fields.map((f) => [f.name, compileValueHasher(f.type)] as const);
        return skipNull((v, sh, sl) => {
          let h = sh;
          let l = sl;
          for (const [name, hash] of fields) {
            hash((v as Record<string, unknown>)[name], h, l);
            h = hashHi;
            l = hashLo;
          }
          hashHi = h;
          hashLo = l;
        });
      }
  }
}

const canonicalLong = (v: bigint): number | bigint => (v >= -9007199254740991n && v <= 9007199254740991n ? Number(v) : v);

/** Java's BigInteger.toByteArray: minimal big-endian two's complement. */
function twosComplementBytes(v: bigint): Uint8Array {
  let bytes = 1;
  while (v < -(1n << BigInt(8 * bytes - 1)) || v >= 1n << BigInt(8 * bytes - 1)) bytes++;
  const out = new Uint8Array(bytes);
  let x = BigInt.asUintN(8 * bytes, v);
  for (let i = bytes - 1; i >= 0; i--) {
    out[i] = Number(x & 0xffn);
    x >>= 8n;
  }
  return out;
}
