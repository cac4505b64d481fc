/**
 * Spark's datetime patterns (java.time's DateTimeFormatter letters, as Spark 3+ uses them) in the
 * UTC session time zone: `yyyy-MM-dd HH:mm:ss.SSS`, `dd/MM/yy`, `EEE, MMM d`, `hh:mm a`, `'T'`
 * literals. A pattern is compiled once per query into a formatter and a strict parser. Written
 * here rather than taken from a library: date-fns and dayjs use different letters (`D`, `Y`,
 * `a`), and @js-joda/core's java.time port resolves fields strictly where Spark defaults the
 * missing ones (`yyyy-MM-dd` parses to midnight), so the adapter would be as long as this.
 */
import { civilFromDays, daysFromCivil, daysInMonth, MICROS_PER_DAY } from './dates.js';

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const WEEKDAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];

type Token = { readonly letter: string; readonly count: number } | { readonly literal: string };

/** A pattern letter Sluice does not know, or an unterminated quote (Spark: INVALID_DATETIME_PATTERN). */
export class DatetimePatternError extends Error {}

/** A text that does not match its pattern; the message is java.time's, as Spark quotes it. */
export class DatetimeParseError extends Error {}

const SUPPORTED = new Set(['y', 'u', 'M', 'L', 'd', 'D', 'H', 'h', 'k', 'K', 'm', 's', 'S', 'a', 'E', 'X', 'x', 'Z', 'V', 'z', 'Q', 'q']);

function tokenize(pattern: string): Token[] {
  const tokens: Token[] = [];
  for (let i = 0; i < pattern.length;) {
    const c = pattern[i]!;
    if (c === "'") {
      if (pattern[i + 1] === "'") {
        tokens.push({ literal: "'" });
        i += 2;
        continue;
      }
      let text = '';
      let j = i + 1;
      for (; j < pattern.length; j++) {
        if (pattern[j] === "'") {
          if (pattern[j + 1] === "'") { text += "'"; j++; continue; }
          break;
        }
        text += pattern[j];
      }
      if (j >= pattern.length) throw new DatetimePatternError(`Pattern ends with an incomplete string literal: ${pattern}`);
      tokens.push({ literal: text });
      i = j + 1;
    } else if (/[A-Za-z]/.test(c)) {
      if (!SUPPORTED.has(c)) throw new DatetimePatternError(`Unknown pattern letter: ${c}`);
      let j = i;
      while (pattern[j] === c) j++;
      tokens.push({ letter: c, count: j - i });
      i = j;
    } else {
      tokens.push({ literal: c });
      i++;
    }
  }
  return tokens;
}

interface Fields {
  year: number;
  month: number;
  day: number;
  dayOfYear: number | null;
  hour: number;
  hour12: number | null;
  pm: boolean | null;
  minute: number;
  second: number;
  micros: number;
  offsetMinutes: number;
}

export interface DatetimePattern {
  /** Epoch microseconds (UTC) as text. */
  format(micros: number): string;
  /** Text to epoch microseconds (UTC); throws DatetimeParseError with java.time's reason. */
  parse(text: string): number;
}

const pad = (n: number, width: number): string => String(n).padStart(width, '0');

export function compileDatetimePattern(pattern: string): DatetimePattern {
  const tokens = tokenize(pattern);
  return { format: (micros) => tokens.map((t) => formatToken(t, micros)).join(''), parse: (text) => parseWith(tokens, text) };
}

function formatToken(t: Token, micros: number): string {
  if ('literal' in t) return t.literal;
  const days = Math.floor(micros / MICROS_PER_DAY);
  const inDay = micros - days * MICROS_PER_DAY;
  const { year, month, day } = civilFromDays(days);
  const hour = Math.floor(inDay / 3_600_000_000);
  const n = t.count;
  switch (t.letter) {
    case 'y':
    case 'u':
      return n === 2 ? pad(((year % 100) + 100) % 100, 2) : pad(year, n);
    case 'M':
    case 'L':
      return n >= 4 ? MONTHS[month - 1]! : n === 3 ? MONTHS[month - 1]!.slice(0, 3) : pad(month, n);
    case 'Q':
    case 'q':
      return pad(Math.ceil(month / 3), n);
    case 'd': return pad(day, n);
    case 'D': return pad(days - daysFromCivil(year, 1, 1) + 1, n);
    case 'H': return pad(hour, n);
    case 'k': return pad(hour === 0 ? 24 : hour, n);
    case 'h': return pad(hour % 12 === 0 ? 12 : hour % 12, n);
    case 'K': return pad(hour % 12, n);
    case 'm': return pad(Math.floor(inDay / 60_000_000) % 60, n);
    case 's': return pad(Math.floor(inDay / 1_000_000) % 60, n);
    case 'S': return pad(inDay % 1_000_000, 6).padEnd(9, '0').slice(0, n);
    case 'a': return hour < 12 ? 'AM' : 'PM';
    case 'E': {
      const name = WEEKDAYS[(((days + 3) % 7) + 7) % 7]!;
      return n >= 4 ? name : name.slice(0, 3);
    }
    case 'X': return 'Z';
    case 'x': return n === 1 ? '+00' : n === 2 || n === 4 ? '+0000' : '+00:00';
    case 'Z': return n >= 4 ? 'GMT' : '+0000';
    default: return 'UTC'; // V, z: the session time zone
  }
}

/** Java's field names, for the "Invalid value for ..." reasons. */
const FIELD_NAMES: Record<string, [string, number, number]> = {
  M: ['MonthOfYear', 1, 12], L: ['MonthOfYear', 1, 12], d: ['DayOfMonth', 1, 31], D: ['DayOfYear', 1, 366],
  H: ['HourOfDay', 0, 23], k: ['ClockHourOfDay', 1, 24], h: ['ClockHourOfAmPm', 1, 12], K: ['HourOfAmPm', 0, 11],
  m: ['MinuteOfHour', 0, 59], s: ['SecondOfMinute', 0, 59],
};

