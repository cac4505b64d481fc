/**
 * createJsonDecoder reads common records with a scanner and falls back to JSON.parse otherwise:
 * whatever the input, its result (row or reason) must be the reference decoder's.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { toSchema } from '../../lib/api/session.js';
import { createJsonDecoder, createJsonParseDecoder, type DecodeResult, type JsonDecoderOptions } from '../../lib/sources/json-decoder.js';

/** Exact rendering: tells -0 from 0, keeps NaN / Infinity, and longs beyond 2^53 (bigints). */
function exact(result: DecodeResult): string {
  return JSON.stringify(result, (_, v: unknown) => (typeof v === 'bigint' ? `#long:${v}` : typeof v === 'number' && (Object.is(v, -0) || !Number.isFinite(v)) ? `#num:${Object.is(v, -0) ? '-0' : String(v)}` : v));
}

function expectSame(schema: string, options: JsonDecoderOptions, records: readonly string[]): void {
  const fields = toSchema(schema);
  const fast = createJsonDecoder(fields, options);
  const reference = createJsonParseDecoder(fields, options);
  const mismatches: string[] = [];
  for (const record of records) {
    const got = exact(fast(record));
    const want = exact(reference(record));
    if (got !== want && mismatches.length < 5) mismatches.push(`${JSON.stringify(record)}\n    scanner:   ${got}\n    JSON.parse: ${want}`);
  }
  expect(mismatches, mismatches.join('\n')).toEqual([]);
}

function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const SCHEMA = 's string, i int, l long, d double, b boolean, t timestamp, tags array<string>, u struct<id:long>';

