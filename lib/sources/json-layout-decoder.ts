import type { DataType } from '../plan/data-types.js';
import { parseTimestamp } from '../core/timestamps.js';

/** A field the decoder reads: its name in the record, its position in the row, its type. */
export interface LayoutField {
  readonly name: string;
  readonly index: number;
  readonly type: DataType;
}

const STRING = '"[^"\\\\\\u0000-\\u001f]*"';
const NUMBER = '-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?';
const INT_MIN = -(2 ** 31);
const INT_MAX = 2 ** 31 - 1;
/** V8 keeps a substring of 13+ characters as a slice of its parent: a copy keeps no record alive. */
const SLICED_STRING_MIN = 13;
/** Exact powers of ten: at most 15 decimal digits divided by one is a correctly rounded double. */
const POW10 = Array.from({ length: 23 }, (_, k) => 10 ** k);

/** What a member's value may be, per the field's type; an unread member may be any flat value. */
const enum Kind { Unread, String, Double, Int, Long, Boolean, Timestamp }

function kindOf(type: DataType): Kind | null {
  switch (type) {
    case 'string': return Kind.String;
    case 'double': return Kind.Double;
    case 'int': return Kind.Int;
    case 'long': return Kind.Long;
    case 'boolean': return Kind.Boolean;
    case 'timestamp': return Kind.Timestamp;
    default: return null;
  }
}

function patternOf(kind: Kind): string {
  switch (kind) {
    case Kind.String: return `(?:${STRING}|null)`;
    case Kind.Double:
    case Kind.Int:
    case Kind.Long: return `(?:${NUMBER}|null)`;
    case Kind.Boolean: return '(?:true|false|null)';
    case Kind.Timestamp: return `(?:${STRING}|${NUMBER}|null)`;
    case Kind.Unread: return `(?:${STRING}|${NUMBER}|true|false|null)`;
  }
}

const escapeRegExp = (text: string): string => text.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');

/**
 * One record layout (its keys in order, compact): a regular expression that checks a whole record
 * has it, then a walk that reads the fields straight from their known places: no match object and
 * no substring per number. Per member read: how far its value starts after the previous value
 * (`{"key":` or `,"key":`), what it is, and its slot in the row, in flat typed arrays.
 */
class Layout {
  private readonly count: number;

  private constructor(
    readonly keys: string,
    private readonly regex: RegExp,
    private readonly skips: Int32Array,
    private readonly kinds: Uint8Array,
    private readonly slots: Int32Array,
    private readonly timestampScale: number,
  ) {
    this.count = skips.length;
  }

  static of(keys: readonly string[], fields: readonly LayoutField[], timestampScale: number): Layout | null {
    const byName = new Map(fields.map((f) => [f.name, f]));
    const members: string[] = [];
    const skips: number[] = [];
    const kinds: Kind[] = [];
    const slots: number[] = [];
    let lastRead = -1;
    for (const [i, key] of keys.entries()) {
      const field = byName.get(key);
      const kind = field ? kindOf(field.type) : Kind.Unread;
      if (kind === null) return null;
      members.push(`"${escapeRegExp(key)}":${patternOf(kind)}`);
      skips.push(key.length + 4);
      kinds.push(kind);
      slots.push(field?.index ?? -1);
      if (kind !== Kind.Unread) lastRead = i;
    }
    // Members after the last one read are checked by the regular expression only.
    const walked = lastRead + 1;
    return new Layout(keys.join('\u0000'), new RegExp(`^\\{${members.join(',')}\\}$`),
      Int32Array.from(skips.slice(0, walked)), Uint8Array.from(kinds.slice(0, walked)), Int32Array.from(slots.slice(0, walked)), timestampScale);
  }

