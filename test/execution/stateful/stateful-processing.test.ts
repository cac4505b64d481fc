import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../../lib/api/session.js';
import type { DataFrame } from '../../../lib/api/data-frame.js';
import { MemoryCheckpoint } from '../../../lib/checkpoint/memory-checkpoint.js';
import { MemorySink } from '../../../lib/sinks/memory-sink.js';
import { ManualClock } from '../../../lib/runtime/clock.js';
import { Trigger } from '../../../lib/runtime/trigger.js';
import type { Checkpoint } from '../../../lib/checkpoint/checkpoint.js';
import type {
  FlatMapGroupsWithStateFunction, GroupingKey, Row, StatefulProcessor, StatefulProcessorHandle, StateVariableOptions, ValueState,
} from '../../../lib/plan/stateful-processor.js';
import { keyValueMode } from '../../conformance/state-modes.js';
import { DIFF_PROCESSORS } from '../../spark-diff/diff-processors.js';

/** A processor that stores what `value(rows)` returns in one value state and emits it. */
function storing(value: (rows: readonly Row[]) => unknown, options: StateVariableOptions = {}, name = 'v'): () => StatefulProcessor {
  return () => {
    let state!: ValueState<unknown>;
    return {
      init: (handle: StatefulProcessorHandle) => { state = handle.getValueState(name, options); },
      handleInputRows: (key: GroupingKey, rows: readonly Row[]) => {
        const previous = state.get();
        state.update(value(rows));
        return [{ key: key[0], previous: previous === undefined ? null : JSON.stringify(previous, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)) }];
      },
    };
  };
}

function stream() {
  return new SluiceSession().memoryStream('key string, n long', 'events');
}

async function run(df: DataFrame, checkpoint: Checkpoint, add: () => void, mode: 'append' | 'update' = 'update') {
  const sink = new MemorySink();
  const q = await df.writeStream.outputMode(mode).sink(sink).checkpoint(checkpoint).start();
  add();
  await q.processAllAvailable();
  await q.stop();
  return sink.allRows();
}

async function failure(df: DataFrame, add: () => void, mode: 'append' | 'update' = 'update'): Promise<Error> {
  const sink = new MemorySink();
  const q = await df.writeStream.outputMode(mode).sink(sink).start();
  add();
  const error = await q.processAllAvailable().then(() => null, (e: unknown) => e as Error);
  await q.stop().catch(() => undefined);
  if (!error) throw new Error('expected the query to fail');
  return error;
}

const tws = (df: DataFrame, processor: () => StatefulProcessor, timeMode: 'none' | 'processingTime' = 'none') =>
  df.groupByKey('key').transformWithState(processor, { outputSchema: 'key string, previous string', timeMode, outputMode: 'update' });

describe('transformWithState state values', () => {
  it('keeps a long beyond 2^53 exactly in the DynamoDB store layout, across a restart', async () => {
    const cp = keyValueMode().checkpointFor(new MemoryCheckpoint('exact'));
    const big = 2n ** 60n + 1n;
    const { stream: s1, df: df1 } = stream();
    await run(tws(df1, storing(() => ({ total: big }), { schema: 'struct<total:long>' })), cp, () => s1.addData([['a', 1]]));
    const { stream: s2, df: df2 } = stream();
    // The restarted stream replays the committed row (offset 0) and adds one.
    const rows = await run(tws(df2, storing(() => ({ total: 1 }), { schema: 'struct<total:long>' })), cp, () => {
      s2.addData([['a', 1]]);
      s2.addData([['a', 2]]);
    });
    expect(rows).toEqual([['a', `{"total":"${big}n"}`]]);
  });

  it('refuses a value the store cannot write as JSON, and one not of the declared type', async () => {
    const { stream: s1, df: df1 } = stream();
    expect((await failure(tws(df1, storing(() => new Map())), () => s1.addData([['a', 1]]))).message).toMatch(/cannot be stored: v is a Map/);
    const { stream: s2, df: df2 } = stream();
    expect((await failure(tws(df2, storing(() => 1.5, { schema: 'long' })), () => s2.addData([['a', 1]]))).message).toMatch(/v = 1.5 is not a long/);
    const { stream: s3, df: df3 } = stream();
    expect((await failure(tws(df3, storing(() => null)), () => s3.addData([['a', 1]]))).message).toContain('[ILLEGAL_STATE_STORE_VALUE.NULL_VALUE]');
  });

  it('a state value the user mutates after update() or get() does not change the state', async () => {
    const shared = { count: 1 };
    const { stream: s, df } = stream();
    const sink = new MemorySink();
    const q = await tws(df, storing(() => { shared.count++; return shared; })).writeStream.outputMode('update').sink(sink).start();
    s.addData([['a', 1]]);
    await q.processAllAvailable();
    s.addData([['a', 2]]);
    await q.processAllAvailable();
    await q.stop();
    expect(sink.allRows()).toEqual([['a', null], ['a', '{"count":2}']]);
  });

  it('refuses a changed state variable against the checkpoint on restart', async () => {
    const cp = new MemoryCheckpoint('schema');
    const { stream: s1, df: df1 } = stream();
    await run(tws(df1, storing(() => 1, { schema: 'long' }, 'count')), cp, () => s1.addData([['a', 1]]));
    const { df: df2 } = stream();
    const changed = tws(df2, storing(() => 'x', { schema: 'string' }, 'count'));
    await expect(changed.writeStream.outputMode('update').sink(new MemorySink()).checkpoint(cp).start())
      .rejects.toThrow(/not compatible with its checkpoint: .*vars changed from \[count:value<long>\] to \[count:value<string>\]/);
  });
});

