import type { BoundCall } from '../../analysis/bound-expr.js';
import { IllegalArgumentError } from '../../errors/sluice-error.js';
import { longToDouble, type LongValue } from '../../core/long.js';
import type { Evaluator, ScalarFunctionImplementation } from './implementation.js';
import { compileJavaRegex, groupCount, parseJavaReplacement, type ReplacementPart } from './java-regex.js';
import { asStrings } from './spark-values.js';

/**
 * A pattern argument compiled once when it is a literal, else once per distinct value in a row
 * (the last one kept, as Spark's generated code does).
 */
function patternCache(pattern: Evaluator, call: BoundCall, index: number, build: (text: string) => RegExp): (row: unknown[]) => RegExp | null {
  const arg = call.args[index]!;
  if (arg.kind === 'literal') {
    const re = arg.value === null ? null : build(String(arg.value));
    return () => re;
  }
  let lastText: string | null = null;
  let last: RegExp | null = null;
  return (row) => {
    const text = pattern(row);
    if (text === null || text === undefined) return null;
    if (text !== lastText) {
      last = build(String(text));
      lastText = String(text);
    }
    return last;
  };
}

function invalidLike(pattern: string, errorClass: string, reason: string): IllegalArgumentError {
  return new IllegalArgumentError(`[${errorClass}] The format is invalid: '${pattern}'. ${reason} SQLSTATE: 42601`, { code: 'INVALID_FORMAT', errorClass });
}

const escapeRegex = (c: string): string => c.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&');

/** Spark's StringUtils.escapeLikeRegex: `_` one character, `%` any run, `escape` before `_`, `%` or itself. */
export function likeToRegExp(pattern: string, escape: string): RegExp {
  let out = '';
  const cps = Array.from(pattern);
  for (let i = 0; i < cps.length; i++) {
    const c = cps[i]!;
    if (c === escape) {
      const next = cps[++i];
      if (next === undefined) throw invalidLike(pattern, 'INVALID_FORMAT.ESC_AT_THE_END', 'It is not allowed to end with the escape character.');
      if (next !== '_' && next !== '%' && next !== escape) {
        throw invalidLike(pattern, 'INVALID_FORMAT.ESC_IN_THE_MIDDLE', `The escape character is not allowed to precede '${next}'.`);
      }
      out += escapeRegex(next);
    } else if (c === '_') out += '.';
    else if (c === '%') out += '.*';
    else out += escapeRegex(c);
  }
  return new RegExp(`^(?:${out})$`, 'su');
}

function like(name: 'like' | 'ilike'): ScalarFunctionImplementation {
  return {
    name,
    compile: (args, call) => {
      const [str, pattern] = asStrings(args, call.args.map((a) => a.type));
      const escapeArg = call.args[2];
      const escape = escapeArg === undefined ? '\\' : String(escapeArg.kind === 'literal' ? escapeArg.value : '');
      if (escapeArg !== undefined && (escapeArg.kind !== 'literal' || Array.from(escape).length !== 1)) {
        throw new IllegalArgumentError(`The escape character of ${name} must be a literal string of one character, got ${escape}.`, { code: 'INVALID_ESCAPE_CHAR' });
      }
      const fold = name === 'ilike' ? (s: string): string => s.toLowerCase() : (s: string): string => s;
      const re = patternCache(pattern!, call, 1, (text) => likeToRegExp(fold(text), escape));
      return (row) => {
        const s = str!(row);
        if (s === null || s === undefined) return null;
        const r = re(row);
        return r === null ? null : r.test(fold(String(s)));
      };
    },
  };
}

/** Compiles `f(string, regexp, ...rest)`: NULL when the string, the pattern or a further argument is NULL. */
function regexFunction(name: string, flags: string, f: (s: string, re: RegExp, rest: unknown[]) => unknown): ScalarFunctionImplementation {
  return {
    name,
    compile: (args, call) => {
      const types = call.args.map((a) => a.type);
      const [str, pattern, ...rest] = asStrings(args, types).map((a, i) => (types[i] === 'int' || types[i] === 'long' ? args[i]! : a));
      const re = patternCache(pattern!, call, 1, (text) => compileJavaRegex(text, name, flags));
      return (row) => {
        const s = str!(row);
        if (s === null || s === undefined) return null;
        const r = re(row);
        if (r === null) return null;
        const values = rest.map((a) => a(row));
        if (values.some((v) => v === null || v === undefined)) return null;
        r.lastIndex = 0;
        return f(String(s), r, values);
      };
    },
  };
}

function groupIndex(fn: string, re: RegExp, value: unknown): number {
  const idx = longToDouble(value as LongValue);
  const groups = groupCount(re);
  if (idx < 0 || idx > groups) {
    throw new IllegalArgumentError(
      `[INVALID_PARAMETER_VALUE.REGEX_GROUP_INDEX] The value of parameter(s) \`idx\` in \`${fn}\` is invalid: Expects group index between 0 and ${groups}, but got ${idx}. SQLSTATE: 22023`,
      { code: 'INVALID_PARAMETER_VALUE', errorClass: 'INVALID_PARAMETER_VALUE.REGEX_GROUP_INDEX' },
    );
  }
  return idx;
}