  /** The record's fields into `row`: MATCHED; NO_MATCH (nothing written); UNDECIDED (the caller's decoder decides). */
  read(text: string, row: unknown[]): ReadResult {
    if (!this.regex.test(text)) return ReadResult.NoMatch;
    const { skips, kinds, slots, count } = this;
    let p = 0;
    for (let s = 0; s < count; s++) {
      p += skips[s]!;
      const c = text.charCodeAt(p);
      if (c === 0x6e /* null */) {
        p += 4;
        continue;
      }
      const kind = kinds[s]! as Kind;
      if (kind === Kind.String) {
        const end = text.indexOf('"', p + 1);
        row[slots[s]!] = end - p - 1 < SLICED_STRING_MIN ? text.slice(p + 1, end) : (JSON.parse(text.slice(p, end + 1)) as string);
        p = end + 1;
        continue;
      }
      if (c === 0x22 /* a string: an unread member's, or a timestamp's */) {
        const end = text.indexOf('"', p + 1);
        if (kind === Kind.Timestamp) {
          const micros = parseTimestamp(text.slice(p + 1, end));
          if (micros === null) return ReadResult.Undecided;
          row[slots[s]!] = micros;
        }
        p = end + 1;
        continue;
      }
      if (kind === Kind.Boolean || (kind === Kind.Unread && (c === 0x74 || c === 0x66))) {
        if (kind === Kind.Boolean) row[slots[s]!] = c === 0x74;
        p += c === 0x74 ? 4 : 5;
        continue;
      }
      // A number (the regular expression checked its grammar): its digits as one integer, then
      // the decimal point moved. Up to 15 digits over an exact power of ten is correctly rounded
      // (Clinger), as JSON.parse reads it; beyond, or with an exponent, Number() of its text.
      const start = p;
      let i = c === 0x2d ? p + 1 : p;
      let d = text.charCodeAt(i);
      let mantissa = 0;
      const integerStart = i;
      while (d >= 0x30 && d <= 0x39) {
        mantissa = mantissa * 10 + (d - 0x30);
        d = text.charCodeAt(++i);
      }
      let digits = i - integerStart;
      let fraction = 0;
      if (d === 0x2e) {
        const fractionStart = ++i;
        d = text.charCodeAt(i);
        while (d >= 0x30 && d <= 0x39) {
          mantissa = mantissa * 10 + (d - 0x30);
          d = text.charCodeAt(++i);
        }
        fraction = i - fractionStart;
        digits += fraction;
      }
      let exact = digits <= 15;
      if (d === 0x65 || d === 0x45) {
        exact = false;
        i = skipNumber(text, i);
      }
      p = i;
      if (kind === Kind.Unread) continue;
      let n: number;
      if (exact) {
        n = fraction === 0 ? mantissa : mantissa / POW10[fraction]!;
        if (c === 0x2d) n = -n;
      } else {
        n = Number(text.slice(start, i));
      }
      // A long beyond 2^53 (exact digits), a double beyond its range (Infinity), a time out of
      // range: the caller's decoder decides.
      switch (kind) {
        case Kind.Double:
          if (!Number.isFinite(n)) return ReadResult.Undecided;
          break;
        case Kind.Timestamp:
          n = Math.round(n * this.timestampScale);
          if (!Number.isSafeInteger(n)) return ReadResult.Undecided;
          break;
        case Kind.Long:
          if (!Number.isSafeInteger(n)) return ReadResult.Undecided;
          break;
        default:
          if (!(Number.isInteger(n) && n >= INT_MIN && n <= INT_MAX)) return ReadResult.Undecided;
      }
      row[slots[s]!] = n;
    }
    return ReadResult.Matched;
  }
}

/** The end of the number (or its exponent) at `i`. */
function skipNumber(text: string, i: number): number {
  let d = text.charCodeAt(i);
  while ((d >= 0x30 && d <= 0x39) || d === 0x2d || d === 0x2b || d === 0x2e || d === 0x65 || d === 0x45) d = text.charCodeAt(++i);
  return i;
}

const enum ReadResult { Matched, NoMatch, Undecided }

/**
 * A maker of rows of NULLs: an array literal up to eight columns, so that rows are packed arrays
 * (`new Array(n)` makes a holey one, whose every read downstream checks for a hole).
 */
export function nullRow(width: number): () => unknown[] {
  switch (width) {
    case 1: return () => [null];
    case 2: return () => [null, null];
    case 3: return () => [null, null, null];
    case 4: return () => [null, null, null, null];
    case 5: return () => [null, null, null, null, null];
    case 6: return () => [null, null, null, null, null, null];
    case 7: return () => [null, null, null, null, null, null, null];
    case 8: return () => [null, null, null, null, null, null, null, null];
    default: return () => {
      const row: unknown[] = [];
      for (let k = 0; k < width; k++) row.push(null);
      return row;
    };
  }
}

/**
 * The fast path of JSON decoding, for the usual stream: records of one producer repeat the same
 * keys in the same order, written compactly. Once the caller's decoder has read a record, its
 * layout becomes one regular expression that checks a whole record (JSON's grammar for flat
 * objects: no escapes, no nesting) in one native pass, after which the fields are read from their
 * known places; about twice as fast as JSON.parse. A record of another layout, or one the layout
 * cannot decide (an escape, whitespace, a nested value, a number out of range), goes to the
 * caller's decoder, which gives the same rows and the failure reasons.
 */
export class JsonLayoutCache {
  private readonly layouts: Layout[] = [];
  private compiled = 0;
  private hits = 0;

  /** A row of NULLs. */
  private readonly newRow: () => unknown[];

  constructor(
    private readonly fields: readonly LayoutField[],
    width: number,
    private readonly timestampScale: number,
    private readonly maxLayouts = 8,
  ) {
    this.newRow = nullRow(width);
  }

  /** The row of a record of a known layout, or null. */
  decode(text: string): unknown[] | null {
    const { layouts } = this;
    if (layouts.length === 0) return null;
    const row = this.newRow();
    for (let i = 0; i < layouts.length; i++) {
      const result = layouts[i]!.read(text, row);
      if (result === ReadResult.NoMatch) continue;
      if (result === ReadResult.Undecided) return null;
      this.hits++;
      if (i > 0) layouts.unshift(layouts.splice(i, 1)[0]!); // most recently used first
      return row;
    }
    return null;
  }

  /** Learns the layout of a record the caller decoded (its keys, in order). */
  learn(keys: readonly string[]): void {
    // Records too varied to repeat a layout: stop compiling (each costs a regular expression).
    if (this.compiled >= 32 && this.hits < this.compiled * 16) return;
    if (new Set(keys).size !== keys.length) return; // duplicate keys: JSON.parse keeps the last
    const id = keys.join('\u0000');
    if (this.layouts.some((l) => l.keys === id)) return;
    const layout = Layout.of(keys, this.fields, this.timestampScale);
    this.compiled++;
    if (layout === null) return;
    this.layouts.unshift(layout);
    if (this.layouts.length > this.maxLayouts) this.layouts.pop();
  }
}
