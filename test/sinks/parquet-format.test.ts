import { describe, expect, it } from 'vitest';
import { parquetRowProblem, parquetSchemaOf, unwritableParquetType } from '../../lib/sinks/parquet-format.js';
import { WINDOW_STRUCT, type StructField } from '../../lib/plan/data-types.js';

const fields: StructField[] = [
  { name: 'n', type: 'long' }, { name: 'i', type: 'int' }, { name: 's', type: 'string' },
  { name: 'w', type: WINDOW_STRUCT }, { name: 'tags', type: { kind: 'array', element: 'string' } },
];
const ordinals = [0, 1, 2, 3, 4];

describe('Parquet mapping', () => {
  it('maps types as Spark writes them: INT64 longs, UTC micros timestamps, 3-level lists, groups for structs', () => {
    expect(parquetSchemaOf(fields)).toEqual([
      { name: 'spark_schema', num_children: 5 },
      { name: 'n', repetition_type: 'OPTIONAL', type: 'INT64' },
      { name: 'i', repetition_type: 'OPTIONAL', type: 'INT32' },
      { name: 's', repetition_type: 'OPTIONAL', type: 'BYTE_ARRAY', converted_type: 'UTF8' },
      { name: 'w', repetition_type: 'OPTIONAL', num_children: 2 },
      { name: 'start', repetition_type: 'OPTIONAL', type: 'INT64', logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MICROS' } },
      { name: 'end', repetition_type: 'OPTIONAL', type: 'INT64', logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MICROS' } },
      { name: 'tags', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      { name: 'element', repetition_type: 'OPTIONAL', type: 'BYTE_ARRAY', converted_type: 'UTF8' },
    ]);
  });

  it('says why a row cannot be written, naming the field; NULLs are fine', () => {
    const ok = [1, 2, 'x', { start: 0, end: 1 }, ['a']];
    expect(parquetRowProblem(ok, fields, ordinals)).toBeNull();
    expect(parquetRowProblem([null, null, null, null, null], fields, ordinals)).toBeNull();
    expect(parquetRowProblem([1.5, 2, 'x', null, null], fields, ordinals)).toMatch(/^n: the value is not an exact 64-bit integer/);
    expect(parquetRowProblem([2 ** 60, 2, 'x', null, null], fields, ordinals)).toMatch(/^n: the value is not an exact 64-bit integer/);
    expect(parquetRowProblem([1, 2 ** 31, 'x', null, null], fields, ordinals)).toMatch(/^i: the value is not a 32-bit integer/);
    expect(parquetRowProblem([1, 2, '\ud800', null, null], fields, ordinals)).toMatch(/^s: the string holds an unpaired UTF-16 surrogate/);
    expect(parquetRowProblem([1, 2, 'x', { start: Number.NaN, end: 1 }, null], fields, ordinals)).toMatch(/^w\.start: the value is not a timestamp/);
    expect(parquetRowProblem([1, 2, 'x', null, ['a', 7]], fields, ordinals)).toMatch(/^tags\[1\]: number is not a string/);
  });

  it('refuses void and interval columns', () => {
    expect(unwritableParquetType('null')).toMatch(/void/);
    expect(unwritableParquetType({ kind: 'array', element: 'interval' })).toBe('interval');
    expect(unwritableParquetType(WINDOW_STRUCT)).toBeNull();
  });
});
