import type { DataType } from '../plan/data-types.js';
import { parseTimestamp } from '../execution/values.js';

/** A field the decoder reads: its name in the record, its position in the row, its type. */
export interface LayoutField {
  readonly name: string;
  readonly index: number;
  readonly type: DataType;
}

const STRING_CONTENT = '[^"\\\\\\u0000-\\u001f]*';
const NUMBER = '-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?';
const ANY_VALUE = `(?:"${STRING_CONTENT}"|${NUMBER}|true|false|null)`;
const INT_MIN = -(2 ** 31);
const INT_MAX = 2 ** 31 - 1;
/** V8 keeps a substring of 13+ characters as a slice of its parent: a copy keeps no record alive. */
const SLICED_STRING_MIN = 13;
/** Fall back to the caller's decoder. */
const MISS = Symbol('miss');

type Capture = string | undefined;
type Reader = (capture: Capture) => unknown;

function readerFor(type: DataType, timestampScale: number): { pattern: string; read: Reader } | null {
  const number = (check: (v: number) => boolean): Reader => (c) => {
    if (c === 'null') return null;
    const v = Number(c);
    return check(v) ? v : MISS;
  };
  switch (type) {
    case 'string':
      return {
        pattern: `(?:"(${STRING_CONTENT})"|null)`,
        read: (c) => (c === undefined ? null : c.length < SLICED_STRING_MIN ? c : (JSON.parse(`"${c}"`) as string)),
      };
    case 'double':
      return { pattern: `(${NUMBER}|null)`, read: number(() => true) };
    case 'int':
      return { pattern: `(${NUMBER}|null)`, read: number((v) => Number.isInteger(v) && v >= INT_MIN && v <= INT_MAX) };
    case 'long':
      return { pattern: `(${NUMBER}|null)`, read: number((v) => Number.isSafeInteger(v)) };
    case 'boolean':
      return { pattern: '(true|false|null)', read: (c) => (c === 'null' ? null : c === 'true') };
    case 'timestamp':
      return {
        pattern: `("${STRING_CONTENT}"|${NUMBER}|null)`,
        read: (c) => {
          if (c === 'null') return null;
          if (c!.charCodeAt(0) === 0x22) return parseTimestamp(c!.slice(1, -1)) ?? MISS;
          const micros = Math.round(Number(c) * timestampScale);
          return Number.isSafeInteger(micros) ? micros : MISS;
        },
      };
    default:
      return null;
  }
}

const enum ReadResult { Matched, NoMatch, Undecided }

const escapeRegExp = (text: string): string => text.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');

/** One record layout (keys in order, compact): a regular expression that checks a record has it and captures the fields read. */
class Layout {
  private constructor(
    readonly keys: string,
    private readonly regex: RegExp,
    /** Per captured group: the row position and how to read it. */
    private readonly slots: readonly number[],
    private readonly readers: readonly Reader[],
  ) {}

  static of(keys: readonly string[], fields: readonly LayoutField[], timestampScale: number): Layout | null {
    const byName = new Map(fields.map((f) => [f.name, f]));
    const slots: number[] = [];
    const readers: Reader[] = [];
    const members = keys.map((key) => {
      const field = byName.get(key);
      const reader = field ? readerFor(field.type, timestampScale) : null;
      if (field && reader === null) return null;
      if (!field || !reader) return `"${escapeRegExp(key)}":${ANY_VALUE}`;
      slots.push(field.index);
      readers.push(reader.read);
      return `"${escapeRegExp(key)}":${reader.pattern}`;
    });
    if (members.includes(null)) return null;
    return new Layout(keys.join('\u0000'), new RegExp(`^\\{${members.join(',')}\\}$`), slots, readers);
  }

  /**
   * Writes the record's fields into `row`: MATCHED; NO_MATCH (nothing written) if the record does
   * not have this layout; UNDECIDED if it has but a value needs the caller's decoder.
   */
  read(text: string, row: unknown[]): ReadResult {
    const match = this.regex.exec(text);
    if (match === null) return ReadResult.NoMatch;
    const { slots, readers } = this;
    for (let g = 0; g < slots.length; g++) {
      const v = readers[g]!(match[g + 1]);
      if (v === MISS) return ReadResult.Undecided;
      row[slots[g]!] = v;
    }
    return ReadResult.Matched;
  }
}

/**
 * The fast path of JSON decoding, for the usual stream: records of one producer repeat the same
 * keys in the same order, written compactly. Once the caller's decoder has read a record, its
 * layout becomes one regular expression that checks a whole record (JSON's grammar for flat
 * objects: no escapes, no nesting) and captures the fields read, in one native pass; about twice
 * as fast as JSON.parse. A record of another layout, or one the regular expression cannot decide
 * (an escape, whitespace, a nested value, a number out of range), goes to the caller's decoder,
 * which gives the same rows and the failure reasons.
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
