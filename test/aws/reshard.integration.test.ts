/**
 * Resharding under stateful queries, on the emulators (kinesis-mock's SplitShard / MergeShards,
 * DynamoDB Local, s3rver): the same events, in phases, with reshards between the phases; the sink
 * must hold the in-memory engine's answer over the same records, never resharded (and, for the S3
 * snapshot sink, after each phase the answer over the records so far). Paths:
 * the local event source mapping (Lambda's ESM) and the scheduled function's drain; one stage and a
 * repartition stage (its source stream or its internal stream resharded).
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { expectInMemoryAnswer, merge, split } from '../support/reshard-scenarios.js';

const TIMEOUT = Number(globalThis.process.env.RESHARD_TEST_TIMEOUT_MS ?? 240_000);
let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

describe('resharding a stateful query gives the answer of the run without resharding (one stage)', () => {
  it('split mid-stream, update mode, event source mapping', async () => {
    await expectInMemoryAnswer(emulators, { mode: 'update', path: 'esm', steps: [[split]] });
  }, TIMEOUT);

  it('split mid-stream, update mode, scheduled drain (the path that ran children with empty state)', async () => {
    await expectInMemoryAnswer(emulators, { mode: 'update', path: 'drain', steps: [[split]] });
  }, TIMEOUT);

  it('merge mid-stream, append mode, event source mapping', async () => {
    await expectInMemoryAnswer(emulators, { mode: 'append', path: 'esm', shards: 2, steps: [[merge]] });
  }, TIMEOUT);

  it('split twice (a child split again before it ran), complete mode, scheduled drain', async () => {
    await expectInMemoryAnswer(emulators, { mode: 'complete', path: 'drain', steps: [[split], [split, split]], reshardBeforeProcessing: true });
  }, TIMEOUT);

  it('split then merge back mid-stream, complete mode to the S3 snapshot sink: a reader sees each phase\'s answer, never a parent\'s rows beside its children\'s', async () => {
    await expectInMemoryAnswer(emulators, { mode: 'complete', path: 'esm', snapshots: true, steps: [[split], [merge]] });
  }, TIMEOUT);

  it('split then merge back, append mode, the parent still holding unread records at the reshard', async () => {
    await expectInMemoryAnswer(emulators, { mode: 'append', path: 'esm', steps: [[split], [merge]], reshardBeforeProcessing: true });
  }, TIMEOUT);
});

describe('resharding under a repartition stage', () => {
  it('the internal stream split mid-stream, update mode, event source mapping', async () => {
    await expectInMemoryAnswer(emulators, { mode: 'update', path: 'esm', repartition: true, stream: 'internal', steps: [[split]] });
  }, TIMEOUT);

  it('the internal stream merged, append mode, scheduled drain', async () => {
    await expectInMemoryAnswer(emulators, { mode: 'append', path: 'drain', repartition: true, stream: 'internal', internalShards: 2, steps: [[merge]] });
  }, TIMEOUT);

  it('the internal stream split twice, complete mode, event source mapping', async () => {
    await expectInMemoryAnswer(emulators, { mode: 'complete', path: 'esm', repartition: true, stream: 'internal', steps: [[split], [split]] });
  }, TIMEOUT);

  it('the source stream split (stage 1 stateless), update mode, scheduled drain', async () => {
    await expectInMemoryAnswer(emulators, { mode: 'update', path: 'drain', repartition: true, stream: 'source', steps: [[split]] });
  }, TIMEOUT);
});
