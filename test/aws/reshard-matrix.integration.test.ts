/**
 * The cells of the resharding matrix (issue 11, part 2) that test/aws/reshard.integration.test.ts
 * and the hop tests do not cover: each reshard kind (split, merge, split twice, UpdateShardCount)
 * in each output mode, to each sink the mode allows, through one stage and through a repartition
 * stage (its internal or its source stream resharded), on the event source mapping, the scheduled
 * drain and a scheduled tick that comes while a parent still holds records. One run on the emulators per cell, compared with the in-memory engine over the
 * same records, never resharded (and, for the S3 snapshot sink, what a reader sees after each
 * phase with the in-memory answer over the records so far).
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { expectInMemoryAnswer, merge, split, type Scenario } from '../support/reshard-scenarios.js';

const TIMEOUT = Number(process.env.RESHARD_TEST_TIMEOUT_MS ?? 240_000);
let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const up = (n: number) => ({ shardCount: n });

/** [title, scenario]: title names reshard × mode/sink × path. */
const oneStage: [string, Scenario][] = [
  ['merge × update/dynamodb × drain', { mode: 'update', path: 'drain', shards: 2, steps: [[merge]] }],
  ['merge × complete/s3-snapshot × drain', { mode: 'complete', path: 'drain', shards: 2, sink: 's3-snapshot', steps: [[merge]] }],
  ['merge × append/dynamodb × tick', { mode: 'append', path: 'tick', shards: 2, sink: 'dynamodb', steps: [[merge]], reshardBeforeProcessing: true }],
  ['split × append/dynamodb × drain', { mode: 'append', path: 'drain', sink: 'dynamodb', steps: [[split]] }],
  ['split × complete/s3-snapshot × tick', { mode: 'complete', path: 'tick', sink: 's3-snapshot', steps: [[split]], reshardBeforeProcessing: true }],
  ['split × update/dynamodb × tick', { mode: 'update', path: 'tick', steps: [[split]], reshardBeforeProcessing: true }],
  // Append mode: the tick's no-data batch on a child closes windows, so a child run too early commits (empty state).
  ['split × append/s3-files × tick', { mode: 'append', path: 'tick', steps: [[split]], reshardBeforeProcessing: true }],
  ['split twice × update/dynamodb × esm', { mode: 'update', path: 'esm', steps: [[split], [split]] }],
  ['split twice × append/s3-files × drain', { mode: 'append', path: 'drain', steps: [[split, split]] }],
  ['UpdateShardCount 2→4→2 × update/dynamodb × esm', { mode: 'update', path: 'esm', shards: 2, steps: [[up(4)], [up(2)]] }],
  ['UpdateShardCount 1→2→4 × complete/dynamodb × drain', { mode: 'complete', path: 'drain', steps: [[up(2)], [up(4)]] }],
  ['UpdateShardCount 2→4→2 × append/s3-files × tick', { mode: 'append', path: 'tick', shards: 2, steps: [[up(4)], [up(2)]], reshardBeforeProcessing: true }],
  // The watermark carries over: a child that started from watermark 0 would count the late order.
  ['split × update/dynamodb × esm, a late order after the split', { mode: 'update', path: 'esm', steps: [[split]], late: true }],
  ['merge × append/s3-files × drain, a late order after the merge', { mode: 'append', path: 'drain', shards: 2, steps: [[merge]], late: true }],
];

/** Stage 2's parents hold state from the first phase on: every reshard comes after a processed phase. */
const internalStream: [string, Scenario][] = [
  ['merge × update/dynamodb × esm', { mode: 'update', path: 'esm', internalShards: 2, steps: [[merge]] }],
  ['merge × complete/s3-snapshot × esm', { mode: 'complete', path: 'esm', internalShards: 2, sink: 's3-snapshot', steps: [[merge]] }],
  ['split × complete/s3-snapshot × drain', { mode: 'complete', path: 'drain', sink: 's3-snapshot', steps: [[split]] }],
  ['split × append/dynamodb × esm', { mode: 'append', path: 'esm', sink: 'dynamodb', steps: [[split]] }],
  ['split twice × append/s3-files × drain', { mode: 'append', path: 'drain', steps: [[split], [split]] }],
  ['split twice × update/dynamodb × tick', { mode: 'update', path: 'tick', steps: [[split, split]] }],
  ['UpdateShardCount 2→4→2 × update/dynamodb × drain', { mode: 'update', path: 'drain', internalShards: 2, steps: [[up(4)], [up(2)]] }],
  ['UpdateShardCount 1→2→4 × complete/dynamodb × tick', { mode: 'complete', path: 'tick', steps: [[up(2)], [up(4)]] }],
];

const sourceStream: [string, Scenario][] = [
  ['merge × append/s3-files × esm', { mode: 'append', path: 'esm', shards: 2, steps: [[merge]] }],
  ['split twice × append/dynamodb × drain', { mode: 'append', path: 'drain', sink: 'dynamodb', steps: [[split], [split]] }],
  ['UpdateShardCount 2→4→2 × complete/dynamodb × esm', { mode: 'complete', path: 'esm', shards: 2, steps: [[up(4)], [up(2)]] }],
];

describe('resharding matrix, one stage (the source stream resharded under state): the in-memory answer', () => {
  it.each(oneStage)('%s', async (_title, scenario) => { await expectInMemoryAnswer(emulators, scenario); }, TIMEOUT);
});

describe('resharding matrix, repartition stage, the internal stream resharded under stage 2\'s state: the in-memory answer', () => {
  it.each(internalStream)('%s', async (_title, scenario) => {
    await expectInMemoryAnswer(emulators, { ...scenario, repartition: true, stream: 'internal' });
  }, TIMEOUT);
});

describe('resharding matrix, repartition stage, the source stream resharded under the stateless stage 1: the in-memory answer', () => {
  it.each(sourceStream)('%s', async (_title, scenario) => {
    await expectInMemoryAnswer(emulators, { ...scenario, repartition: true, stream: 'source' });
  }, TIMEOUT);
});
