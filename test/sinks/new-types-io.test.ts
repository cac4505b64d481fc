/** Date, decimal, binary and map values where they leave or enter the engine. */
import { parquetReadObjects } from 'hyparquet';
import { describe, expect, it } from 'vitest';
import { decodeStateJson, encodeStateJson } from '../../lib/aws/dynamodb-state-store.js';
import { daysFromCivil } from '../../lib/core/dates.js';
import { Decimal, parseDecimal } from '../../lib/core/decimal.js';
import { parseDataType, type StructField } from '../../lib/plan/data-types.js';
import { stringifyExternalRow, toExternalRow } from '../../lib/sinks/external-row.js';
import { encodeParquet, parquetRowProblem, parquetSchemaOf } from '../../lib/sinks/parquet-format.js';
import { showValue } from '../../lib/sinks/show-string.js';
import { createJsonDecoder } from '../../lib/sources/json-decoder.js';
import { decodeRepartitionRecord, encodeRepartitionRecord, REPARTITION_RECORD_VERSION } from '../../lib/sources/repartition-records.js';
import { toSchema } from '../../lib/api/schema.js';

const schema: StructField[] = toSchema('d date, amount decimal(5,2), big decimal(38,10), bin binary, m map<string,int>');
const row = [
  daysFromCivil(2024, 1, 2), parseDecimal('1.50'), parseDecimal('12345678901234567890123456.0123456789'), new Uint8Array([0x68, 0x69]),
  new Map<string, number | null>([['a', 1], ['b', null]]),
];

describe('new types at the engine boundary', () => {
  it('writes JSON as Spark’s to_json: date text, exact bare decimals, base64 binary, maps as objects', () => {
    // PySpark 4.0.1: to_json(named_struct('d', 1.50BD, 'dt', date'2024-01-02', 'b', binary 'hi', 'm', map('a', 1)))
    // = {"d":1.50,"dt":"2024-01-02","b":"aGk=","m":{"a":1}}
    expect(stringifyExternalRow(row, schema))
      .toBe('{"d":"2024-01-02","amount":1.50,"big":12345678901234567890123456.0123456789,"bin":"aGk=","m":{"a":1,"b":null}}');
    expect(toExternalRow([null, null, null, null, null], schema)).toEqual({ d: null, amount: null, big: null, bin: null, m: null });
  });

  it('shows values as Spark’s console sink', () => {
    // PySpark 4.0.1 show(): |2024-01-02|1.50|[68 69]|{a -> 1, b -> NULL}|
    expect(schema.map((f, i) => showValue(row[i], f.type))).toEqual([
      '2024-01-02', '1.50', '12345678901234567890123456.0123456789', '[68 69]', '{a -> 1, b -> NULL}',
    ]);
  });

  it('reads them from JSON records (decimals exactly, beyond a double’s digits) and says why a value does not fit', () => {
    const decode = createJsonDecoder(schema);
    const ok = decode('{"d":"2024-01-02","amount":1.5,"big":12345678901234567890123456.0123456789,"bin":"aGk=","m":{"a":1,"b":null}}');
    expect(ok.ok).toBe(true);
    const decoded = (ok as { row: unknown[] }).row;
    expect(decoded[0]).toBe(row[0]);
    expect(String(decoded[1])).toBe('1.50');
    expect(String(decoded[2])).toBe('12345678901234567890123456.0123456789');
    expect([...(decoded[3] as Uint8Array)]).toEqual([0x68, 0x69]);
    expect([...(decoded[4] as Map<string, unknown>)]).toEqual([['a', 1], ['b', null]]);
    expect(decode('{"amount":"2.345"}')).toMatchObject({ ok: true, row: [null, new Decimal(235n, 2), null, null, null] });
    expect(decode('{"amount":1234.5}')).toEqual({ ok: false, reason: "field 'amount' is out of range for decimal(5,2): 1234.5 (at most 3 integral digits)" });
    expect(decode('{"d":"2024-02-30"}')).toEqual({ ok: false, reason: "field 'd' should be date but \"2024-02-30\" is not a valid 'yyyy-MM-dd' date" });
    expect(decode('{"m":{"a":"x"}}')).toEqual({ ok: false, reason: "field 'm.a' should be int but is a string: \"x\"" });
  });

  it('round-trips through the state store’s JSON and the repartition records', () => {
    const values = [row];
    const back = (decodeStateJson(encodeStateJson({ e: [['k', row]] }, values)) as { e: [string, unknown[]][] }).e[0]![1];
    expect(back).toEqual(row);
    expect(back[1]).toBeInstanceOf(Decimal);
    const record = { v: REPARTITION_RECORD_VERSION, kind: 'rows' as const, src: 's', batch: 0, part: 0, parts: 1, maxEventTimeMs: null, rows: [row] };
    const decoded = decodeRepartitionRecord(encodeRepartitionRecord(record));
    expect(decoded.rows[0]).toEqual(row);
    expect(decoded.rows[0]![4]).toBeInstanceOf(Map);
  });

  it('writes Parquet as Spark: INT32 DATE, DECIMAL on INT32/fixed bytes, BYTE_ARRAY, MAP; readable back', async () => {
    const elements = parquetSchemaOf(schema);
    expect(elements.find((e) => e.name === 'd')).toMatchObject({ type: 'INT32', converted_type: 'DATE' });
    expect(elements.find((e) => e.name === 'amount')).toMatchObject({ type: 'INT32', converted_type: 'DECIMAL', precision: 5, scale: 2 });
    expect(elements.find((e) => e.name === 'big')).toMatchObject({ type: 'FIXED_LEN_BYTE_ARRAY', type_length: 16, precision: 38, scale: 10 });
    expect(elements.find((e) => e.name === 'm')).toMatchObject({ converted_type: 'MAP' });
    expect(parquetRowProblem(row, schema, [0, 1, 2, 3, 4])).toBeNull();
    expect(parquetRowProblem([1.5, null, null, null, null], schema, [0, 1, 2, 3, 4])).toMatch(/^d: the value is not a date/);
    const file = encodeParquet([row, [null, null, null, null, null]], schema, [0, 1, 2, 3, 4]);
    const rows = await parquetReadObjects({ file: file.buffer.slice(file.byteOffset, file.byteOffset + file.byteLength) as ArrayBuffer, utf8: false });
    expect(rows[0]!.amount).toBe(1.5);
    expect([...(rows[0]!.bin as Uint8Array)]).toEqual([0x68, 0x69]);
    expect(rows[0]!.m).toEqual({ a: 1, b: null });
    // hyparquet reads a NULL map as undefined.
    expect({ ...rows[1], m: rows[1]!.m ?? null }).toEqual({ d: null, amount: null, big: null, bin: null, m: null });
    expect(rows[0]!.d).toEqual(new Date(Date.UTC(2024, 0, 2)));
    expect(parseDataType('map<string,int>')).toEqual(schema[4]!.type);
  });
});
