import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { longFromBigInt } from '../../core/long.js';
import type { ScalarFunctionImplementation } from './implementation.js';
import { nullIntolerant } from './implementation.js';
import { compileMurmur3Hasher } from './murmur3.js';
import { asStrings } from './spark-values.js';
import { compileValueHasher, hashHi, hashLo } from '../xxhash64.js';

/** Spark's seed for hash() and xxhash64(). */
const SEED = 42;

/** A digest of the argument's UTF-8 bytes (Spark casts a string to BINARY as UTF-8), as lower-case hex. */
function digest(name: string, algorithm: string): ScalarFunctionImplementation {
  return { name, compile: (args, call) => nullIntolerant(asStrings(args, call.args.map((a) => a.type)), ([s]) => createHash(algorithm).update(String(s), 'utf8').digest('hex')) };
}

const SHA2: Record<number, string> = { 0: 'sha256', 224: 'sha224', 256: 'sha256', 384: 'sha384', 512: 'sha512' };

/** Hash functions (signatures: lib/plan/function-catalog/hash-signatures.ts). */
export const HASH_FUNCTIONS: readonly ScalarFunctionImplementation[] = [
  digest('md5', 'md5'),
  digest('sha1', 'sha1'),
  digest('sha', 'sha1'),
  {
    // Spark's Sha2: an unsupported bit length gives NULL.
    name: 'sha2',
    compile: (args, call) => nullIntolerant(asStrings(args.slice(0, 1), [call.args[0]!.type]).concat(args.slice(1)), ([s, bits]) => {
      const algorithm = SHA2[Number(bits)];
      return algorithm === undefined ? null : createHash(algorithm).update(String(s), 'utf8').digest('hex');
    }),
  },
  { name: 'crc32', compile: (args, call) => nullIntolerant(asStrings(args, call.args.map((a) => a.type)), ([s]) => crc32(Buffer.from(String(s), 'utf8'))) },
  {
    // Spark's Hex: a long as its two's-complement digits, a string as its UTF-8 bytes; upper case.
    name: 'hex',
    compile: (args, call) => {
      const t = call.args[0]!.type;
      if (t === 'int' || t === 'long') return nullIntolerant(args, ([v]) => BigInt.asUintN(64, BigInt(v as number | bigint)).toString(16).toUpperCase());
      return nullIntolerant(asStrings(args, [t]), ([s]) => Buffer.from(String(s), 'utf8').toString('hex').toUpperCase());
    },
  },
  {
    name: 'hash',
    compile: (args, call) => {
      const hashers = call.args.map((a) => compileMurmur3Hasher(a.type));
      return (row) => {
        let h = SEED;
        for (let i = 0; i < args.length; i++) h = hashers[i]!(args[i]!(row), h);
        return h;
      };
    },
  },
  {
    name: 'xxhash64',
    compile: (args, call) => {
      const hashers = call.args.map((a) => compileValueHasher(a.type));
      return (row) => {
        let hi = 0;
        let lo = SEED;
        for (let i = 0; i < args.length; i++) {
          hashers[i]!(args[i]!(row), hi, lo);
          hi = hashHi;
          lo = hashLo;
        }
        return longFromBigInt(BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo >>> 0)));
      };
    },
  },
];
