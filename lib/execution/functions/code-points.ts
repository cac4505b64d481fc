/**
 * Spark counts characters as Unicode code points (UTF8String.numChars); JavaScript strings count
 * UTF-16 units. These helpers take the fast path when a string has no surrogate pair.
 */
const SURROGATE = /[\uD800-\uDFFF]/;

export function codePoints(s: string): string[] {
  return SURROGATE.test(s) ? Array.from(s) : s.split('');
}

export function codePointLength(s: string): number {
  if (!SURROGATE.test(s)) return s.length;
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** The code points [start, end) of `s` (0-based, clamped). */
export function sliceCodePoints(s: string, start: number, end = Infinity): string {
  if (!SURROGATE.test(s)) return s.slice(Math.max(0, start), Math.max(0, Math.min(end, s.length)));
  return Array.from(s).slice(Math.max(0, start), Math.max(0, end)).join('');
}

/** The 0-based code-point index of `needle` in `s` from code point `from`, or -1. */
export function indexOfCodePoints(s: string, needle: string, from = 0): number {
  if (!SURROGATE.test(s)) return s.indexOf(needle, from);
  const units = Array.from(s);
  const unitStart = units.slice(0, from).join('').length;
  const at = s.indexOf(needle, unitStart);
  return at < 0 ? -1 : codePointLength(s.slice(0, at));
}
