/**
 * The source decoders read a TIMESTAMP field's text as Spark 4's JSON and CSV readers do (without
 * a timestampFormat, the forms of its string-to-timestamp cast). The expected micros are PySpark
 * 4.0.1's: `spark.read.schema("ts timestamp").json(...)` and `.csv(...)` over these strings, UTC
 * session time zone, printed with unix_micros (the same for from_json and from_csv). Where Spark
 * gives a value Sluice cannot hold or reproduce, Sluice's documented policy applies: the record is
 * dead-lettered with the reason (Spark's permissive reader gives NULL for what does not parse;
 * Sluice dead-letters that too, as every record it cannot decode).
 */
import { describe, expect, it } from 'vitest';
import { toSchema } from '../../lib/api/session.js';
import { createRecordDecoder } from '../../lib/sources/record-decoder.js';
import { createJsonDecoder, type DecodeResult } from '../../lib/sources/json-decoder.js';

/** Spark's micros for forms the old decoder parser refused (null there: a dead letter). */
const SPARK_READS: readonly (readonly [string, number])[] = [
  ['2024-5-1', 1714521600000000],
  ['2024', 1704067200000000],
  ['2024-05', 1714521600000000],
  ['2024-05-01T10', 1714557600000000],
  ['2024-05-01 1:2:3', 1714525323000000],
  [' 2024-05-01 ', 1714521600000000],
  ['2024-05-01 10:00:00 UTC', 1714557600000000],
  ['2024-05-01T10:00:00+01', 1714554000000000],
  ['2024-05-01T10:00:00+0130', 1714552200000000],
  ['2024-05-01 10:00:00 GMT+2', 1714550400000000],
  ['2024-05-01T10:00:00America/Los_Angeles', 1714582800000000],
  ['2024-05-01 10:00:00.1234567', 1714557600123456],
  ['2024-05-01T10:00:00.1234567891Z', 1714557600123456],
  ['2024-05-01 10:00:00 +01:00', 1714554000000000],
  // The forms the old parser took give what they gave.
  ['2024-05-01T10:00:00Z', 1714557600000000],
  ['2024-05-01T10:00:00.123456789Z', 1714557600123456],
];

/** Spark reads these on the current date (its run's): a replayed batch would differ, so a dead letter. */
const TIME_ONLY = ['10:00:00', 'T10:00', 'T10', '10:00'];
/** Spark holds these (64-bit micros); beyond ±2^53 µs Sluice cannot hold them exactly: a dead letter. */
const BEYOND_EXACT = ['9999-12-31T23:00:00Z', '0000-01-01', '0001-01-01T00:00:00Z', '1600-01-01T00:00:00Z', '+12345-01-01', '-0001-01-01'];
/** NULL in Spark's permissive readers (a corrupt record): a dead letter in Sluice. */
const MALFORMED = ['2024-02-30', '2024-13-01', 'x', '2024-05-01T', '2024-05-01T10:00:00+19:00', '2024-05-01T24:00:00Z', '1714557600'];

const json = createJsonDecoder(toSchema('k string, ts timestamp'));
const csv = createRecordDecoder({ schema: '', format: 'csv' }, toSchema('k string, ts timestamp'));
const decoders: readonly (readonly [string, (ts: string) => DecodeResult])[] = [
  ['JSON', (ts) => json(JSON.stringify({ k: 'a', ts }))],
  // Same field order every record: the decoder's learned-layout fast path reads the timestamp.
  ['JSON, learned layout', (ts) => { for (let i = 0; i < 3; i++) json(JSON.stringify({ k: 'a', ts: '2024-05-01T00:00:00Z' })); return json(JSON.stringify({ k: 'a', ts })); }],
  ['CSV', (ts) => csv(new TextEncoder().encode(`a,"${ts}"`))],
];

describe.each(decoders)('%s TIMESTAMP fields as Spark 4 reads them', (_name, decode) => {
  it.each(SPARK_READS)('%j is read as Spark reads it', (text, micros) => {
    expect(decode(text)).toEqual({ ok: true, row: ['a', micros] });
  });

  it.each(TIME_ONLY)('%j, a time without a date, is dead-lettered with why', (text) => {
    expect(decode(text)).toEqual({ ok: false, reason: expect.stringMatching(/is a time without a date.*current date.*replayed batch/) });
  });

  it.each(BEYOND_EXACT)('%j, outside the exactly held range, is dead-lettered with the range', (text) => {
    expect(decode(text)).toEqual({ ok: false, reason: expect.stringMatching(/outside the timestamp range held exactly \(1684-07-28T00:12:25.259009Z to 2255-06-05T23:47:34.740991Z\)/) });
  });

  it.each(MALFORMED)('%j, which Spark does not read, is dead-lettered', (text) => {
    expect(decode(text)).toEqual({ ok: false, reason: expect.stringMatching(/not a valid/) });
  });
});