function parseWith(tokens: readonly Token[], text: string): number {
  const f: Fields = { year: 1970, month: 1, day: 1, dayOfYear: null, hour: 0, hour12: null, pm: null, minute: 0, second: 0, micros: 0, offsetMinutes: 0 };
  let pos = 0;
  const fail = (): never => { throw new DatetimeParseError(`Text '${text}' could not be parsed at index ${pos}`); };
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if ('literal' in t) {
      if (!text.startsWith(t.literal, pos)) fail();
      pos += t.literal.length;
      continue;
    }
    const next = tokens[i + 1];
    const adjacentNumber = next !== undefined && 'letter' in next && /[yuMLdDHhkKmsSQq]/.test(next.letter) && (next.letter !== 'M' || next.count < 3);
    const number = (min: number, max: number): number => {
      let end = pos;
      while (end < text.length && end - pos < max && text.charCodeAt(end) >= 48 && text.charCodeAt(end) <= 57) end++;
      if (end - pos < min) fail();
      const value = Number(text.slice(pos, end));
      pos = end;
      return value;
    };
    const fixedOrFree = (n: number): number => (n >= 2 || adjacentNumber ? number(n, n) : number(1, 19));
    const checked = (letter: string, value: number): number => {
      const [name, lo, hi] = FIELD_NAMES[letter]!;
      if (value < lo || value > hi) throw new DatetimeParseError(`Text '${text}' could not be parsed: Invalid value for ${name} (valid values ${lo} - ${hi}): ${value}`);
      return value;
    };
    switch (t.letter) {
      case 'y':
      case 'u':
        if (t.count === 2) f.year = 2000 + number(2, 2);
        else f.year = number(Math.max(t.count, 1), adjacentNumber ? t.count : 10);
        break;
      case 'M':
      case 'L':
        if (t.count >= 3) {
          const names = MONTHS.map((m) => (t.count === 3 ? m.slice(0, 3) : m));
          const index = names.findIndex((m) => text.slice(pos, pos + m.length).toLowerCase() === m.toLowerCase());
          if (index < 0) fail();
          pos += names[index]!.length;
          f.month = index + 1;
        } else f.month = checked('M', fixedOrFree(t.count));
        break;
      case 'd': f.day = checked('d', fixedOrFree(t.count)); break;
      case 'D': f.dayOfYear = checked('D', t.count >= 3 ? number(3, 3) : fixedOrFree(t.count)); break;
      case 'H': f.hour = checked('H', fixedOrFree(t.count)); break;
      case 'k': f.hour = checked('k', fixedOrFree(t.count)) % 24; break;
      case 'h': f.hour12 = checked('h', fixedOrFree(t.count)) % 12; break;
      case 'K': f.hour12 = checked('K', fixedOrFree(t.count)); break;
      case 'm': f.minute = checked('m', fixedOrFree(t.count)); break;
      case 's': f.second = checked('s', fixedOrFree(t.count)); break;
      case 'S': {
        const start = pos;
        number(1, t.count);
        f.micros = Number(text.slice(start, pos).padEnd(6, '0').slice(0, 6));
        break;
      }
      case 'a': {
        const word = text.slice(pos, pos + 2).toUpperCase();
        if (word !== 'AM' && word !== 'PM') fail();
        f.pm = word === 'PM';
        pos += 2;
        break;
      }
      case 'E': {
        const names = WEEKDAYS.map((w) => (t.count >= 4 ? w : w.slice(0, 3)));
        const index = names.findIndex((w) => text.slice(pos, pos + w.length).toLowerCase() === w.toLowerCase());
        if (index < 0) fail();
        pos += names[index]!.length;
        break;
      }
      case 'Q':
      case 'q': {
        const quarter = fixedOrFree(t.count);
        if (quarter < 1 || quarter > 4) fail();
        break;
      }
      default: {
        // Offsets (X, x, Z) and zone names (V, z): Z, UTC/GMT, or ±HH[:]MM.
        if (text[pos] === 'Z') { pos++; break; }
        const zoneName = /^(UTC|GMT|UT)/.exec(text.slice(pos));
        if (zoneName) { pos += zoneName[0].length; if (!/[+-]/.test(text[pos] ?? '')) break; }
        const offset = /^([+-])(\d{2}):?(\d{2})?/.exec(text.slice(pos));
        if (!offset) fail();
        f.offsetMinutes = (offset![1] === '-' ? -1 : 1) * (Number(offset![2]) * 60 + Number(offset![3] ?? '0'));
        pos += offset![0].length;
      }
    }
  }
  if (pos < text.length) throw new DatetimeParseError(`Text '${text}' could not be parsed, unparsed text found at index ${pos}`);
  if (f.hour12 !== null) f.hour = f.hour12 + (f.pm ? 12 : 0);
  let days: number;
  if (f.dayOfYear !== null) {
    days = daysFromCivil(f.year, 1, 1) + f.dayOfYear - 1;
  } else {
    if (f.day > daysInMonth(f.year, f.month)) {
      throw new DatetimeParseError(`Text '${text}' could not be parsed: Invalid date '${MONTHS[f.month - 1]!.toUpperCase()} ${f.day}'`);
    }
    days = daysFromCivil(f.year, f.month, f.day);
  }
  return days * MICROS_PER_DAY + ((f.hour * 60 + f.minute - f.offsetMinutes) * 60 + f.second) * 1_000_000 + f.micros;
}
