import { describe, expect, it } from 'vitest';
import { toSchema } from '../../lib/api/session.js';
import { createJsonDecoder, type DecodeResult } from '../../lib/sources/json-decoder.js';

const T0_MS = Date.parse('2024-05-01T14:40:00Z');
const T0 = T0_MS * 1000;

function ok(result: DecodeResult): unknown[] {
  if (!result.ok) throw new Error(`expected a row, got failure: ${result.reason}`);
  return result.row;
}

function reason(result: DecodeResult): string {
  if (result.ok) throw new Error(`expected a failure, got row ${JSON.stringify(result.row)}`);
  return result.reason;
}

describe('createJsonDecoder: valid records', () => {
  const decode = createJsonDecoder(toSchema('s string, i int, l long, d double, b boolean, t timestamp'));

  it('decodes every primitive type into the schema positions', () => {
    const row = ok(decode(JSON.stringify({ b: true, d: 2.5, i: 7, l: 9_000_000_000, s: 'north', t: '2024-05-01T14:40:00Z' })));
    expect(row).toEqual(['north', 7, 9_000_000_000, 2.5, true, T0]);
  });

  it('accepts the integer and boolean edge values', () => {
    expect(ok(decode('{"i": 2147483647, "b": false}'))).toEqual([null, 2147483647, null, null, false, null]);
    expect(ok(decode('{"i": -2147483648}'))[1]).toBe(-2147483648);
    expect(ok(decode(`{"l": ${Number.MAX_SAFE_INTEGER}}`))[2]).toBe(Number.MAX_SAFE_INTEGER);
    expect(ok(decode(`{"l": ${Number.MIN_SAFE_INTEGER}}`))[2]).toBe(Number.MIN_SAFE_INTEGER);
    expect(ok(decode('{"d": 3}'))[3]).toBe(3);
    expect(ok(decode('{"d": -1.5e-3}'))[3]).toBe(-0.0015);
  });

  it('reads a number or boolean in a string field as its text (Spark does the same)', () => {
    expect(ok(decode('{"s": 12}'))[0]).toBe('12');
    expect(ok(decode('{"s": true}'))[0]).toBe('true');
    expect(ok(decode('{"s": ""}'))[0]).toBe('');
  });

  it('turns missing fields and explicit nulls into NULL, and ignores unknown fields', () => {
    expect(ok(decode('{}'))).toEqual([null, null, null, null, null, null]);
    expect(ok(decode('{"s": null, "i": null, "t": null, "extra": [1, {"x": 2}]}'))).toEqual([null, null, null, null, null, null]);
  });

  it('does not mistake Object.prototype members for fields', () => {
    const proto = createJsonDecoder(toSchema('constructor string, toString string, hasOwnProperty int'));
    expect(ok(proto('{}'))).toEqual([null, null, null]);
    expect(ok(proto('{"toString": "x", "hasOwnProperty": 3}'))).toEqual([null, 'x', 3]);
  });

  it('parses timestamps written as ISO-8601 and as Spark strings', () => {
    const t = (text: string): unknown => ok(decode(JSON.stringify({ t: text })))[5];
    expect(t('2024-05-01T14:40:00Z')).toBe(T0);
    expect(t('2024-05-01T14:40:00.000Z')).toBe(T0);
    expect(t('2024-05-01 14:40:00')).toBe(T0);
    expect(t('2024-05-01T16:40:00+02:00')).toBe(T0);
    expect(t('2024-05-01T09:10:00-0530')).toBe(T0);
    expect(t('2024-05-01T14:40:00.123456Z')).toBe(T0 + 123_456);
    expect(t('2024-05-01T14:40:00.5Z')).toBe(T0 + 500_000);
    // Java's Instant.toString() writes nanoseconds; Spark keeps microseconds.
    expect(t('2024-05-01T14:40:00.123456789Z')).toBe(T0 + 123_456);
    expect(t('2024-05-01')).toBe(Date.parse('2024-05-01T00:00:00Z') * 1000);
    expect(t('2024-02-29T00:00:00Z')).toBe(Date.parse('2024-02-29T00:00:00Z') * 1000);
    expect(t('1700-01-01T00:00:00Z')).toBe(Date.parse('1700-01-01T00:00:00Z') * 1000);
    // Beyond ±2^53 µs a time is no longer exact: refused with the range, not rounded.
    expect(decode(JSON.stringify({ t: '0050-01-01T00:00:00Z' }))).toEqual({ ok: false, reason: expect.stringMatching(/outside the timestamp range held exactly/) });
    expect(t('1969-12-31T23:59:59.5Z')).toBe(-500_000);
  });

  it('reads numeric timestamps as seconds by default, or millis / micros when asked', () => {
    const schema = toSchema('t timestamp');
    expect(ok(createJsonDecoder(schema)(`{"t": ${T0_MS / 1000}}`))[0]).toBe(T0);
    expect(ok(createJsonDecoder(schema)(`{"t": ${T0_MS / 1000 + 0.25}}`))[0]).toBe(T0 + 250_000);
    expect(ok(createJsonDecoder(schema, { numericTimestamps: 'seconds' })(`{"t": ${T0_MS / 1000}}`))[0]).toBe(T0);
    expect(ok(createJsonDecoder(schema, { numericTimestamps: 'millis' })(`{"t": ${T0_MS + 7}}`))[0]).toBe(T0 + 7000);
    expect(ok(createJsonDecoder(schema, { numericTimestamps: 'micros' })(`{"t": ${T0 + 3}}`))[0]).toBe(T0 + 3);
    // Strings are ISO whatever the numeric unit is.
    expect(ok(createJsonDecoder(schema, { numericTimestamps: 'millis' })('{"t": "2024-05-01T14:40:00Z"}'))[0]).toBe(T0);
  });

  it('decodes arrays, including NULL elements and empty arrays', () => {
    const d = createJsonDecoder(toSchema('tags array<string>, ns array<long>, ts array<timestamp>'));
    expect(ok(d('{"tags": ["a", null, "b"], "ns": [], "ts": ["2024-05-01T14:40:00Z", 0]}'))).toEqual([['a', null, 'b'], [], [T0, 0]]);
    const nested = createJsonDecoder(toSchema('m array<array<int>>'));
    expect(ok(nested('{"m": [[1, 2], null, []]}'))).toEqual([[[1, 2], null, []]]);
  });

  it('decodes structs, with missing and NULL members as NULL and unknown members ignored', () => {
    const d = createJsonDecoder(toSchema('user struct<id:long,name:string,seen:timestamp>, pts array<struct<x:double,y:double>>'));
    expect(ok(d('{"user": {"id": 1, "name": "ann", "seen": "2024-05-01T14:40:00Z", "other": 1}, "pts": [{"x": 1, "y": 2.5}, {"x": 3}, null]}'))).toEqual([
      { id: 1, name: 'ann', seen: T0 },
      [{ x: 1, y: 2.5 }, { x: 3, y: null }, null],
    ]);
    expect(ok(d('{"user": {}}'))).toEqual([{ id: null, name: null, seen: null }, null]);
    expect(ok(d('{"user": null}'))).toEqual([null, null]);
  });

  it('only decodes the requested fields when onlyFields is given (case-insensitively)', () => {
    const d = createJsonDecoder(toSchema('a string, b int, c double'), { onlyFields: ['A', 'c'] });
    expect(ok(d('{"a": "x", "b": 1, "c": 2.5}'))).toEqual(['x', null, 2.5]);
    // An unused field of the wrong type does not fail the record.
    expect(ok(d('{"a": "x", "b": "not a number"}'))).toEqual(['x', null, null]);
  });

  it('returns a fresh row per record', () => {
    const a = ok(decode('{"s": "a"}'));
    const b = ok(decode('{"s": "b"}'));
    expect(a).not.toBe(b);
    expect(a[0]).toBe('a');
  });
});

