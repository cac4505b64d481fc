/**
 * Both writers of result-row dead letters (a row the sink refuses, a row raising above state) name
 * them so that the re-drives recognise them (isResultRowLetter) and never send them as source
 * records; a source record's letter, with a Kinesis sequence number, is not one.
 */
import { describe, expect, it } from 'vitest';
import { isResultRowLetter, MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import { internalStreamLetters } from '../../lib/sources/held-out-rows.js';
import { raisingRowDeadLetters, resultDeadLetters } from '../../lib/query/unwritable-rows.js';
import type { StructField } from '../../lib/plan/data-types.js';

const schema: StructField[] = [{ name: 'k', type: 'string' }, { name: 's', type: 'long' }];

describe('result-row dead letters', () => {
  it('are recognised whoever writes them, marked for an internal stream or not; a source record\'s letter is not', async () => {
    const memory = new MemoryDeadLetterWriter();
    for (const [writer, canWithhold] of [[memory, true], [internalStreamLetters(memory), false]] as const) {
      await resultDeadLetters('q', 'shardId-000000000000', writer, canWithhold)(
        { batchId: 3, columns: ['k', 's'], rows: [], outputMode: 'update', schema, partitionId: 'shardId-000000000000' },
        [{ row: ['x'.repeat(3000), 1n], refusal: { code: 'SINK_KEY_TOO_LONG', reason: 'key over 2048 bytes' }, rowKey: 'x' }],
      );
      await raisingRowDeadLetters('q', 'shardId-000000000000', writer)(4, [{ row: ['a', 0n], schema, reason: 'DIVIDE_BY_ZERO: division by zero' }]);
    }
    await memory.write([{
      queryName: 'q', shardId: 'shardId-000000000000', sequenceNumber: '49590338271490256608559692538361571095921575989136588898',
      partitionKey: 'a', approximateArrivalTimestampMs: 1, dataBase64: Buffer.from('{"k": "broken').toString('base64'), reason: 'bad JSON',
    }]);
    expect(memory.records.map((l) => [l.shardId, l.sequenceNumber.split('-').slice(0, 3).join('-'), isResultRowLetter(l)])).toEqual([
      ['shardId-000000000000', 'result-batch-3', true],
      ['shardId-000000000000', 'result-batch-4', true],
      ['shardId-000000000000@internal', 'result-batch-3', true],
      ['shardId-000000000000@internal', 'result-batch-4', true],
      ['shardId-000000000000', '49590338271490256608559692538361571095921575989136588898', false],
    ]);
  });
});