describe('state schema against the checkpoint on restart', () => {
  const restart = async (first: (df: DataFrame) => DataFrame, second: (df: DataFrame) => DataFrame): Promise<unknown> => {
    const cp = new MemoryCheckpoint('schema');
    const { stream: s1, df: df1 } = stream();
    await run(first(df1), cp, () => s1.addData([['a', 1]]));
    const { df: df2 } = stream();
    return second(df2).writeStream.outputMode('update').sink(new MemorySink()).checkpoint(cp).start()
      .then(async (q) => { await q.stop(); return 'started'; }, (e: unknown) => e);
  };

  it('transformWithState: a changed TTL is refused, the same layout restarts', async () => {
    const withTtl = (ttl: string) => (df: DataFrame) => tws(df, storing(() => 1, { schema: 'long', ttl }, 'count'));
    expect(String(await restart(withTtl('1 hour'), withTtl('2 hours')))).toMatch(/vars changed from \[count:value<long;ttl=3600000>\] to \[count:value<long;ttl=7200000>\]/);
    expect(await restart(withTtl('1 hour'), withTtl('1 hour'))).toBe('started');
  });

  it('flatMapGroupsWithState: a changed state type or timeout is refused', async () => {
    const fmgws = (stateSchema: string, timeout: 'none' | 'processingTime' = 'none') => (df: DataFrame) => df.groupByKey('key')
      .flatMapGroupsWithState(((key: GroupingKey) => [{ key: key[0], previous: null }]) as FlatMapGroupsWithStateFunction<unknown>,
        { outputMode: 'update', timeout, stateSchema, outputSchema: 'key string, previous string' });
    expect(String(await restart(fmgws('long'), fmgws('string')))).toMatch(/not compatible with its checkpoint: .*state changed from long to string/);
    expect(String(await restart(fmgws('long'), fmgws('long', 'processingTime')))).toMatch(/timeout changed from none to processingTime/);
    expect(await restart(fmgws('long'), fmgws('long'))).toBe('started');
  });
});

describe('transformWithState handle rules (Spark error classes)', () => {
  it('refuses timers without a time mode, duplicate variables and rows outside the output schema', async () => {
    const timer = (): StatefulProcessor => {
      let handle!: StatefulProcessorHandle;
      return { init: (h) => { handle = h; }, handleInputRows: () => { handle.registerTimer(1); return []; } };
    };
    const { stream: s1, df: df1 } = stream();
    expect((await failure(tws(df1, timer), () => s1.addData([['a', 1]]))).message)
      .toContain('[STATEFUL_PROCESSOR_CANNOT_PERFORM_OPERATION_WITH_INVALID_TIME_MODE] Failed to perform stateful processor operation=register_timer with invalid timeMode=NoTime');
    const { df: df2 } = stream();
    const twice = (): StatefulProcessor => ({ init: (h) => { h.getValueState('x'); h.getListState('x'); }, handleInputRows: () => [] });
    await expect(tws(df2, twice).writeStream.outputMode('update').sink(new MemorySink()).start()).rejects.toThrow(/STATEFUL_PROCESSOR_DUPLICATE_STATE_VARIABLE_DEFINED/);
    const { stream: s3, df: df3 } = stream();
    const wrong = (): StatefulProcessor => ({ init: () => undefined, handleInputRows: (key) => [{ key: key[0], previous: 5 }] });
    expect((await failure(tws(df3, wrong), () => s3.addData([['a', 1]]))).message).toMatch(/previous = 5 is not a string/);
  });
});

