/**
 * The state store's values as JSON text, exact where JSON alone is not: `undefined` array elements,
 * non-finite numbers and -0 are tagged objects (`{"\u0000t": "u" | "NaN" | "Infinity" | "-Infinity" | "-0"}`),
 * a long beyond 2^53 `{"\u0000t": "n<digits>"}`, a decimal `{"\u0000t": "d<scale>:<unscaled>"}`, binary
 * `{"\u0000t": "b<base64>"}`, a map `{"\u0000t": "m", "e": [[key, value], ...]}` (see dynamodb-state-store.ts).
 */
import { Decimal } from '../core/decimal.js';

const TAG = '\u0000t';
const TAGGED_TEXT = JSON.stringify(TAG);

function needsTags(v: unknown): boolean {
  if (v === undefined || typeof v === 'bigint') return true;
  if (typeof v === 'number') return !Number.isFinite(v) || Object.is(v, -0);
  if (v === null || typeof v !== 'object') return false;
  if (v instanceof Decimal || v instanceof Uint8Array || v instanceof Map) return true;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (needsTags(v[i])) return true;
    return false;
  }
  for (const k in v) if (needsTags((v as Record<string, unknown>)[k])) return true;
  return false;
}

function tagReplacer(_key: string, v: unknown): unknown {
  if (v === undefined) return { [TAG]: 'u' };
  if (typeof v === 'bigint') return { [TAG]: `n${v}` }; // a long beyond 2^53 (lib/core/long.ts)
  if (v instanceof Decimal) return { [TAG]: `d${v.scale}:${v.unscaled}` };
  if (v instanceof Uint8Array) return { [TAG]: `b${Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64')}` };
  if (v instanceof Map) return { [TAG]: 'm', e: [...v.entries()] };
  if (typeof v === 'number') {
    if (Number.isNaN(v)) return { [TAG]: 'NaN' };
    if (v === Infinity) return { [TAG]: 'Infinity' };
    if (v === -Infinity) return { [TAG]: '-Infinity' };
    if (Object.is(v, -0)) return { [TAG]: '-0' };
  }
  return v;
}

const SPECIALS: Record<string, unknown> = { u: undefined, NaN: Number.NaN, Infinity: Infinity, '-Infinity': -Infinity, '-0': -0 };

function untag(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = untag(v[i]);
    return v;
  }
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  if (keys.length === 1 && keys[0] === TAG && typeof o[TAG] === 'string') {
    if (o[TAG] in SPECIALS) return SPECIALS[o[TAG]];
    if (/^n-?\d+$/.test(o[TAG])) return BigInt(o[TAG].slice(1));
    const decimal = /^d(\d+):(-?\d+)$/.exec(o[TAG]);
    if (decimal) return new Decimal(BigInt(decimal[2]!), Number(decimal[1]));
    if (o[TAG].startsWith('b')) return new Uint8Array(Buffer.from(o[TAG].slice(1), 'base64'));
  }
  if (keys.length === 2 && o[TAG] === 'm' && Array.isArray(o.e)) return new Map(untag(o.e) as [unknown, unknown][]);
  for (const k of keys) o[k] = untag(o[k]);
  return o;
}

/** JSON text of a payload, exact for undefined, NaN, ±Infinity and -0. */
export function encodeStateJson(payload: unknown, values: Iterable<unknown>): string {
  for (const v of values) if (needsTags(v)) return JSON.stringify(payload, tagReplacer);
  return JSON.stringify(payload);
}

export function decodeStateJson(text: string): unknown {
  const parsed: unknown = JSON.parse(text);
  return text.includes(TAGGED_TEXT) ? untag(parsed) : parsed;
}
