import { describe, expect, it } from 'vitest';
import {
  HIVE_DEFAULT_PARTITION, escapePathName, partitionPath, resolvePartitionColumns, unescapePathName,
} from '../../lib/sinks/partition-path.js';
import type { StructField } from '../../lib/plan/data-types.js';

describe('Hive partition paths', () => {
  it('escapes what Hive escapes and nothing else', () => {
    expect(escapePathName('a/b')).toBe('a%2Fb');
    expect(escapePathName('x=y:z')).toBe('x%3Dy%3Az');
    expect(escapePathName('..')).toBe('..');
    expect(escapePathName('sp ace ünï')).toBe('sp ace ünï');
    expect(escapePathName('%#?*"\'\\{[]^\u007f\u0001\n')).toBe('%25%23%3F%2A%22%27%5C%7B%5B%5D%5E%7F%01%0A');
    for (const v of ['a/b', 'x=y', '100%', 'tab\there']) expect(unescapePathName(escapePathName(v))).toBe(v);
  });

  it('renders a row\'s folders: values as Spark casts them, NULL and empty in the default partition', () => {
    const fields: StructField[] = [{ name: 'dt', type: 'string' }, { name: 'at', type: 'timestamp' }, { name: 'n', type: 'long' }];
    expect(partitionPath(['2026-12-01', Date.UTC(2026, 11, 1, 10, 30) * 1000, 7], fields, [0, 1, 2]))
      .toBe('dt=2026-12-01/at=2026-12-01 10%3A30%3A00/n=7/');
    expect(partitionPath([null, null, null], fields.slice(0, 1), [0])).toBe(`dt=${HIVE_DEFAULT_PARTITION}/`);
    expect(partitionPath([''], fields.slice(0, 1), [0])).toBe(`dt=${HIVE_DEFAULT_PARTITION}/`);
    expect(partitionPath(['../../etc'], fields.slice(0, 1), [0])).toBe('dt=..%2F..%2Fetc/');
  });

  it('refuses a partitionBy column that is not in the result, twice, complex, or every column', () => {
    const schema: StructField[] = [{ name: 'a', type: 'string' }, { name: 'w', type: { kind: 'struct', fields: [] } }];
    expect(() => resolvePartitionColumns(['b'], schema)).toThrow(expect.objectContaining({ code: 'UNKNOWN_PARTITION_COLUMN' }));
    expect(() => resolvePartitionColumns(['a', 'a'], schema)).toThrow(expect.objectContaining({ code: 'DUPLICATE_PARTITION_COLUMN' }));
    expect(() => resolvePartitionColumns(['w'], schema)).toThrow(expect.objectContaining({ code: 'INVALID_PARTITION_COLUMN_TYPE' }));
    expect(() => resolvePartitionColumns(['a'], schema.slice(0, 1))).toThrow(expect.objectContaining({ code: 'ALL_COLUMNS_PARTITIONED' }));
    expect(resolvePartitionColumns(['a'], schema)).toEqual([schema[0]]);
  });
});
