/** A malformed delay or duration says what is wrong with it: the bad unit (with the units), the bad number. */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { col, window } from '../../lib/plan/functions.js';
import { parseInterval } from '../../lib/plan/intervals.js';

const events = () => new SluiceSession().memoryStream('ts timestamp, v long').df;

describe('interval strings', () => {
  it("withWatermark('ts', '10 minuts'): Spark's CANNOT_PARSE_INTERVAL, naming `minuts`, the closest unit and the valid ones", () => {
    expect(() => events().withWatermark('ts', '10 minuts')).toThrow(
      "[CANNOT_PARSE_INTERVAL] Unable to parse '10 minuts': `minuts` is not a unit (did you mean `minutes`?); "
      + 'the units are year, month, week, day, hour, minute, second, millisecond, microsecond (singular or plural), or us, ms, sec, min, hr, mon, yr. SQLSTATE: 22006',
    );
    try {
      events().withWatermark('ts', '10 minuts');
    } catch (error) {
      expect((error as { errorClass: string }).errorClass).toBe('CANNOT_PARSE_INTERVAL');
    }
  });

  it('a unit far from any: no guess, still the list', () => {
    expect(() => parseInterval('5 fortnights')).toThrow(/`fortnights` is not a unit; the units are year, month/);
    expect(() => parseInterval('1 hour 3 secnd')).toThrow(/`secnd` is not a unit \(did you mean `second`\?\)/);
  });

  it('a missing unit, a word for a number, an empty string', () => {
    expect(() => parseInterval('10')).toThrow("Unable to parse '10': `10` has no unit.");
    expect(() => parseInterval('ten minutes')).toThrow("Unable to parse 'ten minutes': `ten` is not a number.");
    expect(() => parseInterval('  ')).toThrow("Unable to parse '  ': it is empty.");
    expect(() => window(col('ts'), '1 hourz')).toThrow(/`hourz` is not a unit \(did you mean `hour`\?\)/);
  });

  it('valid strings still parse, abbreviations and plurals included', () => {
    expect(parseInterval('1 hour 30 mins')).toEqual({ months: 0, days: 0, micros: 5_400_000_000 });
    expect(parseInterval('interval 2 weeks 1 day')).toEqual({ months: 0, days: 15, micros: 0 });
  });
});
