/**
 * Spark's regular expressions are java.util.regex patterns; Sluice runs them on JavaScript's
 * RegExp (with the `u` flag, so matching is by code point as in Java). This module translates the
 * syntax where the two differ, and refuses what JavaScript cannot express, at compile time:
 *
 * - POSIX classes `\p{Alpha}`, `\p{Digit}`, `\p{Punct}`, ... (ASCII in Java) become ASCII classes;
 *   `\p{L}`, `\p{Lu}`, `\p{IsAlphabetic}` and other Unicode properties stay Unicode properties.
 * - `\Q...\E` quotes literally; `\A`, `\z`, `\Z` anchor at the input's ends; `$` (no MULTILINE)
 *   also matches before a final line terminator, as in Java.
 * - `\s` is Java's ASCII whitespace `[ \t\n\x0B\f\r]` (JavaScript's includes Unicode spaces);
 *   `\h`, `\v` (vertical whitespace in Java, not VT), `\R`, `\e`, `\a`, `\0nn`, `\x{h..h}`.
 * - Java lets `\` escape any non-letter (`\-`, `\@`, `\_`); so does the translation.
 * - Leading inline flags `(?i)`, `(?s)`, `(?m)`, `(?x)`-less forms become RegExp flags.
 *   Refused (INVALID_PARAMETER_VALUE.PATTERN): possessive quantifiers (`a*+`), atomic groups
 *   `(?>...)`, class intersections `[a-z&&[^b]]`, and inline flags after the start.
 * - In replacements (regexp_replace) Java reads `$n`/`${name}` as groups and `\x` as a literal x;
 *   see `parseJavaReplacement`.
 */
import { IllegalArgumentError } from '../../errors/sluice-error.js';

const POSIX: Record<string, string> = {
  Lower: 'a-z', Upper: 'A-Z', ASCII: '\\x00-\\x7F', Alpha: 'a-zA-Z', Digit: '0-9', Alnum: 'a-zA-Z0-9',
  Punct: '!-\\/:-@\\[-`{-~', Graph: '!-~', Print: ' -~', Blank: ' \\t', Cntrl: '\\x00-\\x1F\\x7F', XDigit: '0-9a-fA-F',
  Space: ' \\t\\n\\x0B\\f\\r',
};
const UNICODE_ALIASES: Record<string, string> = {
  IsAlphabetic: 'Alphabetic', IsLetter: 'L', IsDigit: 'Nd', IsUppercase: 'Uppercase', IsLowercase: 'Lowercase',
  IsWhite_Space: 'White_Space', IsWhiteSpace: 'White_Space', IsPunctuation: 'P', javaLowerCase: 'Lowercase', javaUpperCase: 'Uppercase',
  javaWhitespace: 'White_Space', javaLetter: 'L', javaDigit: 'Nd', javaLetterOrDigit: 'L', IsLatin: 'Script=Latin', IsGreek: 'Script=Greek',
};
const JAVA_SPACE = ' \\t\\n\\x0B\\f\\r';
const SYNTAX = new Set('^$\\.*+?()[]{}|/'.split(''));

export class JavaRegexError extends IllegalArgumentError {}

function invalidPattern(fn: string, pattern: string, reason: string): JavaRegexError {
  return new JavaRegexError(
    `[INVALID_PARAMETER_VALUE.PATTERN] The value of parameter(s) \`regexp\` in \`${fn}\` is invalid: '${pattern}'. ${reason} SQLSTATE: 22023`,
    { code: 'INVALID_PARAMETER_VALUE', errorClass: 'INVALID_PARAMETER_VALUE.PATTERN' },
  );
}

function literalChar(c: string, inClass: boolean): string {
  if (SYNTAX.has(c) || (inClass && c === '-')) return `\\${c}`;
  return c;
}

function hexEscape(code: number): string {
  return `\\u{${code.toString(16)}}`;
}