describe('the record scanner agrees with JSON.parse', () => {
  afterEach(() => vi.restoreAllMocks());

  it('on hand-picked valid and invalid records', () => {
    const records = [
      '{}', ' { } ', '{"s":"a"}', '{"s":"a","s":"b"}', '{"s":"a","s":null}', '{"i":1,"i":null,"t":0,"t":null}', '{"i":1,"i":"x"}', '{"i":"x","i":1}', '{"s":null}',
      '{"s":"","i":0,"l":-0,"d":-0.0,"b":false,"t":0}', '{"d":1e3,"l":1E2,"i":2e0,"t":1.5e9}', '{"d":-1.25e-7}',
      '{"d":0.1,"l":9007199254740991,"i":-2147483648}', '{"l":9007199254740992}', '{"i":2147483648}', '{"i":1.5}',
      '{"d":123456789012345678}', '{"d":0.30000000000000004}', '{"d":1234567890.12345}', '{"d":1e400}', '{"d":-1e-400}',
      '{"s":12.50}', '{"s":true}', '{"s":1e21}', '{"b":"true"}', '{"b":1}', '{"t":"2024-05-01T14:40:00Z"}', '{"t":"2024-02-30"}',
      '{"t":"2024-05-01 14:40:00.123456789"}', '{"t":1714574400.123456}', '{"t":1e300}', '{"t":"x"}',
      '{"s":"a\\"b"}', '{"s":"tab\\tand\\u00e9"}', '{"s\\u0000":1}', '{"\\u0073":"escaped key"}', '{"s":"line\nbreak"}',
      '{"s":"x".repeat}', '{"x":{"y":[1,2,{"z":null}],"w":"\\\\"},"s":"after nested"}', '{"x":[1,2,]}', '{"x":{"a":1,}}',
      '{"tags":["a",null]}', '{"tags":[]}', '{"tags":"a"}', '{"u":{"id":1}}', '{"u":{"id":"1"}}', '{"u":null,"tags":null}',
      '{"s":"a",}', '{"s":"a"} x', '{"s":"a"}}', '{"s" "a"}', '{s:"a"}', "{'s':'a'}", '{"s":"a"', '{"s":', '{"s"', '{',
      '[1]', '"text"', '42', 'null', 'true', '', '   ', '\uFEFF{}', '{"s":01}', '{"d":1.}', '{"d":.5}', '{"d":+1}', '{"d":-}',
      '{"d":1e}', '{"d":1e+}', '{"d":NaN}', '{"d":Infinity}', '{"b":tru}', '{"b":nul}', '{"x":nulll}', '{"x":truex}',
      '{"__proto__":"p","s":"q"}', '{"constructor":1}', '{"s":"012345678901234567890"}', '{"s":"ünïcödé ✓ 😀"}',
      '{"x":"\\x"}', '{"x":"\\u12"}', '{"x":"\\u12G4"}', '\t{\r\n"s" :\t"a" ,\n"i": 3 }\n',
      `{"x":${'['.repeat(100)}${']'.repeat(100)},"s":"deep"}`, `{"x":${'['.repeat(40)}1${']'.repeat(40)}}`,
    ];
    expectSame(SCHEMA, {}, records);
    expectSame(SCHEMA, { onlyFields: ['s', 'T'] }, records);
    expectSame(SCHEMA, { numericTimestamps: 'millis' }, records);
    expectSame('s string, s string', {}, ['{"s":"dup"}', '{"s":1}']);
    expectSame('__proto__ string, constructor long', {}, ['{"__proto__":"p"}', '{"constructor":3}', '{}']);
  });

  it('on random records and random corruptions of them', () => {
    const random = seeded(7);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const numbers = ['0', '-0', '1', '-17', '3.25', '1e5', '-2.5E-3', '123456789012345', '1234567890123456', '0.1', '2147483647', '2147483648',
      '9007199254740993', '1714574400.05', '1e400', '0.000001', '99.99'];
    const strings = ['""', '"a"', '"user-123"', '"a much longer string value"', '"2024-05-01T14:40:00Z"', '"2024-05-01 14:40:00"', '"q\\"uote"', '"\\u00e9t\\u00e9"', '"NL"'];
    const scalars = [...numbers, ...strings, 'true', 'false', 'null'];
    const value = (depth: number): string => {
      const r = random();
      if (depth < 3 && r < 0.08) return `[${Array.from({ length: Math.floor(random() * 3) }, () => value(depth + 1)).join(',')}]`;
      if (depth < 3 && r < 0.14) return `{${Array.from({ length: Math.floor(random() * 3) }, () => `"${pick(['id', 'k', 'x'])}":${value(depth + 1)}`).join(',')}}`;
      return pick(scalars);
    };
    const keys = ['s', 'i', 'l', 'd', 'b', 't', 'tags', 'u', 'other', 'country', 'S'];
    const record = (): string => {
      const n = Math.floor(random() * 7);
      const sp = (): string => (random() < 0.1 ? pick([' ', '\n', '\t ', '\r\n']) : '');
      return `${sp()}{${Array.from({ length: n }, () => `${sp()}"${pick(keys)}"${sp()}:${sp()}${value(0)}${sp()}`).join(',')}}${sp()}`;
    };
    const corrupt = (text: string): string => {
      const at = Math.floor(random() * (text.length + 1));
      const r = random();
      if (r < 0.33) return text.slice(0, at) + text.slice(at + 1);
      if (r < 0.66) return text.slice(0, at) + pick(['"', ',', '}', '{', ']', ':', '-', '.', 'e', '0', ' ', '\\', 'x']) + text.slice(at);
      return text.slice(0, at);
    };
    const records: string[] = [];
    for (let k = 0; k < 3000; k++) {
      const r = record();
      records.push(r, corrupt(r), corrupt(corrupt(r)));
    }
    expectSame(SCHEMA, {}, records);
    expectSame(SCHEMA, { onlyFields: ['s', 'd', 't'] }, records);
    expectSame('s string, i long, d double, t timestamp', { numericTimestamps: 'micros' }, records);
  });

  it('on records that repeat a few layouts (the layout cache), with values of every kind and corruptions', () => {
    const random = seeded(11);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const values: Record<string, readonly string[]> = {
      s: ['"a"', '""', '"user-123"', '"exactly13char"', '"a much longer string value"', 'null', '12', 'true', '"q\\"x"', '"é ✓ 😀"'],
      i: ['0', '-0', '7', '-2147483648', '2147483647', '2147483648', '1.5', '1e2', 'null', '"3"'],
      l: ['0', '9007199254740991', '9007199254740992', '-12', '1E3', '2.5', 'null', 'false'],
      d: ['0', '-0', '0.1', '1e400', '-1e-400', '123456789012345678', '3.25', '-2.5E-3', 'null', '"1"'],
      b: ['true', 'false', 'null', '1', '"true"'],
      t: ['1714574400.05', '0', '-1', '1e300', '"2024-05-01T14:40:00Z"', '"2024-02-30"', '"x"', 'null', '1714574400123456'],
      other: ['1', '"x"', 'null', 'true', '[1]', '{"a":1}'],
    };
    const layouts = [['s', 'i', 'd', 't', 'other'], ['t', 's'], ['other', 'b', 'l', 's', 'd'], ['s', 'i', 'l', 'd', 'b', 't'], ['d']];
    const corrupt = (text: string): string => {
      const at = Math.floor(random() * (text.length + 1));
      return random() < 0.5 ? text.slice(0, at) + text.slice(at + 1) : text.slice(0, at) + pick(['"', ',', '}', ':', '-', '.', 'e', '0', ' ', '\\']) + text.slice(at);
    };
    const records: string[] = [];
    for (let k = 0; k < 6000; k++) {
      const layout = pick(layouts);
      const record = `{${layout.map((key) => `"${key}":${pick(values[key]!)}`).join(',')}}`;
      records.push(random() < 0.1 ? corrupt(record) : record);
    }
    expectSame(SCHEMA.replace('tags array<string>, u struct<id:long>', 'other string'), {}, records);
    expectSame(SCHEMA, { onlyFields: ['s', 'd', 't'] }, records);
    expectSame('s string, i long, d double, t timestamp', { numericTimestamps: 'millis' }, records);
  });

  it('reads plain records without JSON.parse (the fast path is really taken)', () => {
    const decode = createJsonDecoder(toSchema('user_id string, amount double, event_time timestamp, country string'), { onlyFields: ['user_id', 'amount', 'event_time'] });
    const parse = vi.spyOn(JSON, 'parse');
    const result = decode('{"user_id":"user-42", "amount":51.98,"event_time":1714521600.05,"country":"NL","device":"ios","n":null,"ok":true}');
    expect(result).toEqual({ ok: true, row: ['user-42', 51.98, 1714521600050000, null] });
    expect(parse).not.toHaveBeenCalled();
    // An escape, a nested value or a newline is left to JSON.parse.
    expect(decode('{"user_id":"user-\\u0034\\u0032"}')).toEqual({ ok: true, row: ['user-42', null, null, null] });
    expect(decode('{"user_id":"a","device":{"os":"ios","v":[17,4]}}')).toEqual({ ok: true, row: ['a', null, null, null] });
    expect(decode('{"user_id":"b",\n"amount":1}')).toEqual({ ok: true, row: ['b', 1, null, null] });
    expect(parse).toHaveBeenCalledTimes(3);
  });

  it('gives a fresh row of the schema width, NULL where nothing is read, for every width (known layouts included)', () => {
    for (let width = 1; width <= 10; width++) {
      const names = Array.from({ length: width }, (_, k) => `c${k}`);
      const schema = toSchema(names.map((n) => `${n} long`).join(', '));
      const decode = createJsonDecoder(schema, { onlyFields: [names[0]!] });
      const record = `{${names.map((n, k) => `"${n}":${k}`).join(',')}}`;
      const first = decode(record);
      const second = decode(record); // the layout learnt from the first
      const want = [0, ...Array.from({ length: width - 1 }, () => null)];
      expect(first).toEqual({ ok: true, row: want });
      expect(second).toEqual({ ok: true, row: want });
      if (first.ok && second.ok) {
        expect(second.row).not.toBe(first.row);
        expect(second.row).toHaveLength(width);
      }
    }
  });

  it('copies long strings out of the record (a slice would keep the whole record alive)', () => {
    const decode = createJsonDecoder(toSchema('id string'));
    const id = '0123456789abcdef-0123456789abcdef';
    const result = decode(`{"id":"${id}","padding":"${'x'.repeat(1000)}"}`);
    expect(result).toEqual({ ok: true, row: [id] });
  });
});
