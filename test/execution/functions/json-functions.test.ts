import { describe, expect, it } from 'vitest';
import { from_json, get_json_object, json_array_length, json_object_keys, to_json } from '../../../lib/plan/functions.js';
import { evaluator } from './evaluate-call.js';

const j = { j: 'string' };
const run = (c: Parameters<typeof evaluator>[0], v: unknown): unknown => evaluator(c, j).run(v);

describe('JSON functions (Spark semantics)', () => {
  it('from_json reads a DDL or type-string schema; a field of the wrong type is NULL, the others kept', () => {
    const e = evaluator(from_json('j', 'a INT, b STRING, c ARRAY<INT>'), j);
    expect(e.type).toEqual({ kind: 'struct', fields: [{ name: 'a', type: 'int' }, { name: 'b', type: 'string' }, { name: 'c', type: { kind: 'array', element: 'int' } }] });
    expect(e.run('{"a":1,"b":"x","c":[1,2]}')).toEqual({ a: 1, b: 'x', c: [1, 2] });
    expect(e.run('{"a":1.5,"b":{"k":1}}')).toEqual({ a: null, b: '{"k":1}', c: null });
    expect(e.run('{bad')).toEqual({ a: null, b: null, c: null });
    expect(e.run(null)).toBeNull();
    expect(run(from_json('j', 'struct<a:long>'), '{"a":9007199254740993}')).toEqual({ a: 9007199254740993n });
  });

  it('from_json with an array schema gives NULL for malformed text', () => {
    expect(run(from_json('j', 'array<int>'), '[1,2]')).toEqual([1, 2]);
    expect(run(from_json('j', 'array<int>'), '{"a":1}')).toBeNull();
  });

  it('refuses a schema that is not a string literal', () => {
    expect(() => evaluator(from_json('j', 'a INTT'), j)).toThrow(/UNSUPPORTED_DATATYPE\] Unsupported data type "INTT"/);
  });

  it('to_json leaves NULL fields out and writes doubles as Java does', () => {
    const e = evaluator(to_json(from_json('j', 'a INT, b DOUBLE, c STRING')), j);
    expect(e.run('{"a":null,"b":1,"c":"x\\u0001"}')).toBe('{"b":1.0,"c":"x\\u0001"}');
  });

  it('get_json_object: scalars as text, strings unquoted, nested values as compact JSON, NULL when absent or malformed', () => {
    const doc = '{"a":1.50,"b":"x","c":[1,{"d":true}],"e":null}';
    expect(run(get_json_object('j', '$.a'), doc)).toBe('1.5');
    expect(run(get_json_object('j', '$.b'), doc)).toBe('x');
    expect(run(get_json_object('j', '$.c[1]'), doc)).toBe('{"d":true}');
    expect(run(get_json_object('j', "$['c'][0]"), doc)).toBe('1');
    expect(run(get_json_object('j', '$.e'), doc)).toBeNull();
    expect(run(get_json_object('j', '$.zz'), doc)).toBeNull();
    expect(run(get_json_object('j', 'a'), doc)).toBeNull();
    expect(run(get_json_object('j', '$.a'), '{bad')).toBeNull();
  });

  it('json_array_length and json_object_keys: NULL for other kinds of value', () => {
    expect(run(json_array_length('j'), '[1,[2,3]]')).toBe(2);
    expect(run(json_array_length('j'), '{}')).toBeNull();
    expect(run(json_object_keys('j'), '{"x":1,"y":{}}')).toEqual(['x', 'y']);
    expect(run(json_object_keys('j'), '[1]')).toBeNull();
  });
});
