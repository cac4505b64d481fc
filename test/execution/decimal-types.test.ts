import { describe, expect, it } from 'vitest';
import { bind } from '../../lib/analysis/binder.js';
import { compile, compileCast } from '../../lib/execution/evaluate.js';
import { newEvalContext } from '../../lib/execution/eval-context.js';
import { compareValues, encodeKey, valuesEqual } from '../../lib/execution/values.js';
import { newAttribute } from '../../lib/plan/attribute.js';
import { Column } from '../../lib/plan/column.js';
import { parseDataType, typeToString, type DataType } from '../../lib/plan/data-types.js';
import { col, lit, try_divide } from '../../lib/plan/functions.js';
import { Decimal, parseDecimal } from '../../lib/core/decimal.js';
import { toSchema } from '../../lib/api/schema.js';

const dec = (text: string, type: string): Decimal => compileCast((r) => r[0], 'string', parseDataType(type))([text]) as Decimal;

function evaluate(c: Column, types: Record<string, DataType>, row: unknown[]): { value: unknown; type: string } {
  const input = Object.entries(types).map(([name, t]) => newAttribute(name, t));
  const bound = bind(c.expr, input);
  return { value: compile(bound, newEvalContext())(row), type: typeToString(bound.type) };
}
const show = (r: { value: unknown; type: string }): [string | null, string] => [r.value === null ? null : String(r.value), r.type];

