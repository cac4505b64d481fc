/** `sluice dev --input` reads bytes: what becomes a record, what is reported, what is skipped. */
import { describe, expect, it } from 'vitest';
import { KINESIS_MAX_RECORD_BYTES, recordsFromInputBytes } from '../../../lib/local/dev/input-file.js';
import type { KinesisSourceSpec } from '../../../lib/query/query-definition.js';

const source: KinesisSourceSpec = { format: 'json', schema: 'store_id string, amount double', partitionKey: 'store_id' };
const event = (store: string, amount = 1): string => JSON.stringify({ store_id: store, amount });

describe('recordsFromInputBytes', () => {
  it('keeps a line that is not valid UTF-8 byte for byte (the decoder dead-letters it), and says so', () => {
    const invalid = Buffer.from([0x7b, 0x22, 0x73, 0xff, 0xfe, 0x22, 0x7d]); // {"s\xff\xfe"}
    const file = Buffer.concat([Buffer.from(`${event('north')}\n`), invalid, Buffer.from(`\n${event('south')}\n`)]);
    const { records, notes } = recordsFromInputBytes(file, source);
    expect(records.map((r) => r.line)).toEqual([1, 2, 3]);
    expect(records[1]!.data.equals(invalid)).toBe(true);
    expect(notes).toEqual(['1 line is not valid UTF-8; put as they are (the decoder dead-letters them)']);
  });

  it('removes a byte-order mark and reports it: the first record keeps its declared partition key', () => {
    const file = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(`${event('north')}\n${event('south')}\n`)]);
    const { records, notes } = recordsFromInputBytes(file, source);
    expect(records.map((r) => r.partitionKey)).toEqual(['north', 'south']);
    expect(records[0]!.data.toString('utf8')).toBe(event('north'));
    expect(notes).toEqual(['the file starts with a UTF-8 byte-order mark; it was removed (it is not part of the first record)']);
  });

  it('reports the CRs of CR LF line ends and the blank lines it skips', () => {
    const { records, notes } = recordsFromInputBytes(Buffer.from(`${event('a')}\r\n\r\n   \n${event('b')}\r\n`), source);
    expect(records.map((r) => r.data.toString('utf8'))).toEqual([event('a'), event('b')]);
    expect(notes).toEqual(['3 lines ended in CR LF; the CR was removed', '2 blank lines were skipped']);
  });

  it('skips and reports a record over Kinesis\'s 1 MiB limit (with its key) and a partition key over 256 characters', () => {
    const big = JSON.stringify({ store_id: 'north', amount: 1, note: 'x'.repeat(KINESIS_MAX_RECORD_BYTES) });
    const file = Buffer.from([event('a'), big, event('k'.repeat(300)), event('b')].join('\n'));
    const { records, skipped, notes } = recordsFromInputBytes(file, source);
    expect(records.map((r) => r.line)).toEqual([1, 4]);
    expect(skipped).toEqual([
      { line: 2, reason: `${big.length + 5} bytes with its partition key, over Kinesis's 1048576-byte (1 MiB) record limit` },
      { line: 3, reason: 'its partition key (store_id) has 300 characters, over Kinesis\'s 256' },
    ]);
    expect(notes.filter((n) => n.startsWith('line '))).toHaveLength(2);
  });

  it('an exactly 1 MiB record (data plus key) is put', () => {
    const keyless: KinesisSourceSpec = { format: 'json', schema: 'note string' };
    const { records } = recordsFromInputBytes(Buffer.from('x'.repeat(KINESIS_MAX_RECORD_BYTES - 36)), keyless);
    expect(records).toHaveLength(1);
    expect(records[0]!.data.length + Buffer.byteLength(records[0]!.partitionKey)).toBeLessThanOrEqual(KINESIS_MAX_RECORD_BYTES);
  });

  it('puts the records after a #wave marker in the next wave, and says how many waves there are', () => {
    const { records, notes } = recordsFromInputBytes(Buffer.from([event('a'), '#wave', event('b'), event('c'), '  # Wave ', event('d')].join('\n')), source);
    expect(records.map((r) => [r.line, r.wave])).toEqual([[1, 1], [3, 2], [4, 2], [6, 3]]);
    expect(notes).toEqual(['2 #wave markers: 3 waves, each put once the one before is processed']);
  });

  it('takes a line\'s own partition key from a key TAB record prefix, and refuses one that contradicts the declared column', () => {
    const unkeyed: KinesisSourceSpec = { format: 'json', schema: 'store_id string, amount double' };
    const file = Buffer.from([`k1\t${event('a')}`, event('b'), `north\t${event('north')}`].join('\n'));
    const own = recordsFromInputBytes(file, unkeyed, 7);
    expect(own.records.map((r) => r.data.toString('utf8'))).toEqual([event('a'), event('b'), event('north')]);
    expect(own.records[0]!.partitionKey).toBe('k1');
    expect(own.records[1]!.partitionKey).toMatch(/^pk-[0-9a-f]{8}$/);
    expect(own.records[2]!.partitionKey).toBe('north');
    expect(own.notes).toEqual(['2 lines give their own partition key (key TAB record)']);

    const declared = recordsFromInputBytes(file, source);
    expect(declared.records.map((r) => [r.line, r.partitionKey])).toEqual([[2, 'b'], [3, 'north']]);
    expect(declared.skipped).toEqual([{ line: 1, reason: "its key prefix 'k1' differs from its store_id 'a' (the query relies on records being keyed by store_id)" }]);
  });

  it('reads no key prefix in a CSV source (a TAB may be data there)', () => {
    const csv: KinesisSourceSpec = { format: 'csv', schema: 'store_id string, amount double' };
    const { records } = recordsFromInputBytes(Buffer.from('k1\t{"x":1}\n'), csv);
    expect(records[0]!.data.toString('utf8')).toBe('k1\t{"x":1}');
  });
});
