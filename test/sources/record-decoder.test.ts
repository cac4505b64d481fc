import { describe, expect, it } from 'vitest';
import { createRecordDecoder, splitCsvLine } from '../../lib/sources/record-decoder.js';
import { toSchema } from '../../lib/api/session.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const schema = toSchema('store_id string, amount long, price double, ok boolean, ts timestamp');

describe('record decoder', () => {
  it('reads JSON objects by field name, numbers in timestamp fields as epoch seconds by default', () => {
    const decode = createRecordDecoder({ schema: '' }, schema);
    expect(decode(bytes('{"store_id":"n","amount":3,"price":1.5,"ok":true,"ts":1714572000}'))).toEqual({
      ok: true, row: ['n', 3, 1.5, true, parseTimestamp('2024-05-01 14:00:00')],
    });
    const millis = createRecordDecoder({ schema: '', numericTimestamps: 'millis' }, schema);
    expect(millis(bytes('{"ts":1714572000000}'))).toEqual({ ok: true, row: [null, null, null, null, parseTimestamp('2024-05-01 14:00:00')] });
  });

  it('reads CSV lines in schema order, with quotes, empty fields as NULL', () => {
    const decode = createRecordDecoder({ schema: '', format: 'csv' }, schema);
    expect(decode(bytes('"north, east",7,2.25,false,2024-05-01T14:00:00Z\n'))).toEqual({
      ok: true, row: ['north, east', 7, 2.25, false, parseTimestamp('2024-05-01 14:00:00')],
    });
    expect(decode(bytes('n,,,,'))).toEqual({ ok: true, row: ['n', null, null, null, null] });
    const semicolon = createRecordDecoder({ schema: '', format: 'csv', csvDelimiter: ';' }, schema);
    expect(semicolon(bytes('a;1;2;true;2024-05-01 14:00:00'))).toMatchObject({ ok: true });
  });

  it('gives a reason for every CSV record it cannot read', () => {
    const decode = createRecordDecoder({ schema: '', format: 'csv' }, schema);
    expect(decode(bytes('n,1,2'))).toEqual({ ok: false, reason: expect.stringMatching(/expected 5 CSV fields .* found 3/) });
    expect(decode(bytes('n,one,2,true,2024-05-01'))).toEqual({ ok: false, reason: expect.stringMatching(/amount: 'one' is not a valid long/) });
    expect(decode(bytes('n,1,2,yes,2024-05-01'))).toEqual({ ok: false, reason: expect.stringMatching(/ok: 'yes'/) });
    expect(decode(bytes('n,1,2,true,yesterday'))).toEqual({ ok: false, reason: expect.stringMatching(/ts: 'yesterday' is not a valid timestamp/) });
    expect(decode(bytes('"unclosed,1,2,true,2024-05-01'))).toEqual({ ok: false, reason: 'malformed CSV: unbalanced quotes' });
  });

  it('raw records are one string column; invalid UTF-8 is refused in every format', () => {
    const raw = createRecordDecoder({ schema: '', format: 'raw' }, [{ name: 'value', type: 'string' }]);
    expect(raw(bytes('hello, world'))).toEqual({ ok: true, row: ['hello, world'] });
    const invalid = new Uint8Array([0xff, 0xfe, 0x41]);
    expect(raw(invalid)).toEqual({ ok: false, reason: 'the record is not valid UTF-8' });
    expect(createRecordDecoder({ schema: '' }, schema)(invalid)).toEqual({ ok: false, reason: 'the record is not valid UTF-8' });
  });

  it('decodes and checks only the given columns (case-insensitively), JSON and CSV; the others are NULL', () => {
    const json = createRecordDecoder({ schema: '' }, schema, { columns: ['STORE_ID', 'price'] });
    expect(json(bytes('{"store_id":"n","amount":"not-a-number","price":1.5,"ts":"yesterday"}'))).toEqual({ ok: true, row: ['n', null, 1.5, null, null] });
    expect(json(bytes('{"store_id":"n","price":"x"}'))).toEqual({ ok: false, reason: expect.stringMatching(/price/) });
    expect(json(bytes('not json'))).toEqual({ ok: false, reason: expect.stringMatching(/malformed JSON/) });
    const csv = createRecordDecoder({ schema: '', format: 'csv' }, schema, { columns: ['amount'] });
    expect(csv(bytes('n,7,cheap,maybe,yesterday'))).toEqual({ ok: true, row: [null, 7, null, null, null] });
    expect(csv(bytes('n,seven,1,true,2024-05-01'))).toEqual({ ok: false, reason: expect.stringMatching(/amount: 'seven'/) });
    // The line's shape is still checked: its fields are positional.
    expect(csv(bytes('n,7'))).toEqual({ ok: false, reason: expect.stringMatching(/expected 5 CSV fields/) });
  });

  it('forColumns gives the same decoder pruned; the full decoder still checks every column', () => {
    const all = createRecordDecoder({ schema: '', numericTimestamps: 'millis' }, schema);
    const record = bytes('{"amount":3,"price":"x","ts":1714572000000}');
    expect(all(record)).toEqual({ ok: false, reason: expect.stringMatching(/price/) });
    expect(all.forColumns!(['amount', 'ts'])(record)).toEqual({ ok: true, row: [null, 3, null, null, parseTimestamp('2024-05-01 14:00:00')] });
  });

  it('forColumns builds one pruned decoder per column set and hands it out again (a container decodes with learned layouts)', () => {
    const all = createRecordDecoder({ schema: '' }, schema);
    const pruned = all.forColumns!(['amount', 'ts']);
    expect(all.forColumns!(['TS', 'amount'])).toBe(pruned);
    expect(all.forColumns!(['amount'])).not.toBe(pruned);
  });

  it('splits RFC 4180 lines', () => {
    expect(splitCsvLine('a,"b ""quoted""",c', ',')).toEqual(['a', 'b "quoted"', 'c']);
    expect(splitCsvLine('a,', ',')).toEqual(['a', '']);
    expect(splitCsvLine('"a"x,b', ',')).toBeNull();
  });

  it('refuses CSV for nested types at definition time', () => {
    expect(() => createRecordDecoder({ schema: '', format: 'csv' }, toSchema('tags array<string>'))).toThrow(/CSV records cannot hold array columns/);
  });
});
