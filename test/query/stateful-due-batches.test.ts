import { describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import type { GroupState, GroupingKey, Row, StatefulProcessorHandle, ValueState } from '../../lib/plan/stateful-processor.js';
import { ManualClock } from '../../lib/runtime/clock.js';

/**
 * The deployed runtime runs a no-data batch on an idle shard only when something is due: a
 * processing-time timeout of [flat]mapGroupsWithState, or (deployed only) an expired TTL value of
 * transformWithState. What is due is read from the last commit entry (a cold container).
 */
const definitionOf = (transform: (df: DataFrame) => DataFrame) => defineQuery({
  name: 'due', source: { schema: 'user string' }, transform, outputMode: 'append', sink: { kind: 's3-files' },
});

let sequence = 1000n;
const records = (...users: string[]): ShardRecord[] => users.map((u) => ({
  sequenceNumber: String(sequence++ * 1_000_000_000_000_000n), partitionKey: u,
  dataBase64: Buffer.from(JSON.stringify({ user: u })).toString('base64'), approximateArrivalTimestampMs: 0,
}));

async function twoInvocations(transform: (df: DataFrame) => DataFrame, laterMs: number) {
  const clock = new ManualClock(1_000_000);
  const b = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter(), clock };
  // Each invocation compiles the query anew, as a cold container does.
  const invoke = (recs: ShardRecord[]) => runShardInvocation(compileQuery(definitionOf(transform), { expectedShardCount: 1 }),
    { shardId: 'shard-0', records: recs, scheduled: recs.length === 0 }, b);
  const data = await invoke(records('a', 'b'));
  expect(data.error).toBeUndefined();
  clock.advance(laterMs / 2);
  const early = await invoke([]);
  clock.advance(laterMs / 2);
  const due = await invoke([]);
  expect(due.error).toBeUndefined();
  return { early: early.progress, due: due.progress, sink: b.sink };
}

describe('no-data batches on an idle shard, deployed', () => {
  it('fire a flatMapGroupsWithState processing-time timeout', async () => {
    const fn = (key: GroupingKey, rows: readonly Row[], state: GroupState<number>): Row[] => {
      if (state.hasTimedOut()) { state.remove(); return [{ user: key[0], n: -1 }]; }
      state.update(rows.length);
      state.setTimeoutDuration(60_000);
      return [];
    };
    const { early, due, sink } = await twoInvocations((df) => df.groupByKey('user')
      .flatMapGroupsWithState(fn, { outputMode: 'append', timeout: 'processingTime', outputSchema: 'user string, n long' }), 120_000);
    expect(early).toEqual([]);
    expect(due).toHaveLength(1);
    expect(sink.allRows().map((r) => r.join(':')).sort()).toEqual(['a:-1', 'b:-1']);
  });

  it('evict transformWithState values whose TTL expired, with no timers at all', async () => {
    const processor = () => {
      let count!: ValueState<number>;
      return {
        init: (h: StatefulProcessorHandle) => { count = h.getValueState<number>('count', { ttl: 100_000 }); },
        handleInputRows: (key: GroupingKey, rows: readonly Row[]) => { count.update(rows.length); return [{ user: key[0], n: rows.length }]; },
      };
    };
    const { early, due } = await twoInvocations((df) => df.groupByKey('user')
      .transformWithState(processor, { timeMode: 'none', outputMode: 'append', outputSchema: 'user string, n long' }), 120_000);
    expect(early).toEqual([]);
    expect(due).toHaveLength(1);
    expect(due[0]!.numInputRows).toBe(0);
    expect(due[0]!.stateOperators[0]!.customMetrics.numValuesRemovedDueToTTLExpiry).toBe(2);
    expect(due[0]!.stateOperators[0]!.numRowsTotal).toBe(0);
  });
});
