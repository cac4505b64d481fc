/**
 * Spark's Murmur3_x86_32 as its `hash()` function uses it (seed 42): int and boolean as one 4-byte
 * word, long and timestamp as two, double as its IEEE bits (-0.0 as 0.0), string through
 * `hashUnsafeBytes`, which, unlike the reference MurmurHash3, mixes each trailing byte (sign
 * extended) as a whole word; arrays and structs element by element, the running hash as the next
 * seed; NULL skipped.
 */
import { typeToString, type DataType } from '../../plan/data-types.js';
import type { Decimal } from '../../core/decimal.js';
import { AnalysisError } from '../../errors/sluice-error.js';

const C1 = 0xcc9e2d51 | 0;
const C2 = 0x1b873593 | 0;

function mixK1(k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  return Math.imul(k, C2);
}

function mixH1(h: number, k: number): number {
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

function fmix(h: number, length: number): number {
  h ^= length;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b | 0);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35 | 0);
  return h ^ (h >>> 16);
}

export function murmur3Int(v: number, seed: number): number {
  return fmix(mixH1(seed, mixK1(v)), 4);
}

export function murmur3Long(hi: number, lo: number, seed: number): number {
  return fmix(mixH1(mixH1(seed, mixK1(lo)), mixK1(hi)), 8);
}

export function murmur3Bytes(bytes: Uint8Array, seed: number): number {
  const aligned = bytes.length - (bytes.length % 4);
  let h = seed;
  for (let i = 0; i < aligned; i += 4) {
    h = mixH1(h, mixK1(bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24)));
  }
  for (let i = aligned; i < bytes.length; i++) h = mixH1(h, mixK1((bytes[i]! << 24) >> 24));
  return fmix(h, bytes.length);
}

const view = new DataView(new ArrayBuffer(8));

function murmur3LongValue(v: number | bigint, seed: number): number {
  if (typeof v === 'bigint') {
    const u = BigInt.asUintN(64, v);
    return murmur3Long(Number(u >> 32n) | 0, Number(u & 0xffffffffn) | 0, seed);
  }
  return murmur3Long(Math.floor(v / 2 ** 32) | 0, v | 0, seed);
}

export type Murmur3Hasher = (value: unknown, seed: number) => number;

/** A hasher folding a value of `type` into the running hash, as Spark's Murmur3HashFunction does. */
export function compileMurmur3Hasher(type: DataType): Murmur3Hasher {
  const skipNull = (inner: Murmur3Hasher): Murmur3Hasher => (v, seed) => (v === null || v === undefined ? seed : inner(v, seed));
  switch (type) {
    case 'int': return skipNull((v, s) => murmur3Int(v as number, s));
    case 'boolean': return skipNull((v, s) => murmur3Int(v ? 1 : 0, s));
    case 'long': case 'timestamp': case 'interval': return skipNull((v, s) => murmur3LongValue(v as number | bigint, s));
    case 'double':
      return skipNull((v, s) => {
        view.setFloat64(0, v === 0 ? 0 : Number.isNaN(v) ? NaN : (v as number));
        return murmur3Long(view.getInt32(0), view.getInt32(4), s);
      });
    case 'string': return skipNull((v, s) => murmur3Bytes(Buffer.from(String(v), 'utf8'), s));
    case 'null': return (_v, s) => s;
    case 'date': return skipNull((v, s) => murmur3Int(v as number, s));
    case 'binary': return skipNull((v, s) => murmur3Bytes(Buffer.from(v as Uint8Array), s));
    default:
      if (type.kind === 'decimal') {
        // Spark hashes a decimal of precision <= 18 as its unscaled long; wider ones by their
        // BigInteger bytes, not done here (refused rather than hashed differently).
        if (type.precision > 18) throw new AnalysisError(`hash() of ${typeToString(type)} is not supported yet (precision above 18).`, { code: 'UNSUPPORTED_DATATYPE' });
        return skipNull((v, s) => murmur3LongValue((v as Decimal).unscaled, s));
      }
      if (type.kind === 'map') {
        const key = compileMurmur3Hasher(type.key);
        const value = compileMurmur3Hasher(type.value);
        return skipNull((v, s) => {
          let h = s;
          for (const [k, x] of v as Map<unknown, unknown>) h = value(x, key(k, h));
          return h;
        });
      }
      if (type.kind === 'array') {
        const element = compileMurmur3Hasher(type.element);
        return skipNull((v, s) => (v as readonly unknown[]).reduce<number>((h, x) => element(x, h), s));
      }
      {
        const fields = type.fields.map((f) => [f.name, compileMurmur3Hasher(f.type)] as const);
        return skipNull((v, s) => fields.reduce((h, [name, hash]) => hash((v as Record<string, unknown>)[name], h), s));
      }
  }
}