// Expected types and values from PySpark 4.0.1 (ANSI mode on, its default).
describe('decimal(p,s)', () => {
  const a = parseDataType('decimal(10,2)');
  const b = parseDataType('decimal(5,1)');
  const row = [dec('1.25', 'decimal(10,2)'), dec('2.5', 'decimal(5,1)')];

  it('parses decimal types instead of splitting them at the comma', () => {
    expect(parseDataType('decimal(10,2)')).toEqual({ kind: 'decimal', precision: 10, scale: 2 });
    expect(parseDataType('DECIMAL')).toEqual({ kind: 'decimal', precision: 10, scale: 0 });
    expect(parseDataType('array<decimal(38, 18)>')).toEqual({ kind: 'array', element: { kind: 'decimal', precision: 38, scale: 18 } });
    expect(() => parseDataType('decimal(39,2)')).toThrow(/precision 39 exceeds max precision 38/);
    expect(() => parseDataType('decimal(3,4)')).toThrow(/scale \(4\) cannot be greater than precision \(3\)/);
  });

  it('uses Spark’s result precision and scale for + - * / %', () => {
    expect(show(evaluate(col('a').plus(col('b')), { a, b }, row))).toEqual(['3.75', 'decimal(11,2)']);
    expect(show(evaluate(col('a').multiply(col('b')), { a, b }, row))).toEqual(['3.125', 'decimal(16,3)']);
    const one = [dec('1', 'decimal(10,2)'), dec('3', 'decimal(5,1)')];
    expect(show(evaluate(col('a').divide(col('b')), { a, b }, one))).toEqual(['0.33333333', 'decimal(17,8)']);
    const wide = parseDataType('decimal(38,10)');
    expect(show(evaluate(col('a').divide(col('b')), { a: wide, b: wide }, [dec('1', 'decimal(38,10)'), dec('3', 'decimal(38,10)')]))).toEqual(['0.333333', 'decimal(38,6)']);
    expect(show(evaluate(col('a').mod(col('b')), { a, b }, [dec('1', 'decimal(10,2)'), dec('0.3', 'decimal(5,1)')]))).toEqual(['0.10', 'decimal(6,2)']);
  });

  it('widens integers (a literal by its digits) and gives double with a double', () => {
    expect(show(evaluate(col('a').plus(lit(1)), { a }, [dec('1', 'decimal(10,2)')]))).toEqual(['2.00', 'decimal(11,2)']);
    expect(show(evaluate(col('a').plus(col('n')), { a, n: 'int' }, [dec('1', 'decimal(10,2)'), 1]))).toEqual(['2.00', 'decimal(13,2)']);
    expect(show(evaluate(col('a').plus(lit(1.5)), { a }, [dec('1', 'decimal(10,2)')]))).toEqual(['2.5', 'double']);
    expect(show(evaluate(col('a').minus(col('a')).multiply(-1), { a }, [dec('-0.05', 'decimal(10,2)')]))).toEqual(['0.00', 'decimal(13,2)']);
  });

  it('raises NUMERIC_VALUE_OUT_OF_RANGE past 38 digits and DIVIDE_BY_ZERO on zero; try_divide gives NULL', () => {
    const d38 = parseDataType('decimal(38,0)');
    const max = dec('99999999999999999999999999999999999999', 'decimal(38,0)');
    expect(() => evaluate(col('a').plus(col('b')), { a: d38, b: d38 }, [max, dec('1', 'decimal(38,0)')]))
      .toThrow('[NUMERIC_VALUE_OUT_OF_RANGE.WITH_SUGGESTION]  100000000000000000000000000000000000000 cannot be represented as Decimal(38, 0).');
    expect(() => evaluate(col('a').divide(col('b')), { a, b }, [row[0], dec('0', 'decimal(5,1)')])).toThrow(/DIVIDE_BY_ZERO/);
    expect(evaluate(try_divide(col('a'), col('b')), { a, b }, [row[0], dec('0', 'decimal(5,1)')]).value).toBeNull();
    expect(evaluate(col('a').plus(col('b')), { a, b }, [null, row[1]]).value).toBeNull();
  });

  it('casts: string (HALF_UP, malformed, overflow), double, long, int, back to string', () => {
    expect(String(dec('1.005', 'decimal(10,2)'))).toBe('1.01');
    expect(String(dec('-1.005', 'decimal(10,2)'))).toBe('-1.01');
    expect(String(dec('0.0000001', 'decimal(10,7)'))).toBe('0.0000001');
    expect(String(dec('1e3', 'decimal(10,1)'))).toBe('1000.0');
    expect(() => dec('123.456', 'decimal(4,2)')).toThrow('[NUMERIC_VALUE_OUT_OF_RANGE.WITH_SUGGESTION]  123.456 cannot be represented as Decimal(4, 2).');
    expect(() => dec('abc', 'decimal(4,2)')).toThrow(`[CAST_INVALID_INPUT] The value 'abc' of the type "STRING" cannot be cast to "DECIMAL(4,2)" because it is malformed.`);
    const d = parseDataType('decimal(3,1)');
    expect(compileCast((r) => r[0], d, 'double')([dec('1.5', 'decimal(3,1)')])).toBe(1.5);
    expect(compileCast((r) => r[0], d, 'long')([dec('-1.5', 'decimal(3,1)')])).toBe(-1);
    expect(String(compileCast((r) => r[0], 'double', parseDataType('decimal(3,0)'))([2.5]))).toBe('3');
    expect(() => compileCast((r) => r[0], 'double', parseDataType('decimal(3,0)'))([1e10])).toThrow(/10000000000 cannot be represented as Decimal\(3, 0\)/);
    expect(String(compileCast((r) => r[0], 'int', parseDataType('decimal(3,1)'))([5]))).toBe('5.0');
    expect(compileCast((r) => r[0], 'string', parseDataType('decimal(4,2)'), true)(['abc'])).toBeNull();
  });

  it('compares, groups and deduplicates by value', () => {
    expect(compareValues(parseDecimal('1.50'), parseDecimal('1.5'))).toBe(0);
    expect(compareValues(parseDecimal('-2'), parseDecimal('1.5'))).toBe(-1);
    expect(valuesEqual(parseDecimal('1.50'), parseDecimal('1.5'))).toBe(true);
    expect(encodeKey([parseDecimal('1.50')])).toBe(encodeKey([parseDecimal('1.5')]));
    expect(encodeKey([parseDecimal('1.5')])).not.toBe(encodeKey(['1.5']));
    expect(encodeKey([parseDecimal('1.5'), 'x'])).not.toBe(encodeKey([parseDecimal('1.6'), 'x']));
    expect(evaluate(col('a').eq(col('b')), { a, b }, [dec('2.50', 'decimal(10,2)'), dec('2.5', 'decimal(5,1)')]).value).toBe(true);
    expect(evaluate(col('a').gt(col('b')), { a, b }, [dec('2.51', 'decimal(10,2)'), dec('2.5', 'decimal(5,1)')]).value).toBe(true);
  });
});

