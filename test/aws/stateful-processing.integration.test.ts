/**
 * transformWithState deployed: Kinesis → the real Lambda handlers → DynamoDB state (state variables
 * and timers in the state store) → S3 files, against the emulators. Processing-time timers fire from
 * the scheduled handler for keys that get no more data, exactly once through injected crashes, and
 * the result equals the in-memory engine's. Also prints the DynamoDB cost per batch of a
 * timer-heavy query:
 *
 *   npx vitest run --project integration test/aws/stateful-processing.integration.test.ts
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { readS3Files } from '../../lib/aws/sink-readers.js';
import { createScheduledTriggerHandler } from '../../lib/aws/scheduled-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import type { Sink } from '../../lib/sinks/sink.js';
import { ManualClock } from '../../lib/runtime/clock.js';
import { Trigger } from '../../lib/runtime/trigger.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import type { GroupingKey, ListState, Row, StatefulProcessor, StatefulProcessorHandle, TimerValues, ValueState } from '../../lib/plan/stateful-processor.js';
import type { ShardInvocationResult } from '../../lib/query/shard-invocation.js';
import type { StreamingQueryProgress } from '../../lib/runtime/progress.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';

const SESSION_GAP_MS = 30_000;

/** A session per user: closed SESSION_GAP_MS after its first event, by a processing-time timer. */
class Sessions implements StatefulProcessor {
  private events!: ValueState<number>;
  private actions!: ListState<string>;
  private handle!: StatefulProcessorHandle;

  init(handle: StatefulProcessorHandle): void {
    this.handle = handle;
    this.events = handle.getValueState<number>('events', { schema: 'long' });
    this.actions = handle.getListState<string>('actions', { schema: 'string', ttl: '1 hour' });
  }

  handleInputRows(_key: GroupingKey, rows: readonly Row[], timerValues: TimerValues): Row[] {
    if (this.handle.listTimers().length === 0) this.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + SESSION_GAP_MS);
    this.events.update((this.events.get() ?? 0) + rows.length);
    this.actions.appendList(rows.map((r) => r.action as string));
    return [];
  }

  handleExpiredTimer(key: GroupingKey): Row[] {
    const row = { user: key[0], events: this.events.get() ?? 0, actions: this.actions.get().sort() };
    this.events.clear();
    this.actions.clear();
    return [row];
  }
}

const SCHEMA = 'user string, action string, ts timestamp';
const sessions = (df: DataFrame): DataFrame => df.groupByKey('user')
  .transformWithState(() => new Sessions(), { timeMode: 'processingTime', outputMode: 'append', outputSchema: 'user string, events long, actions array<string>' });

interface Event { user: string; action: string; ts: string }
const eventsFor = (users: number, perUser: number): Event[] => Array.from({ length: users * perUser }, (_, i) => ({
  user: `u${i % users}`,
  action: ['view', 'cart', 'buy', 'search'][(i * 7) % 4]!,
  ts: new Date(Date.UTC(2024, 4, 1, 12) + i * 1000).toISOString(),
}));
const asRecords = (events: readonly Event[]) => events.map((e) => ({ data: JSON.stringify(e), partitionKey: e.user }));
const canonical = (rows: readonly Record<string, unknown>[]): string[] =>
  rows.map((r) => JSON.stringify({ user: r.user, events: Number(r.events), actions: r.actions })).sort();

/** The engine in memory on a manual clock: all events, then past the gap. */
async function inMemoryAnswer(events: readonly Event[]): Promise<string[]> {
  const { stream, df } = new SluiceSession().memoryStream(SCHEMA);
  const result = sessions(df);
  const sink = new MemorySink();
  const clock = new ManualClock(1_000_000);
  const q = await result.writeStream.outputMode('append').sink(sink).trigger(Trigger.ProcessingTime(1000)).clock(clock).start();
  stream.addData(events.map((e) => [e.user, e.action, parseTimestamp(e.ts)]));
  clock.advance(1000);
  await q.runDueTriggers();
  clock.advance(SESSION_GAP_MS + 1000);
  await q.runDueTriggers();
  await q.stop();
  const schema = result.plan.output.map((a) => ({ name: a.name, type: a.type }));
  return canonical(sink.allRows().map((r) => toExternalRow(r, schema)));
}