/** The JavaScript source and flags of a Java pattern; throws INVALID_PARAMETER_VALUE.PATTERN on what cannot be expressed. */
export function translateJavaRegex(pattern: string, fn: string): { source: string; flags: string } {
  let flags = 'u';
  let i = 0;
  // Leading inline flags, possibly several groups: (?i)(?s) or (?is).
  for (let m = /^\(\?([imsux]+)\)/.exec(pattern.slice(i)); m; m = /^\(\?([imsux]+)\)/.exec(pattern.slice(i))) {
    for (const f of m[1]!) {
      if (f === 'x') throw invalidPattern(fn, pattern, 'The COMMENTS flag (?x) is not supported by Sluice.');
      if ((f === 'i' || f === 'm' || f === 's') && !flags.includes(f)) flags += f;
    }
    i += m[0].length;
  }
  let out = '';
  let inClass = false;
  let afterQuantifier = false;
  const multiline = flags.includes('m');
  while (i < pattern.length) {
    const c = pattern[i]!;
    const previousWasQuantifier: boolean = afterQuantifier;
    afterQuantifier = false;
    if (c === '\\') {
      const n = pattern[i + 1];
      if (n === undefined) throw invalidPattern(fn, pattern, 'Unexpected internal error near index ' + (i + 1));
      i += 2;
      if (n === 'Q') {
        const end = pattern.indexOf('\\E', i);
        const text = end < 0 ? pattern.slice(i) : pattern.slice(i, end);
        out += Array.from(text).map((x) => literalChar(x, inClass)).join('');
        i = end < 0 ? pattern.length : end + 2;
        continue;
      }
      if (n === 'p' || n === 'P') {
        let name: string;
        if (pattern[i] === '{') {
          const end = pattern.indexOf('}', i);
          if (end < 0) throw invalidPattern(fn, pattern, 'Unclosed character family.');
          name = pattern.slice(i + 1, end);
          i = end + 1;
        } else {
          name = pattern[i] ?? '';
          i++;
        }
        const posix = POSIX[name.replace(/^Is/, '')] ?? (name.startsWith('Is') ? undefined : POSIX[name]);
        if (posix !== undefined && POSIX[name] !== undefined) {
          if (inClass && n === 'P') throw invalidPattern(fn, pattern, `A negated POSIX class \\P{${name}} inside [...] is not supported by Sluice.`);
          out += inClass ? posix : `[${n === 'P' ? '^' : ''}${posix}]`;
        } else {
          const prop = UNICODE_ALIASES[name] ?? name.replace(/^In/, 'Script=').replace(/^Is/, '');
          out += `\\${n}{${prop}}`;
        }
        continue;
      }
      switch (n) {
        case 'A': out += '(?<![\\s\\S])'; continue;
        case 'z': out += '(?![\\s\\S])'; continue;
        case 'Z': out += '(?=(?:\\r\\n|[\\n\\r\\u0085\\u2028\\u2029])?(?![\\s\\S]))'; continue;
        case 's': out += inClass ? JAVA_SPACE : `[${JAVA_SPACE}]`; continue;
        case 'S': out += inClass ? '\\S' : `[^${JAVA_SPACE}]`; continue;
        case 'h': out += inClass ? ' \\t\\xA0\\u1680\\u180e\\u2000-\\u200a\\u202f\\u205f\\u3000' : '[ \\t\\xA0\\u1680\\u180e\\u2000-\\u200a\\u202f\\u205f\\u3000]'; continue;
        case 'v': out += inClass ? '\\n\\x0B\\f\\r\\x85\\u2028\\u2029' : '[\\n\\x0B\\f\\r\\x85\\u2028\\u2029]'; continue;
        case 'R': out += '(?:\\r\\n|[\\n\\x0B\\f\\r\\x85\\u2028\\u2029])'; continue;
        case 'e': out += '\\x1B'; continue;
        case 'a': out += '\\x07'; continue;
        case 'G': throw invalidPattern(fn, pattern, 'The \\G anchor is not supported by Sluice.');
        case 'x': {
          if (pattern[i] === '{') {
            const end = pattern.indexOf('}', i);
            out += hexEscape(parseInt(pattern.slice(i + 1, end), 16));
            i = end + 1;
          } else {
            out += `\\x${pattern.slice(i, i + 2)}`;
            i += 2;
          }
          continue;
        }
        case '0': {
          const m = /^[0-3]?[0-7]{1,2}/.exec(pattern.slice(i));
          if (!m) throw invalidPattern(fn, pattern, 'Illegal octal escape sequence.');
          out += hexEscape(parseInt(m[0], 8));
          i += m[0].length;
          continue;
        }
        default:
          if (/[a-zA-Z0-9]/.test(n)) out += `\\${n}`; // \d \w \b \n \t \1 \k<name> ... mean the same
          else out += SYNTAX.has(n) || (inClass && n === '-') ? `\\${n}` : n;
          continue;
      }
    }
    if (inClass) {
      if (c === '[') throw invalidPattern(fn, pattern, 'Nested character classes ([a[b]]) and intersections (&&) are not supported by Sluice.');
      if (c === '&' && pattern[i + 1] === '&') throw invalidPattern(fn, pattern, 'Character class intersections (&&) are not supported by Sluice.');
      if (c === ']') inClass = false;
      out += c;
      i++;
      continue;
    }
    if (c === '{') {
      // A quantifier {n}, {n,}, {n,m} is copied whole; Java refuses any other '{'.
      const m = /^\{\d+(,\d*)?\}/.exec(pattern.slice(i));
      if (!m) throw invalidPattern(fn, pattern, `Illegal repetition near index ${i}`);
      out += m[0];
      i += m[0].length;
      afterQuantifier = true;
      continue;
    }
    if (c === '}' || c === ']') {
      // Literal in Java; a syntax error in a JavaScript `u` pattern unless escaped.
      out += `\\${c}`;
      i++;
      continue;
    }
    if (c === '[') {
      inClass = true;
      out += c;
      i++;
      if (pattern[i] === '^') { out += '^'; i++; }
      continue;
    }
    if (c === '(' && pattern[i + 1] === '?') {
      const rest = pattern.slice(i + 2);
      if (rest.startsWith('>')) throw invalidPattern(fn, pattern, 'Atomic groups (?>...) are not supported by Sluice.');
      if (/^[imsux-]+[):]/.test(rest)) throw invalidPattern(fn, pattern, 'Inline flags are supported only at the start of the pattern by Sluice.');
    }
    if (c === '+' && previousWasQuantifier) throw invalidPattern(fn, pattern, 'Possessive quantifiers (*+, ++, ?+) are not supported by Sluice.');
    // A quantifier right after a quantifier: `+` makes it possessive, `?` lazy.
    afterQuantifier = (c === '*' || c === '+' || c === '?') && !previousWasQuantifier && !/(^|[(|])$/.test(out);
    if (c === '$' && !multiline) {
      out += '(?=(?:\\r\\n|[\\n\\r\\u0085\\u2028\\u2029])?(?![\\s\\S]))';
      i++;
      continue;
    }
    out += c;
    i++;
  }
  return { source: out, flags };
}

