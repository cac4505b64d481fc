/**
 * A JSON reader that keeps what JSON.parse loses and Spark's Jackson parser keeps: whether a
 * number was written as an integer or with a fraction/exponent, and its exact digits (longs
 * beyond 2^53). Accepts single-quoted strings and NaN/Infinity, as Spark's JSON options do by
 * default (allowSingleQuotes, allowNonNumericNumbers). And a writer in Jackson's style.
 */
import { javaDoubleString } from './spark-values.js';

export type JsonNode =
  | { readonly k: 'object'; readonly entries: readonly (readonly [string, JsonNode])[] }
  | { readonly k: 'array'; readonly items: readonly JsonNode[] }
  | { readonly k: 'string'; readonly v: string }
  | { readonly k: 'number'; readonly raw: string; readonly integral: boolean }
  | { readonly k: 'boolean'; readonly v: boolean }
  | { readonly k: 'null' };

export class JsonSyntaxError extends Error {}

const ESCAPES: Record<string, string> = { '"': '"', "'": "'", '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

/** Parses the first JSON value of `text` (Jackson stops after it, so trailing text is ignored as in Spark). */
export function parseJson(text: string): JsonNode {
  let i = 0;
  const ws = (): void => { while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++; };
  const fail = (): never => { throw new JsonSyntaxError(`malformed JSON at ${i}`); };
  const str = (quote: string): string => {
    i++;
    let out = '';
    for (;;) {
      const c = text[i++];
      if (c === undefined) return fail();
      if (c === quote) return out;
      if (c === '\\') {
        const e = text[i++];
        if (e === 'u') {
          const hex = text.slice(i, i + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail();
          out += String.fromCharCode(parseInt(hex, 16));
          i += 4;
        } else if (e !== undefined && ESCAPES[e] !== undefined) out += ESCAPES[e];
        else fail();
      } else if (c < ' ') fail();
      else out += c;
    }
  };
  const value = (): JsonNode => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const entries: [string, JsonNode][] = [];
      ws();
      if (text[i] === '}') { i++; return { k: 'object', entries }; }
      for (;;) {
        ws();
        if (text[i] !== '"' && text[i] !== "'") fail();
        const key = str(text[i]!);
        ws();
        if (text[i++] !== ':') fail();
        entries.push([key, value()]);
        ws();
        const sep = text[i++];
        if (sep === '}') return { k: 'object', entries };
        if (sep !== ',') fail();
      }
    }
    if (c === '[') {
      i++;
      const items: JsonNode[] = [];
      ws();
      if (text[i] === ']') { i++; return { k: 'array', items }; }
      for (;;) {
        items.push(value());
        ws();
        const sep = text[i++];
        if (sep === ']') return { k: 'array', items };
        if (sep !== ',') fail();
      }
    }
    if (c === '"' || c === "'") return { k: 'string', v: str(c) };
    const rest = text.slice(i);
    const num = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(rest);
    if (num) {
      i += num[0].length;
      return { k: 'number', raw: num[0], integral: num[2] === undefined && num[3] === undefined };
    }
    for (const [word, node] of WORDS) {
      if (rest.startsWith(word)) { i += word.length; return node; }
    }
    return fail();
  };
  const v = value();
  return v;
}

const WORDS: readonly (readonly [string, JsonNode])[] = [
  ['true', { k: 'boolean', v: true }], ['false', { k: 'boolean', v: false }], ['null', { k: 'null' }],
  ['NaN', { k: 'number', raw: 'NaN', integral: false }], ['-Infinity', { k: 'number', raw: '-Infinity', integral: false }],
  ['Infinity', { k: 'number', raw: 'Infinity', integral: false }], ['+Infinity', { k: 'number', raw: 'Infinity', integral: false }],
];

/** A JSON string literal as Jackson writes it: control characters as \uXXXX (upper-case hex) unless they have a short escape. */
export function quoteJson(s: string): string {
  let out = '"';
  for (const c of s) {
    const code = c.charCodeAt(0);
    if (c === '"') out += '\\"';
    else if (c === '\\') out += '\\\\';
    else if (code < 0x20) {
      const short = ({ '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t' } as Record<string, string>)[c];
      out += short ?? `\\u${code.toString(16).toUpperCase().padStart(4, '0')}`;
    } else out += c;
  }
  return `${out}"`;
}

/** A number token as Jackson re-writes it: integers by their digits, the rest as Java doubles. */
export function numberText(node: Extract<JsonNode, { k: 'number' }>): string {
  if (node.integral) return BigInt(node.raw).toString();
  const d = Number(node.raw);
  return Number.isFinite(d) ? javaDoubleString(d) : `"${javaDoubleString(d)}"`;
}

/** Compact JSON text of a node (Jackson's generator, as get_json_object copies a value). */
export function writeJson(node: JsonNode): string {
  switch (node.k) {
    case 'object': return `{${node.entries.map(([k, v]) => `${quoteJson(k)}:${writeJson(v)}`).join(',')}}`;
    case 'array': return `[${node.items.map(writeJson).join(',')}]`;
    case 'string': return quoteJson(node.v);
    case 'number': return numberText(node);
    case 'boolean': return String(node.v);
    case 'null': return 'null';
  }
}
