/**
 * Spark's string-to-timestamp cast (SparkDateTimeUtils.stringToTimestamp), in the UTC session time
 * zone: trimmed `[+-]yyyy[-[m]m[-[d]d]]`, then optionally a space or `T` and
 * `[h]h[:[m]m[:[s]s[.fraction]]]`, then optionally a zone: `Z`, `UTC`/`GMT`/`UT` (with or without
 * an offset), `+h`, `+hh:mm`, `+hhmm`, or a region such as `America/Los_Angeles`, with or without a
 * space before it. Fraction digits beyond microseconds are truncated. Checked against PySpark 4.0.1
 * (test/spark-diff/cases/types.json). Under ANSI, what does not parse raises CAST_INVALID_INPUT.
 */

export type TimestampCast =
  | { readonly kind: 'micros'; readonly micros: number }
  /** Not a timestamp: CAST_INVALID_INPUT under ANSI (NULL for try_cast). */
  | { readonly kind: 'malformed' }
  /**
   * A time without a date (`T10:00`, `10:00:00`): Spark takes the current date, which would make a
   * re-run batch differ from its first run; Sluice gives NULL (documented divergence).
   */
  | { readonly kind: 'time-only' };

const MALFORMED: TimestampCast = { kind: 'malformed' };

const DATE_TIME = /^([+-]?\d{4,6})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T](\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.(\d*))?)?)?(.*))?)?)?$/s;
const TIME_ONLY = /^T?\d{1,2}:\d{1,2}|^T\d{1,2}$/;

export function castStringToTimestamp(input: string): TimestampCast {
  // Spark trims whitespace and ISO control characters at both ends (nothing to trim when both
  // ends are printable ASCII, as in nearly every record: the source decoders' path).
  const text = isPrintableAscii(input.charCodeAt(0)) && isPrintableAscii(input.charCodeAt(input.length - 1))
    ? input : input.replace(/^[\s\x00-\x1f]+|[\s\x00-\x1f]+$/g, '');
  const m = DATE_TIME.exec(text);
  if (!m) return TIME_ONLY.test(text) ? { kind: 'time-only' } : MALFORMED;
  // Groups by index, absent ones defaulted: no destructuring or array on the decoders' path.
  const year = Number(m[1]), month = numberOr(m[2], 1), day = numberOr(m[3], 1);
  const hour = numberOr(m[4], 0), minute = numberOr(m[5], 0), second = numberOr(m[6], 0);
  const fraction = m[7] ?? '', rest = m[8] ?? '';
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) || hour > 23 || minute > 59 || second > 59) return MALFORMED;
  const zone = rest.trim();
  const local = wallClockMs(year, month, day, hour, minute, second);
  const offsetMs = zone === '' ? 0 : zoneOffsetMs(zone, local);
  if (offsetMs === null) return MALFORMED;
  const micros = (local - offsetMs) * 1000 + (fraction === '' ? 0 : Number(fraction.slice(0, 6).padEnd(6, '0')));
  return { kind: 'micros', micros };
}

const isPrintableAscii = (c: number): boolean => c > 0x20 && c < 0x7f;
const numberOr = (group: string | undefined, absent: number): number => (group === undefined ? absent : Number(group));

/** The wall clock as if in UTC, in ms. */
function wallClockMs(year: number, month: number, day: number, hour: number, minute: number, second: number): number {
  // Date.UTC reads years 0-99 as 1900-1999 (and 1900 is no leap year, unlike year 0).
  if (year >= 100) return Date.UTC(year, month - 1, day, hour, minute, second);
  const wall = new Date(0);
  wall.setUTCFullYear(year, month - 1, day);
  wall.setUTCHours(hour, minute, second, 0);
  return wall.getTime();
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

const OFFSET = /^([+-])(\d{1,2})(?::?(\d{2})(?::?(\d{2}))?)?$/;

/** The zone's offset from UTC at local time `localMs` (wall clock as if UTC), or null when it is no zone. */
function zoneOffsetMs(zone: string, localMs: number): number | null {
  if (zone === 'Z') return 0;
  const sign = zone.charCodeAt(0);
  if (sign === 0x2b /* + */ || sign === 0x2d /* - */) return fixedOffsetMs(zone);
  const prefixed = /^(UTC|GMT|UT)(.*)$/i.exec(zone);
  if (prefixed) return prefixed[2] === '' ? 0 : fixedOffsetMs(prefixed[2]!);
  return regionOffsetMs(zone, localMs);
}

function fixedOffsetMs(text: string): number | null {
  const m = OFFSET.exec(text);
  if (!m) return null;
  const [h, mi, s] = [Number(m[2]), Number(m[3] ?? 0), Number(m[4] ?? 0)];
  if (h > 18 || mi > 59 || s > 59 || h * 3600 + mi * 60 + s > 18 * 3600) return null;
  return (m[1] === '-' ? -1 : 1) * (h * 3600 + mi * 60 + s) * 1000;
}

const regionFormats = new Map<string, Intl.DateTimeFormat | null>();

/** A region's offset (IANA time-zone database, through Intl) at a local time. */
function regionOffsetMs(zone: string, localMs: number): number | null {
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(zone)) return null;
  let format = regionFormats.get(zone);
  if (format === undefined) {
    try {
      format = new Intl.DateTimeFormat('en-US', {
        timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric',
      });
    } catch {
      format = null;
    }
    regionFormats.set(zone, format);
  }
  if (format === null) return null;
  const offsetAt = (instantMs: number): number => {
    const parts = Object.fromEntries(format!.formatToParts(new Date(instantMs)).map((p) => [p.type, p.value]));
    const wall = Date.UTC(Number(parts.year), Number(parts.month) - 1, Number(parts.day), Number(parts.hour), Number(parts.minute), Number(parts.second));
    return wall - Math.floor(instantMs / 1000) * 1000;
  };
  // As java.time: the offset in force a day before (before any transition) if the wall clock exists
  // with it (an overlap takes the earlier offset), else the one a day after; in a gap, the earlier
  // one, which moves the time forward by the gap's length.
  const before = offsetAt(localMs - 86_400_000);
  if (offsetAt(localMs - before) === before) return before;
  const after = offsetAt(localMs + 86_400_000);
  return offsetAt(localMs - after) === after ? after : before;
}
