/**
 * Date value codecs: Sluice keeps a `date` as days since 1970-01-01 (a number, as Spark keeps an
 * int), proleptic Gregorian calendar, UTC. Casts, the JSON decoder, the sinks and the date/time
 * functions use these.
 */

export const MICROS_PER_DAY = 86_400_000_000;
const MS_PER_DAY = 86_400_000;

/** Days since the epoch of a civil date (month 1-12), for any year (Date.UTC maps 0-99 to 19xx). */
export function daysFromCivil(year: number, month: number, day: number): number {
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  return Math.floor(date.getTime() / MS_PER_DAY);
}

export interface CivilDate {
  readonly year: number;
  readonly month: number;
  readonly day: number;
}

export function civilFromDays(days: number): CivilDate {
  const date = new Date(days * MS_PER_DAY);
  return { year: date.getUTCFullYear(), month: date.getUTCMonth() + 1, day: date.getUTCDate() };
}

export function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

export function daysInMonth(year: number, month: number): number {
  if (month === 2) return isLeapYear(year) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** The day of a timestamp (floor: 1969-12-31 23:00 is day -1). */
export function daysOfMicros(micros: number): number {
  return Math.floor(micros / MICROS_PER_DAY);
}

/** Spark's date-to-string cast: `2024-01-02` (years beyond 9999 with a sign, as java.time). */
export function formatDate(days: number): string {
  const { year, month, day } = civilFromDays(days);
  return `${formatYear(year)}-${pad2(month)}-${pad2(day)}`;
}

export function formatYear(year: number): string {
  if (year >= 0 && year <= 9999) return String(year).padStart(4, '0');
  return `${year < 0 ? '-' : '+'}${String(Math.abs(year)).padStart(4, '0')}`;
}

const pad2 = (n: number): string => (n < 10 ? `0${n}` : String(n));

/**
 * Spark's string-to-date cast (DateTimeUtils.stringToDate): trimmed `yyyy`, `yyyy-[m]m`,
 * `yyyy-[m]m-[d]d`, then optionally a space or `T` and anything; an impossible date (February 30)
 * is malformed. Returns days since the epoch, or null.
 */
export function parseDate(text: string): number | null {
  const m = /^([+-]?\d{4,7})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T].*)?)?)?$/s.exec(text.trim());
  if (!m) return null;
  const year = Number(m[1]);
  const month = m[2] === undefined ? 1 : Number(m[2]);
  const day = m[3] === undefined ? 1 : Number(m[3]);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return null;
  return daysFromCivil(year, month, day);
}