describe('createJsonDecoder: failing records carry the reason', () => {
  const decode = createJsonDecoder(toSchema('s string, i int, l long, d double, b boolean, t timestamp'));

  it('reports malformed JSON', () => {
    expect(reason(decode('{"s": "a"'))).toMatch(/^malformed JSON/);
    expect(reason(decode(''))).toMatch(/^malformed JSON/);
    expect(reason(decode("{'s': 'a'}"))).toMatch(/^malformed JSON/);
  });

  it('reports a record that is not an object, saying what it is', () => {
    expect(reason(decode('[1, 2]'))).toMatch(/not a JSON object.*array/);
    expect(reason(decode('42'))).toMatch(/not a JSON object.*number/);
    expect(reason(decode('"text"'))).toMatch(/not a JSON object.*string/);
    expect(reason(decode('null'))).toMatch(/not a JSON object.*null/);
  });

  it('reports a field of the wrong type with the field, the expected type and the value', () => {
    const r = reason(decode('{"i": "12"}'));
    expect(r).toContain("'i'");
    expect(r).toContain('int');
    expect(r).toContain('"12"');
    expect(reason(decode('{"b": "true"}'))).toMatch(/'b'.*boolean.*"true"/);
    expect(reason(decode('{"d": "1.5"}'))).toMatch(/'d'.*double/);
    expect(reason(decode('{"s": {"x": 1}}'))).toMatch(/'s'.*string/);
    expect(reason(decode('{"s": [1]}'))).toMatch(/'s'.*string/);
    expect(reason(decode('{"t": true}'))).toMatch(/'t'.*timestamp/);
  });

  it('refuses a fractional number in an integer field', () => {
    expect(reason(decode('{"i": 1.5}'))).toMatch(/'i'.*int.*1\.5/);
    expect(reason(decode('{"l": 2.25}'))).toMatch(/'l'.*long.*2\.25/);
  });

  it('refuses integers that overflow int or long; keeps a long beyond 2^53 exactly', () => {
    expect(reason(decode('{"i": 2147483648}'))).toMatch(/'i'.*out of range.*int/);
    expect(reason(decode('{"i": -2147483649}'))).toMatch(/'i'.*out of range.*int/);
    expect(reason(decode('{"i": 1e20}'))).toMatch(/'i'.*out of range/);
    expect(ok(decode('{"l": 9007199254740993}'))[2]).toBe(9007199254740993n);
    expect(ok(decode('{"s": "x\\n", "l": -9223372036854775808}'))[2]).toBe(-9223372036854775808n);
    expect(ok(decode('{"l": 9007199254740991}'))[2]).toBe(9007199254740991);
    expect(reason(decode('{"l": 9223372036854775808}'))).toMatch(/'l'.*out of range for long.*9223372036854775808/);
    expect(reason(decode('{"l": 1e300}'))).toMatch(/'l'.*out of range/);
    expect(reason(decode('{"l": 1e17}'))).toMatch(/'l'.*not exact/);
  });

  it('refuses a double beyond its range (1e400 is not Infinity) and reads 16+ digit numbers as JSON.parse would', () => {
    expect(reason(decode('{"d": 1e400}'))).toMatch(/'d'.*out of range for double: Infinity/);
    expect(reason(decode('{"d": -1e400}'))).toMatch(/'d'.*out of range for double/);
    expect(ok(decode('{"d": 12345678901234567890}'))[3]).toBe(12345678901234567890);
    expect(ok(decode('{"s": 12345678901234567890}'))[0]).toBe('12345678901234567890');
    expect(ok(decode('{"s": "a 12345678901234567890 \\" 99999999999999999999"}'))[0]).toBe('a 12345678901234567890 " 99999999999999999999');
  });

  it('reports an unparseable or impossible timestamp string', () => {
    expect(reason(decode('{"t": "yesterday"}'))).toMatch(/'t'.*timestamp.*"yesterday"/);
    expect(reason(decode('{"t": "2024-13-01T00:00:00Z"}'))).toMatch(/'t'.*timestamp/);
    expect(reason(decode('{"t": "2024-02-30T00:00:00Z"}'))).toMatch(/'t'.*timestamp/);
    expect(reason(decode('{"t": "2023-02-29"}'))).toMatch(/'t'.*timestamp/);
    expect(reason(decode('{"t": "2024-05-01T24:00:00Z"}'))).toMatch(/'t'.*timestamp/);
    expect(reason(decode('{"t": "2024-05-01T12:60:00Z"}'))).toMatch(/'t'.*timestamp/);
    expect(reason(decode('{"t": "2024-05-01T12:00:00+25:00"}'))).toMatch(/'t'.*timestamp/);
  });

  it('refuses a numeric timestamp outside the representable range', () => {
    expect(reason(decode('{"t": 1e300}'))).toMatch(/'t'.*out of range for timestamp/);
  });

  it('names the path of a bad value inside an array or struct', () => {
    const d = createJsonDecoder(toSchema('ns array<int>, user struct<id:long,tags:array<string>>'));
    expect(reason(d('{"ns": [1, "two", 3]}'))).toMatch(/'ns\[1\]'.*int.*"two"/);
    expect(reason(d('{"ns": {"0": 1}}'))).toMatch(/'ns'.*array/);
    expect(reason(d('{"user": {"id": "x"}}'))).toMatch(/'user\.id'.*long.*"x"/);
    expect(reason(d('{"user": {"id": 1, "tags": ["a", {}]}}'))).toMatch(/'user\.tags\[1\]'.*string/);
    expect(reason(d('{"user": [1]}'))).toMatch(/'user'.*struct/);
    expect(reason(d('{"ns": [2147483648]}'))).toMatch(/'ns\[0\]'.*out of range/);
  });

  it('truncates a long offending value in the reason', () => {
    const r = reason(decode(JSON.stringify({ i: 'x'.repeat(500) })));
    expect(r.length).toBeLessThan(200);
  });

  it('does not let a failure leak into the next record', () => {
    expect(decode('{"i": "bad"}').ok).toBe(false);
    expect(ok(decode('{"i": 1}'))[1]).toBe(1);
  });
});
