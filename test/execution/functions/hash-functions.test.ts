import { describe, expect, it } from 'vitest';
import { crc32, hash, hex, md5, sha2, xxhash64 } from '../../../lib/plan/functions.js';
import { evaluator } from './evaluate-call.js';

const schema = { s: 'string', i: 'int', l: 'long', d: 'double' };
const ev = (c: Parameters<typeof evaluator>[0]): ReturnType<typeof evaluator> => evaluator(c, schema);

// Expected values: PySpark 4.0.1's answers for the same inputs (the functions/hash spark-diff case).
describe('hash functions', () => {
  it('hash() is Spark\'s Murmur3 x86_32, seed 42, per type', () => {
    expect(ev(hash('s')).run('Spark', null, null, null)).toBe(228093765);
    expect(ev(hash('s')).run('', null, null, null)).toBe(142593372);
    expect(ev(hash('i')).run(null, 1, null, null)).toBe(-559580957);
    expect(ev(hash('i')).run(null, -1, null, null)).toBe(-1604776387);
    expect(ev(hash('l')).run(null, null, 10000000000, null)).toBe(1311884982);
    expect(ev(hash('d')).run(null, null, null, 1.5)).toBe(1290763749);
    expect(ev(hash('s', 'i', 'l', 'd')).run(null, null, null, null)).toBe(42);
  });

  it('hash() of a string with a tail of 1-3 bytes mixes each byte as Spark\'s hashUnsafeBytes does', () => {
    expect(ev(hash('s')).run('abcde', null, null, null)).toBe(814637928);
  });

  it('digests of the UTF-8 bytes, lower-case hex; sha2 of an unsupported length is NULL', () => {
    expect(ev(md5('s')).run('Spark', null, null, null)).toBe('8cde774d6f7333752ed72cacddb05126');
    expect(ev(sha2('s', 7)).run('Spark', null, null, null)).toBeNull();
    expect(ev(crc32('s')).run('', null, null, null)).toBe(0);
    expect(ev(md5('s')).run(null, null, null, null)).toBeNull();
  });

  it('hex of a long is its two\'s complement; xxhash64 of NULLs is the seed', () => {
    expect(ev(hex('l')).run(null, null, -1, null)).toBe('FFFFFFFFFFFFFFFF');
    expect(ev(hex('s')).run('Spark', null, null, null)).toBe('537061726B');
    expect(ev(xxhash64('s')).run(null, null, null, null)).toBe(42);
  });
});
