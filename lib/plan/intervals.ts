import { IllegalArgumentError } from '../errors/sluice-error.js';

/** A Spark CalendarInterval: months, days and microseconds are kept apart, as Spark does. */
export interface CalendarInterval {
  readonly months: number;
  readonly days: number;
  readonly micros: number;
}

export const MICROS_PER_MS = 1_000;
export const MICROS_PER_SECOND = 1_000_000;
export const MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND;

const UNIT_MICROS: Record<string, number> = {
  microsecond: 1,
  millisecond: MICROS_PER_MS,
  second: MICROS_PER_SECOND,
  minute: 60 * MICROS_PER_SECOND,
  hour: 3_600 * MICROS_PER_SECOND,
};

function normalizeUnit(unit: string): string {
  const u = unit.toLowerCase();
  const singular = u.endsWith('s') ? u.slice(0, -1) : u;
  const abbreviations: Record<string, string> = {
    us: 'microsecond', ms: 'millisecond', sec: 'second', min: 'minute', hr: 'hour', yr: 'year', mon: 'month',
  };
  return abbreviations[u] ?? abbreviations[singular] ?? singular;
}

/**
 * Parses Spark's interval strings: `10 seconds`, `interval 3 minutes 30 seconds`, `1 year -13 months`,
 * `interval '1 2:3:4' day to second`. Throws a clear error for anything else.
 */
export function parseInterval(text: string): CalendarInterval {
  const original = text;
  let s = text.trim();
  if (/^interval\s+/i.test(s)) s = s.replace(/^interval\s+/i, '');
  const dayToSecond = /^'(-?)(\d+) (\d+):(\d+):(\d+(?:\.\d+)?)'\s+day\s+to\s+second$/i.exec(s);
  if (dayToSecond) {
    const sign = dayToSecond[1] === '-' ? -1 : 1;
    const [d, h, m, sec] = dayToSecond.slice(2).map(Number) as [number, number, number, number];
    return { months: 0, days: sign * d, micros: sign * Math.round((h * 3600 + m * 60 + sec) * MICROS_PER_SECOND) };
  }
  if (/^'.*'$/.test(s)) s = s.slice(1, -1);
  const tokens = s.split(/\s+/).filter(Boolean);
  if (tokens.length === 0) throw invalidInterval(original, 'it is empty');
  let months = 0;
  let days = 0;
  let micros = 0;
  for (let i = 0; i < tokens.length; i += 2) {
    const value = Number(tokens[i]);
    if (!Number.isFinite(value)) throw invalidInterval(original, `\`${tokens[i]}\` is not a number`);
    if (i + 1 === tokens.length) throw invalidInterval(original, `\`${tokens[i]}\` has no unit`);
    const unit = normalizeUnit(tokens[i + 1]!);
    if (unit === 'year') months += value * 12;
    else if (unit === 'month') months += value;
    else if (unit === 'week') days += value * 7;
    else if (unit === 'day') days += value;
    else if (unit in UNIT_MICROS) micros += value * UNIT_MICROS[unit]!;
    else throw invalidInterval(original, unknownUnit(tokens[i + 1]!));
  }
  return { months, days, micros: Math.round(micros) };
}

/** Every unit parseInterval takes, in messages: singular or plural, any case. */
const UNITS = ['year', 'month', 'week', 'day', 'hour', 'minute', 'second', 'millisecond', 'microsecond'];

/** Spark's CANNOT_PARSE_INTERVAL, plus what is wrong with the string (Spark does not say). */
function invalidInterval(text: string, problem: string): IllegalArgumentError {
  return new IllegalArgumentError(
    `[CANNOT_PARSE_INTERVAL] Unable to parse '${text}': ${problem}. SQLSTATE: 22006`,
    {
      code: 'INVALID_INTERVAL',
      errorClass: 'CANNOT_PARSE_INTERVAL',
      hint: "write it as '<number> <unit>' pairs, e.g. '10 seconds', '1 minute 30 seconds', '2 hours'.",
    },
  );
}

function unknownUnit(word: string): string {
  const singular = word.toLowerCase().replace(/s$/, '');
  const closest = UNITS.map((u) => ({ u, d: editDistance(singular, u) })).sort((a, b) => a.d - b.d)[0]!;
  const suggestion = closest.d <= 2 ? ` (did you mean \`${word.toLowerCase().endsWith('s') ? `${closest.u}s` : closest.u}\`?)` : '';
  return `\`${word}\` is not a unit${suggestion}; the units are ${UNITS.join(', ')} (singular or plural), or us, ms, sec, min, hr, mon, yr`;
}

/** Levenshtein distance, for a short word against the units. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** Spark's watermark-delay length: a month counts as 31 days (EventTimeWatermark.getDelayMs). */
export function intervalToDelayMs(interval: CalendarInterval): number {
  return interval.months * 31 * 86_400_000 + interval.days * 86_400_000 + Math.trunc(interval.micros / MICROS_PER_MS);
}

/**
 * Window durations must be a fixed length: months are rejected, days are 24 hours.
 * An integer is taken as microseconds, as in Spark's `window(col, 10000000)`.
 */
export function durationToMicros(spec: string | number, what: string): number {
  if (typeof spec === 'number') return spec;
  const interval = parseInterval(spec);
  if (interval.months !== 0) {
    throw new IllegalArgumentError(`Intervals greater than a month is not supported (${spec}).`, {
      code: 'WINDOW_DURATION_HAS_MONTHS',
      hint: `the ${what} of a window must be a fixed length: use days, hours, minutes or seconds.`,
    });
  }
  return interval.days * MICROS_PER_DAY + interval.micros;
}

export function formatDuration(micros: number): string {
  if (micros % MICROS_PER_SECOND === 0) return `${micros / MICROS_PER_SECOND} seconds`;
  if (micros % MICROS_PER_MS === 0) return `${micros / MICROS_PER_MS} milliseconds`;
  return `${micros} microseconds`;
}
