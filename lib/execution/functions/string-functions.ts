import type { ScalarFunctionImplementation, Evaluator } from './implementation.js';
import { nullIntolerant } from './implementation.js';
import { asStrings, sparkString } from './spark-values.js';
import { codePointLength, codePoints, indexOfCodePoints, sliceCodePoints } from './code-points.js';
import { IllegalArgumentError } from '../../errors/sluice-error.js';
import { longToDouble, type LongValue } from '../../core/long.js';
import type { DataType } from '../../plan/data-types.js';

/** A function of non-NULL arguments, string parameters implicitly cast (numbers as Spark writes them). */
function stringFunction(name: string, f: (values: unknown[]) => unknown): ScalarFunctionImplementation {
  return { name, compile: (args, call) => nullIntolerant(asStringsExceptInts(args, call.args.map((a) => a.type)), f) };
}

function asStringsExceptInts(args: readonly Evaluator[], types: readonly DataType[]): Evaluator[] {
  const strings = asStrings(args, types);
  return args.map((a, i) => (types[i] === 'int' || types[i] === 'long' ? a : strings[i]!));
}

const int = (v: unknown): number => longToDouble(v as LongValue);

/** Spark's trim family removes the characters of `trimStr` (default: the space, U+0020, only). */
function trimmer(name: string, left: boolean, right: boolean): ScalarFunctionImplementation {
  return stringFunction(name, ([s, chars]) => {
    const set = new Set(codePoints(chars === undefined ? ' ' : String(chars)));
    const cps = codePoints(String(s));
    let start = 0;
    let end = cps.length;
    if (left) while (start < end && set.has(cps[start]!)) start++;
    if (right) while (end > start && set.has(cps[end - 1]!)) end--;
    return cps.slice(start, end).join('');
  });
}

/** lpad/rpad: pad to `len` code points with `pad` repeated; a longer string (or an empty pad) is cut to `len`. */
function padder(name: string, leftSide: boolean): ScalarFunctionImplementation {
  return stringFunction(name, ([s, lenValue, padValue]) => {
    const len = int(lenValue);
    const cps = codePoints(String(s));
    const pad = codePoints(padValue === undefined ? ' ' : String(padValue));
    if (len <= 0) return '';
    if (cps.length >= len || pad.length === 0) return cps.slice(0, len).join('');
    const fill: string[] = [];
    for (let i = 0; fill.length < len - cps.length; i++) fill.push(pad[i % pad.length]!);
    return leftSide ? fill.join('') + cps.join('') : cps.join('') + fill.join('');
  });
}

/** locate(substr, str[, pos]): 1-based, 0 when absent or when pos < 1. */
function locate(name: string): ScalarFunctionImplementation {
  return {
    name,
    compile: (args, call) => {
      const [sub, str, pos] = asStringsExceptInts(args, call.args.map((a) => a.type));
      return (row) => {
        const p = pos ? pos(row) : 1;
        // Spark's StringLocate: a NULL position gives 0, not NULL.
        if (p === null || p === undefined) return 0;
        const needle = sub!(row);
        if (needle === null || needle === undefined) return null;
        const s = str!(row);
        if (s === null || s === undefined) return null;
        const start = int(p);
        if (start < 1) return 0;
        // UTF8String.indexOf: an empty needle is found at the start, whatever the position.
        if (needle === '') return 1;
        return indexOfCodePoints(String(s), String(needle), start - 1) + 1;
      };
    },
  };
}

/** Spark's initcap: lower case, then each word's first letter in title case; words split at spaces. */
function initcap(s: string): string {
  return s.toLowerCase().split(' ').map((w) => {
    const first = w.codePointAt(0);
    if (first === undefined) return w;
    const head = String.fromCodePoint(first);
    return head.toUpperCase() + w.slice(head.length);
  }).join(' ');
}

function translate(s: string, matching: string, replacement: string): string {
  const map = new Map<string, string | null>();
  const repl = codePoints(replacement);
  codePoints(matching).forEach((c, i) => { if (!map.has(c)) map.set(c, repl[i] ?? null); });
  let out = '';
  for (const c of codePoints(s)) {
    const m = map.get(c);
    if (m === undefined) out += c;
    else if (m !== null) out += m;
  }
  return out;
}

function substringIndex(s: string, delim: string, count: number): string {
  if (count === 0 || delim === '') return '';
  const parts = s.split(delim);
  if (count > 0) return parts.slice(0, count).join(delim);
  return parts.slice(Math.max(0, parts.length + count)).join(delim);
}