describe('date, binary and map values', () => {
  it('casts string ↔ date and timestamp ↔ date as Spark', () => {
    const toDate = compileCast((r) => r[0], 'string', 'date');
    expect(() => toDate(['2024-02-30'])).toThrow(/CAST_INVALID_INPUT.*"DATE"/);
    const days = toDate(['2024']) as number;
    expect(compileCast((r) => r[0], 'date', 'string')([days])).toBe('2024-01-01');
    expect(compileCast((r) => r[0], 'date', 'string')([toDate(['2024-05'])])).toBe('2024-05-01');
    expect(compileCast((r) => r[0], 'date', 'timestamp')([1])).toBe(86_400_000_000);
    expect(compileCast((r) => r[0], 'timestamp', 'date')([-1])).toBe(-1);
  });

  it('casts string ↔ binary as UTF-8 and orders binary by unsigned bytes', () => {
    const bytes = compileCast((r) => r[0], 'string', 'binary')(['hé']) as Uint8Array;
    expect([...bytes]).toEqual([0x68, 0xc3, 0xa9]);
    expect(compileCast((r) => r[0], 'binary', 'string')([bytes])).toBe('hé');
    expect(compareValues(new Uint8Array([0xff]), new Uint8Array([0x01, 0x00]))).toBeGreaterThan(0);
    expect(encodeKey([new Uint8Array([1, 2])])).toBe(encodeKey([new Uint8Array([1, 2])]));
    expect(encodeKey([new Uint8Array([1, 2])])).not.toBe(encodeKey([new Uint8Array([1, 3])]));
  });

  it('parses map types and keys maps by their entries', () => {
    expect(parseDataType('map<string, array<int>>')).toEqual({ kind: 'map', key: 'string', value: { kind: 'array', element: 'int' } });
    expect(typeToString(parseDataType('map<string,decimal(5,2)>'))).toBe('map<string,decimal(5,2)>');
    expect(encodeKey([new Map([['a', 1]])])).not.toBe(encodeKey([new Map([['a', 2]])]));
    expect(valuesEqual(new Map([['a', 1]]), new Map([['a', 1]]))).toBe(true);
  });
});

describe('refused casts and schema strings', () => {
  it('refuses a cast between date and a number before running, as Spark', () => {
    // PySpark 4.0.1: cast(date'2024-01-02' as int) → DATATYPE_MISMATCH.CAST_WITH_FUNC_SUGGESTION, cannot cast "DATE" to "INT".
    expect(() => evaluate(col('d').cast('int'), { d: 'date' }, [0])).toThrow(/\[DATATYPE_MISMATCH\.CAST_WITH_FUNC_SUGGESTION\].*cannot cast "DATE" to "INT"/);
    expect(() => evaluate(col('n').cast('date'), { n: 'long' }, [0])).toThrow(/cannot cast "BIGINT"|cannot cast "LONG"/);
    expect(evaluate(col('d').cast('string'), { d: 'date' }, [0]).value).toBe('1970-01-01');
  });

  it('names the field and position of an unknown type in a schema string', () => {
    // PySpark 4.0.1: [UNSUPPORTED_DATATYPE] Unsupported data type "STRNG". SQLSTATE: 0A000 (line 1, pos 19)
    expect(() => toSchema('ts timestamp, user strng'))
      .toThrow(`Unknown data type 'strng' for field 'user' at position 19 in 'ts timestamp, user strng' ([UNSUPPORTED_DATATYPE] Unsupported data type "STRNG")`);
    expect(() => toSchema('a int, b decimal(10,2), c map<string, decimal(5,1)>, d dte')).toThrow(/Unknown data type 'dte' for field 'd' at position 55/);
    expect(toSchema('a decimal(10, 2), b map<string,int>').map((f) => typeToString(f.type))).toEqual(['decimal(10,2)', 'map<string,int>']);
  });
});

describe('comparisons across types, as Spark widens them', () => {
  it('a decimal equals an integer of the same value; a date compares with a date string', () => {
    expect(evaluate(col('a').eq(lit(2)), { a: parseDataType('decimal(5,2)') }, [parseDecimal('2.00')]).value).toBe(true);
    expect(evaluate(col('a').eq(lit(2)), { a: parseDataType('decimal(5,2)') }, [parseDecimal('2.01')]).value).toBe(false);
    expect(evaluate(col('a').lt(lit(3)), { a: parseDataType('decimal(5,2)') }, [parseDecimal('2.99')]).value).toBe(true);
    const day = compileCast((r) => r[0], 'string', 'date')(['2024-01-02']);
    expect(evaluate(col('d').gt(lit('2024-01-01')), { d: 'date' }, [day]).value).toBe(true);
    expect(evaluate(col('d').eq(lit('2024-01-02')), { d: 'date' }, [day]).value).toBe(true);
    expect(() => evaluate(col('d').eq(lit('someday')), { d: 'date' }, [day])).toThrow(/CAST_INVALID_INPUT/);
  });
});