const definition = (name: string, transform: (df: DataFrame) => DataFrame = sessions) => defineQuery({
  name, source: { schema: SCHEMA, partitionKey: 'user' }, transform, outputMode: 'append', sink: { kind: 's3-files' },
});

const TTL_MS = 10 * 60_000;

/** No timers at all: a count per user kept 10 minutes after its last update (TTL), output per batch. */
class ExpiringCounts implements StatefulProcessor {
  private events!: ValueState<number>;

  init(handle: StatefulProcessorHandle): void {
    this.events = handle.getValueState<number>('events', { schema: 'long', ttl: TTL_MS });
  }

  handleInputRows(key: GroupingKey, rows: readonly Row[]): Row[] {
    const events = (this.events.get() ?? 0) + rows.length;
    this.events.update(events);
    return [{ user: key[0], events, actions: [] }];
  }
}
/** A count per user that starts from the initial state's `events`. */
class SeededCounts implements StatefulProcessor {
  private events!: ValueState<number>;

  init(handle: StatefulProcessorHandle): void {
    this.events = handle.getValueState<number>('events', { schema: 'long' });
  }

  handleInitialState(_key: GroupingKey, row: Row): void {
    this.events.update(Number(row.events));
  }

  handleInputRows(key: GroupingKey, rows: readonly Row[]): Row[] {
    const events = (this.events.get() ?? 0) + rows.length;
    this.events.update(events);
    return [{ user: key[0], events, actions: [] }];
  }
}
const expiringCounts = (df: DataFrame): DataFrame => df.groupByKey('user')
  .transformWithState(() => new ExpiringCounts(), { timeMode: 'none', outputMode: 'append', outputSchema: 'user string, events long, actions array<string>' });

/** A sink that dies once after writing a batch (with rows, if `withRows`), before the checkpoint commits it. */
function crashingOnce(counter: { crashes: number }, withRows = true): (sink: Sink) => Sink {
  return (sink) => ({
    description: sink.description,
    supportedOutputModes: sink.supportedOutputModes,
    addBatch: async (b) => {
      await sink.addBatch(b);
      if ((!withRows || b.rows.length > 0) && counter.crashes === 0) {
        counter.crashes++;
        throw new Error('injected: the process died after the sink write, before the commit');
      }
    },
    onCommitted: (p, n) => sink.onCommitted!(p, n),
  });
}

/** One scheduled invocation at `nowMs`, with the deployment's resources and an optional sink decorator. */
async function tick(d: Deployment, name: string, nowMs: number, decorateSink?: (sink: Sink) => Sink, transform?: (df: DataFrame) => DataFrame) {
  const results: { shardId: string; result: ShardInvocationResult }[] = [];
  const handler = createScheduledTriggerHandler(definition(name, transform), {
    config: d.config, clients: d.clients, observability: createQuietObservability(name), now: () => nowMs,
    onInvocation: (shardId, result) => { results.push({ shardId, result }); },
    ...(decorateSink ? { decorateSink } : {}),
  });
  const summary = await handler({ mode: 'tick' });
  return { summary, results, progress: results.flatMap((r) => r.result.progress) };
}

let emulators: EmulatorSet;
beforeAll(async () => {
  emulators = await startEmulators();
});
afterAll(async () => {
  await emulators?.stop();
});

