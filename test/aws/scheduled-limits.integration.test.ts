/**
 * Issue 11 part 6 for the scheduled function (emulators): it reads the Lambda context's remaining
 * time and the function's memory like the Kinesis handler does. No batch starts that may not
 * finish before the deadline (the shard is deferred to the next tick, nothing lost), and a state
 * that outgrows the memory fails its shard with STATE_EXCEEDS_MEMORY after the batch commits.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import { createScheduledTriggerHandler } from '../../lib/aws/scheduled-trigger-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count } from '../../lib/plan/functions.js';
import type { RuntimeConfig } from '../../lib/runtime/runtime-config.js';
import type { Sink } from '../../lib/sinks/sink.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';

const definition = defineQuery({
  name: 'scheduled-limits',
  source: { schema: 'k string, ts timestamp' },
  transform: (df) => df.groupBy(col('k')).agg(count('*').as('n')),
  outputMode: 'update',
  sink: { kind: 'dynamodb' },
});

let emulators: EmulatorSet;
beforeAll(async () => {
  emulators = await startEmulators();
});
afterAll(async () => {
  await emulators?.stop();
});

const handlerOf = (d: Deployment, config: RuntimeConfig = d.config, afterWrite = () => {}) => createScheduledTriggerHandler(definition, {
  config, clients: d.clients, observability: createQuietObservability(definition.name), drainBatchSize: 2,
  decorateSink: (sink: Sink): Sink => ({
    description: sink.description, supportedOutputModes: sink.supportedOutputModes,
    addBatch: async (batch) => { await sink.addBatch(batch); afterWrite(); },
  }),
});
const events = (n: number) => Array.from({ length: n }, (_, i) => ({ data: JSON.stringify({ k: 'a', ts: '2024-05-01T14:00:00Z' }), partitionKey: `p${i}` }));
const total = async (d: Deployment): Promise<unknown> => (await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!))[0]?.n;

describe('the scheduled function under the invocation limits (emulators)', () => {
  it('the deadline: nothing starts with too little time left, a drain stops between batches, the next tick resumes', async () => {
    const d = await deploy(emulators, definition, 1);
    await d.put(events(6));
    let timeLeft = 60_000;
    const handler = handlerOf(d, d.config, () => { timeLeft = 1_000; });
    timeLeft = 500;
    const starved = await handler({ mode: 'drain' }, { getRemainingTimeInMillis: () => timeLeft });
    expect(starved.stoppedBy).toBe('deadline');
    expect(starved.shards).toEqual([expect.objectContaining({ batches: 0, deferred: 'deadline' })]);
    expect(await total(d)).toBeUndefined();
    // A minute until the first batch is written, then 1 s: the drain stops after that batch, committed.
    timeLeft = 60_000;
    const partial = await handler({ mode: 'drain' }, { getRemainingTimeInMillis: () => timeLeft });
    expect(partial.stoppedBy).toBe('deadline');
    expect(partial.shards[0]).toMatchObject({ batches: 1, deferred: 'deadline' });
    expect(partial.shards[0]!.error).toBeUndefined();
    expect(await total(d)).toBe(2);
    const rest = await handlerOf(d)({ mode: 'drain' }, { getRemainingTimeInMillis: () => 60_000 });
    expect(rest.stoppedBy).toBeUndefined();
    expect(rest.shards[0]!.deferred).toBeUndefined();
    expect(await total(d)).toBe(6);
  });

  it('memory: a process over the function\'s memory fails the shard loudly after its batch commits', async () => {
    const d = await deploy(emulators, definition, 1);
    await d.put(events(2));
    // 1 MB of function memory: any process is over the high-water mark after the first batch.
    const summary = await handlerOf(d, { ...d.config, functionMemoryMb: 1 })({ mode: 'drain' }, { getRemainingTimeInMillis: () => 60_000 });
    expect(summary.shards[0]!.error).toMatch(/uses \d+ MB of its 1 MB/);
    expect(summary.shards[0]!.batches).toBe(1);
    expect(await total(d)).toBe(2);
  });

  it('a batch over half the tick\'s time fails the shard loudly (the state is near what a cold start loads in time), committed', async () => {
    const d = await deploy(emulators, definition, 1);
    await d.put(events(2));
    // 5 s for the tick and a sink write of 3 s: the batch takes more than half of it.
    const slow = createScheduledTriggerHandler(definition, {
      config: d.config, clients: d.clients, observability: createQuietObservability(definition.name), drainBatchSize: 2,
      decorateSink: (sink: Sink): Sink => ({
        description: sink.description, supportedOutputModes: sink.supportedOutputModes,
        addBatch: async (batch) => { await new Promise((r) => setTimeout(r, 3_000)); await sink.addBatch(batch); },
      }),
    });
    const began = Date.now();
    const summary = await slow({ mode: 'drain' }, { getRemainingTimeInMillis: () => 5_000 - (Date.now() - began) });
    expect(summary.shards[0]!.error).toMatch(/batch 0 took \d+(\.\d)? s of the invocation's 5 s with 1 state rows/);
    expect(summary.shards[0]!.batches).toBe(1);
    expect(await total(d)).toBe(2);
  });
});
