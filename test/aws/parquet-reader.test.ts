/**
 * The Parquet reader gives INT64 back as the engine's longs: exact beyond 2^53 (it rounded them
 * with Number(): 9007199254740993 came back as ...992), a plain number within.
 */
import { describe, expect, it } from 'vitest';
import { parquetRowsAsJson } from '../../lib/aws/parquet-reader.js';
import { encodeParquet } from '../../lib/sinks/parquet-format.js';
import type { StructField } from '../../lib/plan/data-types.js';

describe('parquetRowsAsJson', () => {
  it('reads INT64 exactly, in columns and inside lists', async () => {
    const fields: StructField[] = [{ name: 'n', type: 'long' }, { name: 'ns', type: { kind: 'array', element: 'long' } }, { name: 'i', type: 'int' }];
    const rows = [
      [9007199254740993n, [-9223372036854775808n, 7], 1],
      [9223372036854775807n, [], 2],
      [42, [1], null],
    ];
    const bytes = encodeParquet(rows, fields, [0, 1, 2]);
    expect(await parquetRowsAsJson(bytes)).toEqual([
      { n: 9007199254740993n, ns: [-9223372036854775808n, 7], i: 1 },
      { n: 9223372036854775807n, ns: [], i: 2 },
      { n: 42, ns: [1], i: null },
    ]);
  });
});