describe('transformWithState with processing-time timers on the emulators', () => {
  it('timers fire from the scheduled handler for keys with no more data; crashes on the data and the timer batch change nothing', async () => {
    const name = 'sessions-timers';
    const events = eventsFor(12, 5);
    const expected = await inMemoryAnswer(events);
    expect(expected).toHaveLength(12);

    const d = await deploy(emulators, definition(name), 2);
    const dataCrash = { crashes: 0 };
    await d.put(asRecords(events));
    const startedAt = Date.now();
    await d.drain({}, { decorateSink: crashingOnce(dataCrash, false) });
    expect(dataCrash.crashes).toBe(1);
    expect(d.results.some((r) => r.result.error !== undefined)).toBe(true);
    expect(canonical(await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix))).toEqual([]);

    // Before the gap: no timer is due, so the tick runs no batch at all.
    const early = await tick(d, name, Date.now() + 1000);
    expect(early.progress).toEqual([]);

    // Past the gap: the timers fire in a no-data batch; the first attempt dies after writing.
    const timerCrash = { crashes: 0 };
    const due = startedAt + SESSION_GAP_MS + 60_000;
    const crashed = await tick(d, name, due, crashingOnce(timerCrash));
    expect(timerCrash.crashes).toBe(1);
    expect(crashed.results.some((r) => r.result.error !== undefined)).toBe(true);
    const retried = await tick(d, name, due + 60_000);
    expect(retried.results.every((r) => r.result.error === undefined)).toBe(true);
    const rows = canonical(await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix));
    expect(rows).toEqual(expected);

    // Every timer fired: the next tick has nothing due, and runs nothing.
    const after = await tick(d, name, due + 120_000);
    expect(after.progress).toEqual([]);
    expect(canonical(await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix))).toEqual(expected);
  });

  it('the scheduled function evicts expired TTL state on idle shards, exactly once through a crash', async () => {
    const name = 'ttl-idle-shards';
    const d = await deploy(emulators, definition(name, expiringCounts), 2);
    await d.put(asRecords(eventsFor(12, 3)));
    const startedAt = Date.now();
    await d.drain();
    const dataBatches = d.results.flatMap((r) => r.result.progress);
    const stored = (progress: readonly StreamingQueryProgress[]): number => progress.reduce((a, p) => a + p.stateOperators[0]!.numRowsTotal, 0);
    const evicted = (progress: readonly StreamingQueryProgress[]): number => progress.reduce((a, p) => a + (p.stateOperators[0]!.customMetrics.numValuesRemovedDueToTTLExpiry ?? 0), 0);
    const shardsWithData = new Set(d.results.filter((r) => r.result.progress.length > 0).map((r) => r.shardId));
    expect(shardsWithData.size).toBe(2);
    expect(dataBatches.length).toBeGreaterThan(0);

    // Before the TTL: no shard has anything due, so no batch runs.
    expect((await tick(d, name, startedAt + TTL_MS / 2, undefined, expiringCounts)).progress).toEqual([]);

    // Past it: each shard runs one no-data batch that evicts its users; the first attempt dies before its commit.
    const crash = { crashes: 0 };
    const crashed = await tick(d, name, startedAt + TTL_MS + 60_000, crashingOnce(crash, false), expiringCounts);
    expect(crash.crashes).toBe(1);
    expect(crashed.results.filter((r) => r.result.error !== undefined)).toHaveLength(1);
    const retried = await tick(d, name, startedAt + TTL_MS + 120_000, undefined, expiringCounts);
    expect(retried.results.every((r) => r.result.error === undefined)).toBe(true);
    const evictions = [...crashed.progress, ...retried.progress];
    expect(evictions.every((p) => p.numInputRows === 0)).toBe(true);
    expect(evictions).toHaveLength(2);
    expect(evicted(evictions)).toBe(12);
    expect(stored(evictions)).toBe(0);

    // Nothing is left to expire: later ticks run nothing, and the sink has only the data batches' rows.
    expect((await tick(d, name, startedAt + TTL_MS + 180_000, undefined, expiringCounts)).progress).toEqual([]);
    expect(await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)).toHaveLength(dataBatches.reduce((a, p) => a + p.stateOperators[0]!.numOutputRows, 0));
  });

  for (const [route, partitionKey, repartitionShards] of [['co-partitioned', 'user', 0], ['through the repartition stage', 'action', 2]] as const) {
    it(`applies an initial state once per key on two shards (${route})`, async () => {
      const name = `initial-state-${partitionKey}`;
      const withInitialState = defineQuery({
        name, source: { schema: SCHEMA, partitionKey }, outputMode: 'append', sink: { kind: 's3-files' },
        transform: (df, session) => df.groupByKey('user').transformWithState(() => new SeededCounts(), {
          timeMode: 'none', outputMode: 'append', outputSchema: 'user string, events long, actions array<string>',
          initialState: session.createDataFrame(Array.from({ length: 12 }, (_, i) => [`u${i}`, 100]), 'user string, events long').groupByKey('user'),
        }),
      });
      const d = await deploy(emulators, withInitialState, 2, repartitionShards > 0 ? { repartitionShards, expectedShardCount: undefined } : {});
      await d.put(eventsFor(12, 3).map((e) => ({ data: JSON.stringify(e), partitionKey: partitionKey === 'user' ? e.user : e.action })));
      await d.drain();
      expect(d.results.every((r) => r.result.error === undefined)).toBe(true);
      // Each user's count started at 100 exactly once, wherever its rows went; no shard holds a key it gets no rows for.
      const rows = await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix);
      const latest = new Map<string, number>();
      for (const r of rows) latest.set(r.user as string, Math.max(latest.get(r.user as string) ?? 0, Number(r.events)));
      expect([...latest.values()]).toEqual(Array(12).fill(103));
      const statefulShards = d.results.filter((r) => r.result.progress.some((p) => p.stateOperators.length > 0));
      expect(new Set(statefulShards.map((r) => r.shardId)).size).toBe(2);
      const totals = new Map<string, number>();
      for (const r of statefulShards) for (const p of r.result.progress) totals.set(r.shardId, p.stateOperators[0]!.numRowsTotal);
      expect([...totals.values()].reduce((a, n) => a + n, 0)).toBe(12);
    });
  }

  it('prints the DynamoDB cost per batch of a timer-heavy query (1,000 keys, a timer each, one shard)', async () => {
    const name = 'sessions-cost';
    const users = 1000;
    const d = await deploy(emulators, definition(name), 1);
    await d.put(asRecords(eventsFor(users, 2)));
    const startedAt = Date.now();
    await d.drain({ batchSize: 500 });
    const dataBatches = d.results.flatMap((r) => r.result.progress).filter((p) => p.numInputRows > 0);
    const fired = await tick(d, name, startedAt + SESSION_GAP_MS + 60_000);
    expect(fired.progress).toHaveLength(1);
    expect(fired.progress[0]!.numInputRows).toBe(0);
    expect(fired.progress[0]!.stateOperators[0]!.customMetrics.numExpiredTimers).toBe(users);
    expect(canonical(await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix))).toHaveLength(users);
    const line = (p: StreamingQueryProgress): string => `batch ${p.batchId}: ${p.numInputRows} rows, ${p.stateOperators[0]!.numRowsTotal} state rows, `
      + `write ${(p.cost.dynamoDbWriteUnits ?? 0).toFixed(1)} WCU, read ${(p.cost.dynamoDbReadUnits ?? 0).toFixed(1)} RCU`;
    console.log([`timer-heavy query, ${users} keys x 2 events, batches of up to 500 records:`,
      ...dataBatches.map((p) => `  data ${line(p)}`), `  timers ${line(fired.progress[0]!)}`].join('\n'));
    expect(dataBatches.every((p) => (p.cost.dynamoDbWriteUnits ?? 0) > 0)).toBe(true);
  });
});