const replacementCache = new WeakMap<RegExp, Map<string, ReplacementPart[]>>();

function replaceJava(s: string, re: RegExp, replacement: string): string {
  let byText = replacementCache.get(re);
  if (!byText) replacementCache.set(re, (byText = new Map()));
  let parts = byText.get(replacement);
  if (!parts) byText.set(replacement, (parts = parseJavaReplacement(replacement, groupCount(re), 'regexp_replace')));
  if (parts.every((p) => typeof p === 'string')) {
    const text = parts.join('');
    return s.replace(re, () => text);
  }
  const chosen = parts;
  return s.replace(re, (...m: unknown[]) => {
    const named = typeof m[m.length - 1] === 'object' ? (m[m.length - 1] as Record<string, string | undefined>) : {};
    return chosen.map((p) => (typeof p === 'string' ? p : ((typeof p.group === 'number' ? m[p.group] : named[p.group]) as string | undefined) ?? '')).join('');
  });
}

/** LIKE and the Java-regex functions (signatures: lib/plan/function-catalog/regex-signatures.ts). */
export const REGEX_FUNCTIONS: readonly ScalarFunctionImplementation[] = [
  like('like'),
  like('ilike'),
  regexFunction('rlike', '', (s, re) => re.test(s)),
  regexFunction('regexp_like', '', (s, re) => re.test(s)),
  regexFunction('regexp', '', (s, re) => re.test(s)),
  regexFunction('regexp_extract', '', (s, re, [idx]) => {
    const group = groupIndex('regexp_extract', re, idx ?? 1);
    const m = re.exec(s);
    return m === null ? '' : (m[group] ?? '');
  }),
  regexFunction('regexp_extract_all', 'g', (s, re, [idx]) => {
    const group = groupIndex('regexp_extract_all', re, idx ?? 1);
    return Array.from(s.matchAll(re), (m) => m[group] ?? '');
  }),
  regexFunction('regexp_replace', 'g', (s, re, [rep, pos]) => {
    const position = pos === undefined ? 1 : longToDouble(pos as LongValue);
    if (position <= 0) {
      throw new IllegalArgumentError(
        `[INVALID_PARAMETER_VALUE.REGEX_POSITION] The value of parameter(s) \`position\` in \`regexp_replace\` is invalid: Expects a positive value, but got ${position}. SQLSTATE: 22023`,
        { code: 'INVALID_PARAMETER_VALUE', errorClass: 'INVALID_PARAMETER_VALUE' },
      );
    }
    const start = position - 1;
    if (start > s.length) return s;
    return s.slice(0, start) + replaceJava(s.slice(start), re, String(rep));
  }),
  regexFunction('regexp_count', 'g', (s, re) => Array.from(s.matchAll(re)).length),
  regexFunction('regexp_substr', '', (s, re) => re.exec(s)?.[0] ?? null),
  regexFunction('regexp_instr', '', (s, re, [idx]) => {
    const group = groupIndex('regexp_instr', re, idx ?? 0);
    const m = re.exec(s);
    if (m === null || m[group] === undefined) return 0;
    return group === 0 ? m.index + 1 : s.indexOf(m[group]!, m.index) + 1;
  }),
];

/**
 * Spark's split(str, regex[, limit]): Java's String.split with limit -1 (0 counts as -1): trailing
 * empty strings kept, no leading empty string for a zero-width match at the start, at most `limit`
 * parts when limit > 0; an empty pattern splits into characters.
 */
export function javaSplit(s: string, re: RegExp, limit: number): string[] {
  const max = limit <= 0 ? Infinity : limit;
  if (s !== '' && re.source === '(?:)') {
    const chars = Array.from(s);
    if (max >= chars.length) return chars;
    return [...chars.slice(0, max - 1), chars.slice(max - 1).join('')];
  }
  const parts: string[] = [];
  let last = 0;
  re.lastIndex = 0;
  for (const m of s.matchAll(re)) {
    if (parts.length === max - 1) break;
    if (m[0] === '' && m.index === 0) continue;
    parts.push(s.slice(last, m.index));
    last = m.index + m[0].length;
  }
  parts.push(s.slice(last));
  return parts;
}

export function compileSplit(args: readonly Evaluator[], call: BoundCall): Evaluator {
  const [str, pattern] = asStrings(args.slice(0, 2), call.args.slice(0, 2).map((a) => a.type));
  const limit = args[2];
  const re = patternCache(pattern!, call, 1, (text) => compileJavaRegex(text, 'split', 'g'));
  return (row) => {
    const s = str!(row);
    if (s === null || s === undefined) return null;
    const r = re(row);
    if (r === null) return null;
    const n = limit ? limit(row) : -1;
    if (n === null || n === undefined) return null;
    return javaSplit(String(s), r, longToDouble(n as LongValue));
  };
}
