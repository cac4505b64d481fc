import { describe, expect, it } from 'vitest';
import { copyPlainData } from '../../lib/checkpoint/plain-data-copy.js';
import { MemoryMetadataLog } from '../../lib/checkpoint/memory-checkpoint.js';

describe('copyPlainData', () => {
  it('copies plain data deeply, equal to structuredClone and sharing nothing', () => {
    const entry = {
      formatVersion: 1, batchId: 7, offsets: { a: 12, b: { shard: 's-1', seq: '4960' }, c: null },
      conf: { 'spark.sql.streaming.multipleWatermarkPolicy': 'min' }, list: [1, [2, 3], { x: -0 }], big: 2n ** 70n, missing: undefined,
    };
    const copied = copyPlainData(entry);
    expect(copied).toStrictEqual(structuredClone(entry));
    expect(Object.is((copied.list[2] as { x: number }).x, -0)).toBe(true);
    expect(copied.offsets).not.toBe(entry.offsets);
    expect(copied.offsets.b).not.toBe(entry.offsets.b);
    expect(copied.list[1]).not.toBe(entry.list[1]);
    expect('missing' in copied).toBe(true);
  });

  it('keeps an own __proto__ key as data, as structuredClone does', () => {
    const parsed = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}') as Record<string, unknown>;
    const copied = copyPlainData(parsed);
    expect(Object.getPrototypeOf(copied)).toBe(Object.prototype);
    expect(Object.keys(copied)).toEqual(['__proto__', 'a']);
    expect(copied).toStrictEqual(structuredClone(parsed));
  });

  it('hands anything that is not plain data to structuredClone: copied the same, or refused the same', () => {
    const when = new Date(15_000);
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const sparse = [1, , 3]; // eslint-disable-line no-sparse-arrays
    const values: unknown[] = [{ when }, { m: new Map([[1, 'x']]) }, cyclic, sparse, Object.assign([1, 2], { extra: true })];
    for (const value of values) expect(copyPlainData(value)).toStrictEqual(structuredClone(value));
    const copiedDate = copyPlainData({ when });
    expect(copiedDate.when).toBeInstanceOf(Date);
    expect(copiedDate.when).not.toBe(when);
    const copiedCycle = copyPlainData(cyclic);
    expect(copiedCycle.self).toBe(copiedCycle);
    expect(() => copyPlainData({ f: () => 1 })).toThrow(expect.objectContaining({ name: 'DataCloneError' }));
    class Offset { constructor(readonly n: number) {} }
    expect(copyPlainData({ o: new Offset(3) })).toStrictEqual(structuredClone({ o: new Offset(3) }));
  });
});

describe('MemoryMetadataLog', () => {
  it('keeps its own copy of each entry: changing what was added or what was read changes nothing in the log', async () => {
    const log = new MemoryMetadataLog<{ offsets: Record<string, number>; conf: Record<string, string> }>();
    const entry = { offsets: { s: 1 }, conf: { k: 'v' } };
    expect(await log.add(0, entry)).toBe(true);
    entry.offsets.s = 99;
    entry.conf.k = 'changed';
    const read = (await log.get(0))!;
    expect(read).toEqual({ offsets: { s: 1 }, conf: { k: 'v' } });
    read.offsets.s = 42;
    expect((await log.getLatest())![1].offsets.s).toBe(1);
    expect(await log.add(0, entry)).toBe(false);
  });
});
