/**
 * Timestamp value codecs: Sluice keeps a timestamp as microseconds since the epoch (UTC); these turn
 * it into and out of text. Expression evaluation (casts), the record decoders of the sources, the
 * sinks' JSON, the console sink and progress reports all use them, so they live in the lowest layer.
 */
import { castStringToTimestamp } from './timestamp-cast.js';

/** `2023-01-01T01:00:10` (seconds precision) and the fraction digits, `''` for a whole second. */
function splitMicros(micros: number): { readonly seconds: string; readonly fraction: string } {
  const iso = new Date(Math.floor(micros / 1000)).toISOString();
  const fraction = ((micros % 1_000_000) + 1_000_000) % 1_000_000;
  return { seconds: iso.slice(0, 19), fraction: fraction === 0 ? '' : `.${String(fraction).padStart(6, '0').replace(/0+$/, '')}` };
}

/** Spark's timestamp-to-string cast in UTC: `2023-01-01 01:00:10` (+ fraction when non-zero). */
export function formatTimestamp(micros: number): string {
  const { seconds, fraction } = splitMicros(micros);
  return `${seconds.slice(0, 10)} ${seconds.slice(11)}${fraction}`;
}

/** ISO-8601 UTC with the microseconds Spark keeps (`2024-05-01T14:00:00.000001Z`), as sinks write JSON. */
export function timestampToIso(micros: number): string {
  const { seconds, fraction } = splitMicros(micros);
  return `${seconds}${fraction}Z`;
}

/**
 * Timestamps are microseconds in a double: exact up to ±2^53 µs, from 1684-07-28T00:12:25.259009Z
 * to 2255-06-05T23:47:34.740991Z. Beyond, a value would be rounded (and `9999-12-31` printed as
 * `+010000-01-01`), so decoders refuse it and casts give NULL.
 */
export const MAX_TIMESTAMP_MICROS = Number.MAX_SAFE_INTEGER;
export const TIMESTAMP_RANGE_TEXT = '1684-07-28T00:12:25.259009Z to 2255-06-05T23:47:34.740991Z';

export function isTimestampInRange(micros: number): boolean {
  return Number.isSafeInteger(micros);
}

/**
 * Parses a timestamp as Spark 4 reads a string into a TIMESTAMP (its cast, and its JSON and CSV
 * readers without a timestampFormat, which take the same forms: lib/core/timestamp-cast.ts), in
 * UTC unless the text names a zone. Fractions beyond microseconds are truncated; impossible dates
 * and times (month 13, February 30, 24:00, an offset beyond ±18:00) give NULL, and so do a time
 * outside the exactly held range (`TIMESTAMP_RANGE_TEXT`) and a time without a date (Spark takes
 * the current date, which a re-run batch would not reproduce; see `isTimeWithoutDate`).
 */
export function parseTimestamp(text: string): number | null {
  const micros = parseCanonicalUtc(text) ?? parseTimestampUnbounded(text);
  return micros !== null && Number.isSafeInteger(micros) ? micros : null;
}

/** The last day the fast path met (as yyyymmdd) and its midnight in ms: a stream's events share a few days. */
let cachedDayKey = -1;
let cachedDayMs = 0;

const digitAt = (text: string, i: number): number => {
  const d = text.charCodeAt(i) - 0x30;
  return d >= 0 && d <= 9 ? d : -1;
};

/**
 * The forms nearly every event carries, `YYYY-MM-DD(T| )HH:MM:SS[.fraction][Z]` (no zone: UTC),
 * read from their characters with the day's midnight cached: the same micros as
 * parseTimestampUnbounded, at a fraction of its cost on the decoders' hot path. Undefined for any
 * other form (the general parser decides); null for these forms with a field out of range, as the
 * general parser gives.
 */
