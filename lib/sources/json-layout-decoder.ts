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

/** One member to read: how far its value starts after the previous value, what it is, where it goes. */
interface Step {
  /** `{"key":` or `,"key":`. */
  readonly skip: number;
  readonly kind: Kind;
  readonly slot: number;
}

/**
 * One record layout (its keys in order, compact): a regular expression that checks a whole record
 * has it, then a walk that reads the fields straight from their known places: no match object and
 * no substring per number.
 */
class Layout {
  private end = 0;

  private constructor(readonly keys: string, private readonly regex: RegExp, private readonly steps: readonly Step[], private readonly timestampScale: number) {}

  static of(keys: readonly string[], fields: readonly LayoutField[], timestampScale: number): Layout | null {
    const byName = new Map(fields.map((f) => [f.name, f]));
    const steps: Step[] = [];
    const members: string[] = [];
    let lastRead = -1;
    for (const [i, key] of keys.entries()) {
      const field = byName.get(key);
      const kind = field ? kindOf(field.type) : Kind.Unread;
      if (kind === null) return null;
      members.push(`"${escapeRegExp(key)}":${patternOf(kind)}`);
      steps.push({ skip: key.length + 4, kind, slot: field?.index ?? -1 });
      if (kind !== Kind.Unread) lastRead = i;
    }
    // Members after the last one read are checked by the regular expression only.
    return new Layout(keys.join('\u0000'), new RegExp(`^\\{${members.join(',')}\\}$`), steps.slice(0, lastRead + 1), timestampScale);
  }

  /** The record's fields into `row`: MATCHED; NO_MATCH (nothing written); UNDECIDED (the caller's decoder decides). */
  read(text: string, row: unknown[]): ReadResult {
    if (!this.regex.test(text)) return ReadResult.NoMatch;
    let p = 0;
    const { steps } = this;
    for (let s = 0; s < steps.length; s++) {
      const step = steps[s]!;
      p += step.skip;
      const c = text.charCodeAt(p);
      if (c === 0x6e /* null */) {
        p += 4;
        continue;
      }
      let v: unknown;
      switch (step.kind) {
        case Kind.Unread:
          p = c === 0x22 ? text.indexOf('"', p + 1) + 1 : c === 0x74 ? p + 4 : c === 0x66 ? p + 5 : this.skipNumber(text, p);
          continue;
        case Kind.String: {
          const end = text.indexOf('"', p + 1);
          v = end - p - 1 < SLICED_STRING_MIN ? text.slice(p + 1, end) : (JSON.parse(text.slice(p, end + 1)) as string);
          p = end + 1;
          break;
        }
        case Kind.Boolean:
          v = c === 0x74;
          p += v ? 4 : 5;
          break;
        case Kind.Timestamp:
          if (c === 0x22) {
            const end = text.indexOf('"', p + 1);
            v = parseTimestamp(text.slice(p + 1, end));
            if (v === null) return ReadResult.Undecided;
            p = end + 1;
            break;
          }
          v = Math.round(this.number(text, p) * this.timestampScale);
          if (!Number.isSafeInteger(v)) return ReadResult.Undecided;
          p = this.end;
          break;
        default: {
          const n = this.number(text, p);
          // A long beyond 2^53 (exact digits) and a double beyond its range (Infinity): the scanner decides.
          if (step.kind === Kind.Int ? !(Number.isInteger(n) && n >= INT_MIN && n <= INT_MAX) : step.kind === Kind.Long ? !Number.isSafeInteger(n) : !Number.isFinite(n)) {
            return ReadResult.Undecided;
          }
          v = n;
          p = this.end;
        }
      }
      row[step.slot] = v;
    }
    return ReadResult.Matched;
  }

  /** The JSON number at `i` (already checked), as JSON.parse reads it; its end goes to `this.end`. */
  private number(text: string, i: number): number {
    const start = i;
    let d = text.charCodeAt(i);
    const negative = d === 0x2d;
    if (negative) d = text.charCodeAt(++i);
    let mantissa = 0;
    let digits = 0;
    let fraction = 0;
    while (d >= 0x30 && d <= 0x39) {
      mantissa = mantissa * 10 + (d - 0x30);
      digits++;
      d = text.charCodeAt(++i);
    }
    if (d === 0x2e) {
      d = text.charCodeAt(++i);
      while (d >= 0x30 && d <= 0x39) {
        mantissa = mantissa * 10 + (d - 0x30);
        digits++;
        fraction++;
        d = text.charCodeAt(++i);
      }
    }
    let exact = digits <= 15;
    if (d === 0x65 || d === 0x45) {
      exact = false;
      i = this.skipNumber(text, i);
    }
    this.end = i;
    // Up to 15 digits over an exact power of ten is correctly rounded (Clinger); else Number().
    if (!exact) return Number(text.slice(start, i));
    const v = fraction === 0 ? mantissa : mantissa / POW10[fraction]!;
    return negative ? -v : v;
  }

  /** The end of the number (or its exponent) at `i`. */
  private skipNumber(text: string, i: number): number {
    let d = text.charCodeAt(i);
    while ((d >= 0x30 && d <= 0x39) || d === 0x2d || d === 0x2b || d === 0x2e || d === 0x65 || d === 0x45) d = text.charCodeAt(++i);
    return i;
  }
}

const enum ReadResult { Matched, NoMatch, Undecided }

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

  constructor(
    private readonly fields: readonly LayoutField[],
    private readonly width: number,
    private readonly timestampScale: number,
    private readonly maxLayouts = 8,
  ) {}

  /** The row of a record of a known layout, or null. */
  decode(text: string): unknown[] | null {
    const { layouts } = this;
    if (layouts.length === 0) return null;
    const row = new Array<unknown>(this.width);
    for (let k = 0; k < this.width; k++) row[k] = null;
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