function splitPart(s: string, delim: string, part: number): string {
  if (part === 0) {
    throw new IllegalArgumentError('[INVALID_INDEX_OF_ZERO] The index 0 is invalid. An index shall be either < 0 or > 0 (the first element has index 1). SQLSTATE: 22003', { code: 'INVALID_INDEX_OF_ZERO', errorClass: 'INVALID_INDEX_OF_ZERO' });
  }
  const parts = delim === '' ? [s] : s.split(delim);
  const i = part > 0 ? part - 1 : parts.length + part;
  return parts[i] ?? '';
}

function levenshtein(a: string, b: string): number {
  const x = codePoints(a);
  const y = codePoints(b);
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const cur = [i];
    for (let j = 1; j <= y.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (x[i - 1] === y[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[y.length]!;
}

const utf8Length = (s: string): number => Buffer.byteLength(s, 'utf8');

/** String functions (signatures: lib/plan/function-catalog/string-signatures.ts). */
export const STRING_FUNCTIONS: readonly ScalarFunctionImplementation[] = [
  {
    // Spark's concat_ws: NULL separator gives NULL; NULL values (and NULL array elements) are skipped.
    name: 'concat_ws',
    compile: (args, call) => {
      const [separator, ...values] = args;
      const types = call.args.slice(1).map((a) => a.type);
      const text = types.map((t) => (v: unknown): string => sparkString(v, typeof t === 'object' && t.kind === 'array' ? t.element : t));
      return (row) => {
      const sep = separator!(row);
      if (sep === null) return null;
      const parts: string[] = [];
      values.forEach((value, i) => {
        const v = value(row);
        if (v === null || v === undefined) return;
        if (Array.isArray(v)) for (const x of v) { if (x !== null && x !== undefined) parts.push(text[i]!(x)); }
        else parts.push(text[i]!(v));
      });
      return parts.join(String(sep));
      };
    },
  },
  trimmer('ltrim', true, false),
  trimmer('rtrim', false, true),
  trimmer('btrim', true, true),
  padder('lpad', true),
  padder('rpad', false),
  stringFunction('instr', ([s, sub]) => indexOfCodePoints(String(s), String(sub)) + 1),
  locate('locate'),
  locate('position'),
  // Spark's StringReplace: an empty search string leaves the input as it is.
  stringFunction('replace', ([s, search, rep]) => (search === '' ? s : String(s).split(String(search)).join(rep === undefined ? '' : String(rep)))),
  {
    name: 'reverse',
    compile: (args, call) => {
      if (typeof call.type === 'object') return nullIntolerant(args, ([a]) => [...(a as unknown[])].reverse());
      return nullIntolerant(asStrings(args, call.args.map((a) => a.type)), ([s]) => codePoints(String(s)).reverse().join(''));
    },
  },
  stringFunction('initcap', ([s]) => initcap(String(s))),
  stringFunction('repeat', ([s, n]) => (int(n) <= 0 ? '' : String(s).repeat(int(n)))),
  stringFunction('translate', ([s, m, r]) => translate(String(s), String(m), String(r))),
  stringFunction('substring_index', ([s, d, n]) => substringIndex(String(s), String(d), int(n))),
  stringFunction('left', ([s, n]) => (int(n) <= 0 ? '' : sliceCodePoints(String(s), 0, int(n)))),
  stringFunction('right', ([s, n]) => {
    const len = int(n);
    if (len <= 0) return '';
    const cps = codePoints(String(s));
    return cps.slice(Math.max(0, cps.length - len)).join('');
  }),
  stringFunction('ascii', ([s]) => String(s).codePointAt(0) ?? 0),
  // Spark's Chr: negative gives '', otherwise the code (mod 256) as one character.
  stringFunction('chr', ([n]) => (int(n) < 0 ? '' : String.fromCharCode(int(n) & 0xff))),
  stringFunction('char', ([n]) => (int(n) < 0 ? '' : String.fromCharCode(int(n) & 0xff))),
  stringFunction('startswith', ([s, p]) => String(s).startsWith(String(p))),
  stringFunction('endswith', ([s, p]) => String(s).endsWith(String(p))),
  stringFunction('contains', ([s, p]) => String(s).includes(String(p))),
  stringFunction('split_part', ([s, d, n]) => splitPart(String(s), String(d), int(n))),
  stringFunction('ucase', ([s]) => String(s).toUpperCase()),
  stringFunction('lcase', ([s]) => String(s).toLowerCase()),
  stringFunction('char_length', ([s]) => codePointLength(String(s))),
  stringFunction('character_length', ([s]) => codePointLength(String(s))),
  stringFunction('octet_length', ([s]) => utf8Length(String(s))),
  stringFunction('bit_length', ([s]) => utf8Length(String(s)) * 8),
  stringFunction('space', ([n]) => (int(n) <= 0 ? '' : ' '.repeat(int(n)))),
  stringFunction('levenshtein', ([a, b]) => levenshtein(String(a), String(b))),
];
