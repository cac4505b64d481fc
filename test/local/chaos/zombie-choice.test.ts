/**
 * Where an upsert sink's zombie freezes: at a batch the fault-free run says a newer batch
 * overwrites (one of its rows is not its key's final row), so its late write can show a missing
 * sink fence; late in the run, or with nothing to go by, wherever it strikes.
 */
import { describe, expect, it } from 'vitest';
import { marshall } from '@aws-sdk/util-dynamodb';
import { SinkHistory } from '../../../lib/local/chaos/history.js';
import { zombieChoiceFrom } from '../../../lib/local/chaos/zombie-choice.js';
import type { SinkBatch } from '../../../lib/sinks/sink.js';

const schema = [
  { name: 'store_id', dataType: 'string', nullable: true },
  { name: 'sales', dataType: 'double', nullable: true },
] as unknown as SinkBatch['schema'];
const batch = (batchId: number, rows: [string, number][]): SinkBatch => ({
  batchId, partitionId: 'shard-0', columns: ['store_id', 'sales'], outputMode: 'update', schema, rows,
});

describe('zombie choice', () => {
  // The fault-free run: a = 1 then 3 (final), b = 2 (final at once).
  const faultFree = new SinkHistory(['store_id'], '');
  faultFree.dynamoDbWrite(marshall({ pk: 'a', _partition: 'shard-0', _batchId: 0, store_id: 'a', sales: 1 }));
  faultFree.dynamoDbWrite(marshall({ pk: 'b', _partition: 'shard-0', _batchId: 0, store_id: 'b', sales: 2 }));
  faultFree.dynamoDbWrite(marshall({ pk: 'a', _partition: 'shard-0', _batchId: 1, store_id: 'a', sales: 3 }));
  const choose = zombieChoiceFrom(faultFree, 20)!;

  it('freezes at a batch one of whose rows a newer batch replaces; not at one whose rows are all final', () => {
    expect(choose(batch(0, [['a', 1], ['b', 2]]), 3)).toBe(true);
    expect(choose(batch(1, [['a', 3]]), 3)).toBe(false);
    expect(choose(batch(0, [['b', 2]]), 3)).toBe(false);
  });

  it('late in the run, or with keys the sink never held (stage 1 writing an internal stream), wherever it strikes', () => {
    expect(choose(batch(1, [['a', 3]]), 17)).toBe(true);
    expect(choose(batch(0, [['zz', 9]]), 3)).toBe(true);
  });

  it('an S3 sink overwrites no key: no choice', () => {
    expect(zombieChoiceFrom(new SinkHistory(['store_id'], 'prefix/'), 20)).toBeUndefined();
  });
});