describe('no-data batches for processing-time timers', () => {
  it('run only when a timer is due (Spark runs one every trigger)', async () => {
    const clock = new ManualClock(0);
    const { stream: s, df } = stream();
    const processor = (): StatefulProcessor => {
      let handle!: StatefulProcessorHandle;
      return {
        init: (h) => { handle = h; },
        handleInputRows: (_key, _rows, t) => { handle.registerTimer(t.getCurrentProcessingTimeInMs() + 10_000); return []; },
        handleExpiredTimer: (key, t, info) => [{ key: key[0], previous: `fired ${info.getExpiryTimeInMs()} at ${t.getCurrentProcessingTimeInMs()}` }],
      };
    };
    const sink = new MemorySink();
    const q = await tws(df, processor, 'processingTime').writeStream.outputMode('update').sink(sink).trigger(Trigger.ProcessingTime(1000)).clock(clock).start();
    s.addData([['a', 1]]);
    clock.advance(1000);
    await q.runDueTriggers();
    // Up to 10000, before the timer's time: no batch.
    for (let i = 0; i < 9; i++) {
      clock.advance(1000);
      await q.runDueTriggers();
    }
    expect(q.lastProgress?.batchId).toBe(0);
    // Spark 4.0.1 fires a timer in the batch at its own time (TimerStateImpl: expiry <= batch timestamp).
    clock.advance(1000);
    await q.runDueTriggers();
    expect(q.lastProgress?.batchId).toBe(1);
    expect(sink.allRows()).toEqual([['a', 'fired 11000 at 11000']]);
    await q.stop();
  });
});

describe('GroupState rules (Spark GroupStateImpl)', () => {
  const fmgws = (df: DataFrame, fn: FlatMapGroupsWithStateFunction<number>, timeout: 'none' | 'processingTime' | 'eventTime') =>
    df.groupByKey('key').flatMapGroupsWithState(fn, { outputMode: 'update', timeout, outputSchema: 'key string' });

  it('refuses a duration without a processing-time timeout, and a timestamp behind the watermark', async () => {
    const { stream: s1, df: df1 } = stream();
    const duration: FlatMapGroupsWithStateFunction<number> = (_k, _r, state) => { state.setTimeoutDuration('1 minute'); return []; };
    expect((await failure(fmgws(df1, duration, 'none'), () => s1.addData([['a', 1]]))).message)
      .toContain('Cannot set timeout duration without enabling processing time timeout in [map|flatMap]GroupsWithState');
    const { stream: s2, df: df2 } = new SluiceSession().memoryStream('key string, ts timestamp');
    const behind: FlatMapGroupsWithStateFunction<number> = (_k, _r, state) => { state.setTimeoutTimestamp(1000); return []; };
    const q = fmgws(df2.withWatermark('ts', '0 seconds'), behind, 'eventTime');
    const error = await failure(q, () => {
      s2.addData([['a', 10_000_000]]);
      s2.addData([['a', 20_000_000]]);
    });
    expect(error.message).toContain('[INVALID_TIMEOUT_TIMESTAMP] Timeout timestamp (1000) cannot be earlier than the current watermark (20000).');
  });

  it('get() without state throws Spark\'s message; update(null) is refused', async () => {
    const { stream: s1, df: df1 } = stream();
    expect((await failure(fmgws(df1, (_k, _r, state) => { state.get(); return []; }, 'none'), () => s1.addData([['a', 1]]))).message)
      .toContain('State is either not defined or has already been removed');
    const { stream: s2, df: df2 } = stream();
    expect((await failure(fmgws(df2, (_k, _r, state) => { state.update(null as never); return []; }, 'none'), () => s2.addData([['a', 1]]))).message)
      .toContain("'null' is not a valid state value");
  });
});