function parseCanonicalUtc(text: string): number | null | undefined {
  const n = text.length;
  const separator = text.charCodeAt(10);
  if (n < 19 || n > 30 || text.charCodeAt(4) !== 0x2d || text.charCodeAt(7) !== 0x2d
    || (separator !== 0x54 /* T */ && separator !== 0x20) || text.charCodeAt(13) !== 0x3a || text.charCodeAt(16) !== 0x3a) return undefined;
  const end = text.charCodeAt(n - 1) === 0x5a /* Z */ ? n - 1 : n;
  let dayKey = 0;
  for (let k = 0; k < DATE_DIGITS.length; k++) {
    const d = digitAt(text, DATE_DIGITS[k]!);
    if (d < 0) return undefined;
    dayKey = dayKey * 10 + d;
  }
  const h1 = digitAt(text, 11), h2 = digitAt(text, 12), m1 = digitAt(text, 14), m2 = digitAt(text, 15), s1 = digitAt(text, 17), s2 = digitAt(text, 18);
  if ((h1 | h2 | m1 | m2 | s1 | s2) < 0) return undefined;
  let fractionMicros = 0;
  if (end > 19) {
    // `.` and at least one digit; digits past the sixth are cut, as the general parser does.
    if (text.charCodeAt(19) !== 0x2e || end === 20) return undefined;
    let scale = 100_000;
    for (let i = 20; i < end; i++) {
      const d = digitAt(text, i);
      if (d < 0) return undefined;
      fractionMicros += d * scale;
      scale = Math.floor(scale / 10);
    }
  }
  if (dayKey !== cachedDayKey) {
    const y = Math.floor(dayKey / 10_000);
    const mo = Math.floor(dayKey / 100) % 100;
    const d = dayKey % 100;
    if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo)) return null;
    let ms = Date.UTC(y, mo - 1, d);
    // Date.UTC maps years 0-99 to 1900-1999.
    if (y < 100) ms = new Date(ms).setUTCFullYear(y);
    cachedDayKey = dayKey;
    cachedDayMs = ms;
  }
  const h = h1 * 10 + h2, mi = m1 * 10 + m2, s = s1 * 10 + s2;
  if (h > 23 || mi > 59 || s > 59) return null;
  return (cachedDayMs + ((h * 60 + mi) * 60 + s) * 1000) * 1000 + fractionMicros;
}

const DATE_DIGITS = [0, 1, 2, 3, 5, 6, 8, 9] as const;

/** A valid time's micros even outside the exactly held range (for the decoders' reasons). */
export function parseTimestampUnbounded(text: string): number | null {
  const parsed = castStringToTimestamp(text);
  return parsed.kind === 'micros' ? parsed.micros : null;
}

/** Why a decoder dead-letters a time with no date instead of reading it as Spark does. */
export const TIME_WITHOUT_DATE_TEXT = 'Spark reads it on the current date, which a replayed batch would not reproduce: write the date';

/** A time with no date (`10:00:00`, `T10:00`): Spark reads it on the current date. */
export function isTimeWithoutDate(text: string): boolean {
  return castStringToTimestamp(text).kind === 'time-only';
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

const DAY_MS = 86_400_000;
/** 10000-01-01T00:00:00Z: from there on toISOString writes a signed six-digit year. */
const YEAR_10000_MS = 253_402_300_800_000;
const TWO_DIGITS = Array.from({ length: 60 }, (_, n) => String(n).padStart(2, '0'));
const THREE_DIGITS = Array.from({ length: 1000 }, (_, n) => String(n).padStart(3, '0'));
/** The last few days formatted (a batch's event times and its wall-clock start are days apart). */
const DAYS_KEPT = 4;
const formattedDays: number[] = new Array<number>(DAYS_KEPT).fill(NaN);
const formattedDayPrefixes: string[] = new Array<string>(DAYS_KEPT).fill('');
let nextDaySlot = 0;

function dayPrefix(day: number): string {
  for (let i = 0; i < DAYS_KEPT; i++) if (formattedDays[i] === day) return formattedDayPrefixes[i]!;
  const prefix = new Date(day * DAY_MS).toISOString().slice(0, 11);
  formattedDays[nextDaySlot] = day;
  formattedDayPrefixes[nextDaySlot] = prefix;
  nextDaySlot = (nextDaySlot + 1) % DAYS_KEPT;
  return prefix;
}

/**
 * Spark's progress format for event-time stats: `1970-01-01T00:00:15.000Z`, as toISOString writes
 * it. Every batch formats several of these, of a few days (its event times', its start's): each
 * day's `YYYY-MM-DDT` is kept and the time of day written from its digits. Before 1970, from year 10000 on, or a fraction of
 * a millisecond: toISOString itself.
 */
export function formatProgressTimestamp(ms: number): string {
  if (!(ms >= 0 && ms < YEAR_10000_MS) || !Number.isInteger(ms)) return new Date(ms).toISOString();
  const day = Math.floor(ms / DAY_MS);
  const prefix = dayPrefix(day);
  let rest = ms - day * DAY_MS;
  const millis = rest % 1000;
  rest = (rest - millis) / 1000;
  const seconds = rest % 60;
  rest = (rest - seconds) / 60;
  const minutes = rest % 60;
  const hours = (rest - minutes) / 60;
  return `${prefix}${TWO_DIGITS[hours]!}:${TWO_DIGITS[minutes]!}:${TWO_DIGITS[seconds]!}.${THREE_DIGITS[millis]!}Z`;
}
