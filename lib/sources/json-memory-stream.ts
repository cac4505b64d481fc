import type { StructField } from '../plan/data-types.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import { createJsonRowDecoder, type JsonDecoderOptions } from './json-decoder.js';
import type { MicroBatchStream, Offset } from './source.js';

let jsonMemoryStreamCount = 0;

export interface InvalidRecord {
  /** The offset (1-based `addData` call) the record arrived in. */
  readonly offset: number;
  readonly record: string;
  readonly reason: string;
}

export interface JsonMemoryStreamOptions {
  readonly name?: string;
  readonly numericTimestamps?: JsonDecoderOptions['numericTimestamps'];
}

/**
 * A MemoryStream of raw JSON records, decoded by the engine with the schema the way the Kinesis
 * source decodes its records: only the columns the query reads (column pruning), and a record that
 * does not fit the schema is kept aside with its reason (`invalidRecords`) instead of stopping the
 * query. Each `addData` call is one offset.
 */
export class JsonMemoryStream implements MicroBatchStream {
  readonly name: string;
  private readonly blocks: (readonly string[])[] = [];
  /** Per block, its undecodable records, once decoded. */
  private readonly invalidByBlock = new Map<number, InvalidRecord[]>();
  private decode: ((text: string) => unknown[] | string) | null = null;
  private columns: readonly string[] | undefined;

  constructor(readonly schema: readonly StructField[], private readonly options: JsonMemoryStreamOptions = {}) {
    this.name = options.name ?? `JsonMemoryStream[${jsonMemoryStreamCount++}]`;
  }

  /** Adds one batch of records; the records are kept as given (strings are immutable). */
  addData(records: readonly string[]): number {
    // Copied and checked in one loop (a callback per record cost as much as decoding a tenth of it).
    const block = new Array<string>(records.length);
    for (let i = 0; i < records.length; i++) {
      const record = records[i];
      if (typeof record !== 'string') {
        throw new IllegalArgumentError(`${this.name}.addData takes JSON text, but record ${i} is ${record === null ? 'null' : typeof record}.`, {
          code: 'JSON_RECORD_NOT_TEXT', hint: 'pass JSON.stringify(record), or use session.memoryStream(schema) for rows.',
        });
      }
      block[i] = record;
    }
    this.blocks.push(block);
    return this.blocks.length;
  }

  /** Every query started on this stream names its columns: it decodes the union of them. */
  pruneColumns(columns: readonly string[]): void {
    const union = new Set([...(this.columns ?? []), ...columns]);
    if (this.columns !== undefined && union.size === this.columns.length) return;
    this.columns = [...union];
    this.decode = null;
  }

  initialOffset(): Offset | null {
    return null;
  }

  latestOffset(): Offset | null {
    return this.blocks.length === 0 ? null : this.blocks.length;
  }

  getBatch(start: Offset | null, end: Offset): unknown[][] {
    const decode = (this.decode ??= createJsonRowDecoder(this.schema, { numericTimestamps: this.options.numericTimestamps, onlyFields: this.columns }));
    const rows: unknown[][] = [];
    for (let b = start === null ? 0 : (start as number); b < (end as number); b++) {
      const invalid: InvalidRecord[] = [];
      for (const record of this.blocks[b]!) {
        const decoded = decode(record);
        if (typeof decoded === 'string') invalid.push({ offset: b + 1, record, reason: decoded });
        else rows.push(decoded);
      }
      this.invalidByBlock.set(b, invalid);
    }
    return rows;
  }

  numInvalidRecords(start: Offset | null, end: Offset): number {
    let n = 0;
    for (let b = start === null ? 0 : (start as number); b < (end as number); b++) n += this.invalidByBlock.get(b)?.length ?? 0;
    return n;
  }

  /** The records that could not be decoded so far, with why. */
  get invalidRecords(): InvalidRecord[] {
    return [...this.invalidByBlock.keys()].sort((a, b) => a - b).flatMap((b) => this.invalidByBlock.get(b)!);
  }

  commit(): void {
    // Kept for replays after a restart, as MemoryStream.
  }
}
