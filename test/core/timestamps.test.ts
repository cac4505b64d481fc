import { describe, expect, it } from 'vitest';
import { formatProgressTimestamp, formatTimestamp, parseTimestamp, parseTimestampUnbounded, timestampToIso } from '../../lib/core/timestamps.js';

describe('timestamp codecs', () => {
  const micros = Date.UTC(2024, 4, 1, 14, 0, 0) * 1000;

  it('formats as Spark casts to string and as sinks write JSON, with the microseconds kept', () => {
    expect(formatTimestamp(micros)).toBe('2024-05-01 14:00:00');
    expect(formatTimestamp(micros + 1)).toBe('2024-05-01 14:00:00.000001');
    expect(formatTimestamp(micros + 120_000)).toBe('2024-05-01 14:00:00.12');
    expect(timestampToIso(micros)).toBe('2024-05-01T14:00:00Z');
    expect(timestampToIso(micros + 1)).toBe('2024-05-01T14:00:00.000001Z');
    // Before the epoch the fraction still counts up from the whole second below.
    expect(formatTimestamp(-1)).toBe('1969-12-31 23:59:59.999999');
    expect(timestampToIso(-1)).toBe('1969-12-31T23:59:59.999999Z');
    expect(formatProgressTimestamp(15_000)).toBe('1970-01-01T00:00:15.000Z');
  });

  it('formats progress times exactly as toISOString, days cached or not, and falls back outside its range', () => {
    let seed = 7;
    const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const samples: number[] = [0, 1, 999, 86_399_999, 86_400_000, 951_782_400_000 /* 2000-02-29 */, 253_402_300_799_999];
    // Runs within a day (the cached prefix), jumps across days and years, and the edges of the fast path.
    let ms = Date.UTC(2024, 4, 1);
    for (let i = 0; i < 5_000; i++) samples.push((ms += Math.floor(random() * 5_000)));
    for (let i = 0; i < 5_000; i++) samples.push(Math.floor(random() * 253_402_300_800_000));
    // Days taking turns, as a batch's event times and its wall-clock start do: fewer and more than the days kept.
    for (let i = 0; i < 2_000; i++) samples.push(Date.UTC(2024, 4, 1 + (i % (i < 1_000 ? 3 : 7))) + Math.floor(random() * 86_400_000));
    for (const m of samples) expect(formatProgressTimestamp(m)).toBe(new Date(m).toISOString());
    for (const m of [-1, -86_400_001, 253_402_300_800_000, 8.64e15, 1.5, 15_000.999]) {
      expect(formatProgressTimestamp(m)).toBe(new Date(m).toISOString());
    }
    expect(formatProgressTimestamp(253_402_300_800_000)).toBe('+010000-01-01T00:00:00.000Z');
    expect(() => formatProgressTimestamp(Number.NaN)).toThrow(RangeError);
  });

  it('parses what it formats, ISO-8601 with offsets, and gives NULL for impossible dates', () => {
    for (const m of [micros, micros + 1, micros + 120_000, -1]) {
      expect(parseTimestamp(formatTimestamp(m))).toBe(m);
      expect(parseTimestamp(timestampToIso(m))).toBe(m);
    }
    expect(parseTimestamp('2024-05-01T16:00:00+02:00')).toBe(micros);
    expect(parseTimestamp('2024-02-30 00:00:00')).toBeNull();
    expect(parseTimestamp('2024-05-01 24:00:00')).toBeNull();
    expect(parseTimestamp('not a time')).toBeNull();
  });

  it('gives NULL outside the range held exactly (±2^53 µs), instead of a rounded time printed as year +010000', () => {
    expect(parseTimestamp('9999-12-31T23:00:00Z')).toBeNull();
    expect(parseTimestamp('0000-01-01')).toBeNull();
    expect(parseTimestamp('2255-06-05T23:47:34.740991Z')).toBe(Number.MAX_SAFE_INTEGER);
    expect(parseTimestamp('2255-06-05T23:47:34.740992Z')).toBeNull();
    expect(parseTimestamp('1684-07-28T00:12:25.259009Z')).toBe(-Number.MAX_SAFE_INTEGER);
    expect(timestampToIso(parseTimestamp('2255-06-05T23:47:34.740991Z')!)).toBe('2255-06-05T23:47:34.740991Z');
  });

  it('reads `YYYY-MM-DD(T| )HH:MM:SS[.f][Z]` on its fast path exactly as the general parser does, days changing or not', () => {
    // A seeded generator: canonical strings, near misses (fields out of range, other separators,
    // 0-10 fraction digits, years below 100, leap days, whitespace), each checked against the general parser.
    let seed = 7;
    const next = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % n;
    };
    const pad = (v: number, w: number): string => String(v).padStart(w, '0');
    const pick = <T,>(xs: readonly T[]): T => xs[next(xs.length)]!;
    let fastPathShaped = 0;
    for (let i = 0; i < 20_000; i++) {
      const year = pick([1969, 1970, 2000, 2024, 2100, 9999, 42, 0, 1900]);
      const text = `${pad(year, 4)}-${pad(next(14), 2)}-${pad(next(33), 2)}${pick(['T', 'T', 'T', ' ', 't'])}`
        + `${pad(next(26), 2)}:${pad(next(62), 2)}:${pad(next(62), 2)}`
        + `${pick(['', '', '.', `.${pad(next(1000), 3)}`, `.${pad(next(1_000_000), 6)}`, `.${pad(next(1_000_000_000), 9)}`, '.1234567890'])}`
        + `${pick(['Z', 'Z', 'Z', '', '+02:00', 'Z '])}`;
      const general = parseTimestampUnbounded(text);
      const expected = general !== null && Number.isSafeInteger(general) ? general : null;
      if (/^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z?$/.test(text)) fastPathShaped++;
      expect([text, parseTimestamp(text)]).toEqual([text, expected]);
    }
    expect(fastPathShaped).toBeGreaterThan(5_000);
  });
});
