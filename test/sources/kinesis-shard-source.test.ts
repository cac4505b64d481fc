/**
 * KinesisShardSource column pruning: only the columns the query reads are decoded and checked, as
 * in the JSON memory stream, and the declared partition-key column is always checked.
 */
import { describe, expect, it } from 'vitest';
import { toSchema } from '../../lib/api/session.js';
import { KinesisShardSource, type ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { createRecordDecoder } from '../../lib/sources/record-decoder.js';

const SCHEMA = toSchema('a long, b long, k string');

let sequence = 1n;
function records(...events: { partitionKey?: string; data: Record<string, unknown> | string }[]): ShardRecord[] {
  return events.map((e) => ({
    sequenceNumber: String(sequence++ * 1_000_000_000_000n),
    partitionKey: e.partitionKey ?? 'p',
    dataBase64: Buffer.from(typeof e.data === 'string' ? e.data : JSON.stringify(e.data)).toString('base64'),
    approximateArrivalTimestampMs: 0,
  }));
}

function source(options: { columns?: readonly string[]; partitionKeyColumn?: string } = {}): KinesisShardSource {
  const s = new KinesisShardSource({
    name: 'kinesis', queryName: 'q', shardId: 'shard-0', schema: SCHEMA,
    decode: createRecordDecoder({ schema: '' }, SCHEMA), partitionKeyColumn: options.partitionKeyColumn,
  });
  if (options.columns) s.pruneColumns(options.columns);
  return s;
}

/** Rows and dead-letter reasons of everything offered. */
function read(s: KinesisShardSource): { rows: unknown[][]; dead: string[] } {
  const end = s.latestOffset()!;
  return { rows: s.getBatch(null, end), dead: s.deadLetters().map((d) => d.reason) };
}

const BAD_B = { data: { a: 1, b: 'not-a-number', k: 'p' } };

describe('KinesisShardSource column pruning', () => {
  it('without columns, a wrong type in any column dead-letters the record', () => {
    const s = source();
    s.offer(records(BAD_B));
    expect(read(s)).toEqual({ rows: [], dead: [expect.stringMatching(/field 'b'/)] });
  });

  it('with the columns given at construction, unread columns are NULL and not checked', () => {
    const s = source({ columns: ['a'] });
    s.offer(records(BAD_B, { data: { a: 'x' } }));
    expect(read(s)).toEqual({ rows: [[1, null, null]], dead: [expect.stringMatching(/field 'a'/)] });
    expect(s.numInvalidRecords(null, s.latestOffset()!)).toBe(1);
  });

  it('pruneColumns (the engine names the columns) re-decodes what is already buffered, and keeps the union', () => {
    const s = source();
    s.offer(records(BAD_B));
    s.pruneColumns(['A']);
    expect(read(s)).toEqual({ rows: [[1, null, null]], dead: [] });
    s.pruneColumns(['b']);
    expect(read(s)).toEqual({ rows: [], dead: [expect.stringMatching(/field 'b'/)] });
  });

  it('the declared partition-key column is decoded and checked even when the query does not read it', () => {
    const s = source({ columns: ['a'], partitionKeyColumn: 'k' });
    s.offer(records(
      { partitionKey: 'p', data: { a: 1, b: 'x', k: 'p' } },
      { partitionKey: 'p', data: { a: 2, k: 'other' } },
      { partitionKey: 'p', data: { a: 3, k: 7 } },
    ));
    const { rows, dead } = read(s);
    expect(rows).toEqual([[1, null, 'p']]);
    expect(dead).toEqual([expect.stringMatching(/does not match the declared partition-key column k="other"/), expect.stringMatching(/k="7"/)]);
  });

  it('a decoder without forColumns decodes every column', () => {
    const all = createRecordDecoder({ schema: '' }, SCHEMA);
    const s = new KinesisShardSource({ name: 'kinesis', queryName: 'q', shardId: 's', schema: SCHEMA, decode: (data) => all(data) });
    s.pruneColumns(['a']);
    s.offer(records(BAD_B));
    expect(read(s).dead).toHaveLength(1);
  });
});