/** A compiled Java pattern as a RegExp (`extraFlags`: e.g. `g`); refusals as Spark's INVALID_PARAMETER_VALUE.PATTERN. */
export function compileJavaRegex(pattern: string, fn: string, extraFlags = ''): RegExp {
  const { source, flags } = translateJavaRegex(pattern, fn);
  try {
    return new RegExp(source, flags + extraFlags);
  } catch (error) {
    throw invalidPattern(fn, pattern, (error as Error).message);
  }
}

/** A piece of a Java replacement string: literal text, or a group by number or name. */
export type ReplacementPart = string | { readonly group: number | string };

/**
 * Java's Matcher.appendReplacement: `$n` takes the longest group number that exists (so `$12`
 * is group 1 then `2` when there are fewer than 12 groups), `${name}` a named group, and `\x` the
 * character x. A `$` with no group after it is an error, as in Java.
 */
export function parseJavaReplacement(replacement: string, groupCount: number, fn: string): ReplacementPart[] {
  const parts: ReplacementPart[] = [];
  let text = '';
  for (let i = 0; i < replacement.length; i++) {
    const c = replacement[i]!;
    if (c === '\\') {
      i++;
      if (i >= replacement.length) throw invalidReplacement(fn, replacement, 'character to be escaped is missing');
      text += replacement[i];
    } else if (c === '$') {
      i++;
      if (i >= replacement.length) throw invalidReplacement(fn, replacement, 'Illegal group reference: group index is missing');
      if (replacement[i] === '{') {
        const end = replacement.indexOf('}', i);
        if (end < 0) throw invalidReplacement(fn, replacement, "named capturing group is missing trailing '}'");
        if (text) parts.push(text);
        text = '';
        parts.push({ group: replacement.slice(i + 1, end) });
        i = end;
        continue;
      }
      if (!/[0-9]/.test(replacement[i]!)) throw invalidReplacement(fn, replacement, 'Illegal group reference');
      let group = Number(replacement[i]);
      if (group > groupCount) throw invalidReplacement(fn, replacement, `No group ${group}`);
      while (i + 1 < replacement.length && /[0-9]/.test(replacement[i + 1]!)) {
        const next = group * 10 + Number(replacement[i + 1]);
        if (next > groupCount) break;
        group = next;
        i++;
      }
      if (text) parts.push(text);
      text = '';
      parts.push({ group });
    } else {
      text += c;
    }
  }
  if (text) parts.push(text);
  return parts;
}

function invalidReplacement(fn: string, replacement: string, reason: string): IllegalArgumentError {
  return new IllegalArgumentError(`${reason} (in the replacement '${replacement}' of ${fn})`, { code: 'INVALID_REPLACEMENT' });
}

/** Counts a RegExp's capturing groups (what Java's groupCount() says). */
export function groupCount(re: RegExp): number {
  return new RegExp(`${re.source}|`, re.flags.replace('g', '')).exec('')!.length - 1;
}