describe('deployed queries', () => {
  it('accepts an initial state on several shards (each applies the keys it owns: test/aws/stateful-processing.integration.test.ts)', async () => {
    const { validateQuery } = await import('../../../lib/query/validate-query.js');
    const { defineQuery } = await import('../../../lib/query/query-definition.js');
    const definition = defineQuery({
      name: 'with-initial-state',
      source: { schema: 'key string, n long', partitionKey: 'key' },
      transform: (events, session) => events.groupByKey('key').transformWithState(storing(() => 1), {
        outputSchema: 'key string, previous string', outputMode: 'append',
        initialState: session.createDataFrame([['a', 1]], 'key string, n long').groupByKey('key'),
      }),
      outputMode: 'append',
      sink: { kind: 's3-files' },
    });
    expect(() => validateQuery(definition, { expectedShardCount: 2 })).not.toThrow();
    expect(() => validateQuery(definition, { expectedShardCount: 1 })).not.toThrow();
  });
});

describe('state routing (resharding) and the repartition stage', () => {
  const keyed = () => {
    const { df } = new SluiceSession().memoryStream('user string, n long', 'events');
    return df.groupByKey('user').transformWithState(storing(() => 1), { outputSchema: 'key string, previous string', timeMode: 'processingTime' });
  };

  it('routes every entry of a key (value, list, map entry, timer) by the key column', async () => {
    const { sourceStreamStateRouting } = await import('../../../lib/state/state-routing.js');
    const [routing] = sourceStreamStateRouting(keyed().plan, 'user');
    const route = routing!.routingKey!;
    expect(route('v|v|su1', [['u1'], 1, null])).toBe('u1');
    expect(route('l|l|su1', [['u1'], [[1, null]]])).toBe('u1');
    expect(route('m|m|["su1","sk"]', [['u1'], 'k', 1, null])).toBe('u1');
    expect(route('t|["su1",5000]', [['u1'], 5000])).toBe('u1');
  });

  it('cuts a repartition stage routed by the groupByKey columns', async () => {
    const { planStages } = await import('../../../lib/analysis/stages.js');
    const [hop] = planStages(keyed().plan).hops;
    expect(hop!.routingColumns).toEqual(['user']);
    expect(hop!.operator.kind).toBe('StatefulProcessing');
  });
});

describe('explain', () => {
  it('shows the operator, its keys and its timers', () => {
    const { df } = new SluiceSession().memoryStream('user string, n long', 'events');
    const text = tws(df.withColumnRenamed('user', 'key'), storing(() => 1), 'processingTime').explain('update');
    expect(text).toContain('TransformWithState keys [key], timeMode processingTime, update');
    expect(text).toMatch(/transformWithState by \[key\]: .*timers fire when the batch timestamp passes them/);
  });
});

describe('transformWithState event-time timers (as Spark 4.0.1 runs them; see spark-diff stateful/tws-session-event-time-timer)', () => {
  it('fires a timer at exactly the watermark, and leaves timers out of numRowsTotal', async () => {
    const { stream: s, df } = new SluiceSession().memoryStream('key string, eventTime timestamp');
    const query = df.withWatermark('eventTime', '10 seconds').groupByKey('key').transformWithState(DIFF_PROCESSORS['session-timeout']!, {
      outputSchema: 'key string, events long, lastSec long, closed boolean', timeMode: 'eventTime', outputMode: 'update',
    });
    const sink = new MemorySink();
    const q = await query.writeStream.outputMode('update').sink(sink).start();
    s.addData([['a', 5_000_000]]); // a's timer at 5 s + 5 s = 10 000 ms
    await q.processAllAvailable();
    expect(q.lastProgress?.stateOperators[0]?.numRowsTotal).toBe(1); // a's session; its timer is not counted
    s.addData([['b', 20_000_000]]); // the watermark moves to exactly 10 000 ms
    await q.processAllAvailable();
    await q.stop();
    expect(sink.allRows()).toContainEqual(['a', 1, 5, true]);
    expect(q.lastProgress?.stateOperators[0]?.numRowsTotal).toBe(1); // only b's session is left
  });
});
