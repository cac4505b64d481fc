/**
 * LocalEventSourceMapping against kinesis-mock: real SDK calls, one emulator for the file, one
 * stream per test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Shard } from '@aws-sdk/client-kinesis';
import type { Context, KinesisStreamBatchResponse, KinesisStreamEvent, KinesisStreamRecord } from 'aws-lambda';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { deleteResourcesNamed } from '../support/cleanup.js';
import {
  createStreamAndWait, hashKeyForShard, listAllShards, mergeShards, putRecordsBatched, splitShardEvenly,
  type PutRecordResult,
} from '../../lib/local/kinesis-admin.js';
import {
  LocalEventSourceMapping, type BatchFailureInfo, type LocalEventSourceMappingOptions,
} from '../../lib/local/event-source-mapping.js';

let emulators: EmulatorSet;
let clients: AwsClients;
let streamCounter = 0;

beforeAll(async () => {
  emulators = await startEmulators({ dynamodb: false, s3: false });
  clients = createAwsClients({ ...emulators.clientOptions, maxAttempts: 3 });
});

afterAll(async () => {
  if (clients) await deleteResourcesNamed(clients, 'streams', `esm-test-${process.pid}-`);
  clients?.destroy();
  await emulators?.stop();
});

const FAST = { pollIntervalMs: 25, shardDiscoveryIntervalMs: 100, retryBackoffMs: 0 } as const;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const text = (r: KinesisStreamRecord): string => Buffer.from(r.kinesis.data, 'base64').toString('utf8');
const seqs = (e: KinesisStreamEvent): string[] => e.Records.map((r) => r.kinesis.sequenceNumber);
const big = (s: string): bigint => BigInt(s);

async function newStream(shards = 1): Promise<{ name: string; shards: Shard[] }> {
  const name = `esm-test-${process.pid}-${++streamCounter}-${Date.now()}`;
  await createStreamAndWait(clients.kinesis, name, shards);
  const listed = await listAllShards(clients.kinesis, name);
  return { name, shards: listed };
}

/** Puts `values` (one record each) into the given shard, in order. */
function putTo(stream: string, shard: Shard, values: string[]): Promise<PutRecordResult[]> {
  return putRecordsBatched(clients.kinesis, stream, values.map((v) => ({ data: v, partitionKey: v, explicitHashKey: hashKeyForShard(shard) })));
}

interface Delivery { event: KinesisStreamEvent; context: Context }

function mapping(
  stream: string,
  handler: (event: KinesisStreamEvent, context: Context) => Promise<KinesisStreamBatchResponse | void>,
  options: Partial<LocalEventSourceMappingOptions> = {},
): { esm: LocalEventSourceMapping; deliveries: Delivery[] } {
  const deliveries: Delivery[] = [];
  const esm = new LocalEventSourceMapping({
    kinesis: clients.kinesis,
    streamName: stream,
    ...FAST,
    ...options,
    handler: async (event, context) => {
      deliveries.push({ event, context });
      return handler(event, context);
    },
  });
  return { esm, deliveries };
}

const ok = async (): Promise<void> => {};

describe('LocalEventSourceMapping (kinesis-mock)', () => {
  it('delivers records of two shards in order per shard, each exactly once, in the Lambda event shape', async () => {
    const { name, shards } = await newStream(2);
    const [a, b] = shards as [Shard, Shard];
    const expected = new Map<string, string[]>([[a.ShardId!, []], [b.ShardId!, []]]);
    const lastSeq = new Map<string, string>();
    for (let round = 0; round < 3; round++) {
      for (const shard of [a, b]) {
        const values = Array.from({ length: 20 }, (_, i) => `${shard.ShardId}/${round * 20 + i}`);
        const put = await putTo(name, shard, values);
        expected.get(shard.ShardId!)!.push(...values);
        lastSeq.set(shard.ShardId!, put[put.length - 1]!.sequenceNumber);
        expect(new Set(put.map((p) => p.shardId))).toEqual(new Set([shard.ShardId]));
      }
    }
    const inFlight = new Map<string, number>();
    let maxInFlightPerShard = 0;
    const { esm, deliveries } = mapping(name, async (event) => {
      const shardId = event.Records[0]!.eventID.split(':')[0]!;
      inFlight.set(shardId, (inFlight.get(shardId) ?? 0) + 1);
      maxInFlightPerShard = Math.max(maxInFlightPerShard, inFlight.get(shardId)!);
      await sleep(5);
      inFlight.set(shardId, inFlight.get(shardId)! - 1);
    }, { batchSize: 7, region: 'eu-west-1', accountId: '123456789012' });

    const stats = await esm.drain({ idleMs: 300 });
    expect(esm.running).toBe(false);
    expect(stats).toMatchObject({ records: 120, deliveredRecords: 120, retries: 0, bisects: 0, failedBatches: 0 });
    expect(stats.invocations).toBe(deliveries.length);
    expect(maxInFlightPerShard).toBe(1);

    const got = new Map<string, string[]>();
    const lastSeen = new Map<string, bigint>();
    for (const { event, context } of deliveries) {
      expect(event.Records.length).toBeGreaterThan(0);
      expect(event.Records.length).toBeLessThanOrEqual(7);
      const shardIds = new Set(event.Records.map((r) => r.eventID.split(':')[0]));
      expect(shardIds.size).toBe(1); // one shard per invocation
      const shardId = [...shardIds][0]!;
      for (const r of event.Records) {
        const s = big(r.kinesis.sequenceNumber);
        expect(s > (lastSeen.get(shardId) ?? -1n)).toBe(true);
        lastSeen.set(shardId, s);
        got.set(shardId, [...(got.get(shardId) ?? []), text(r)]);
      }
      expect(typeof context.awsRequestId).toBe('string');
      expect(context.getRemainingTimeInMillis()).toBeGreaterThan(0);
    }
    expect(got).toEqual(expected);

    const first = deliveries[0]!.event.Records[0]!;
    const shardId = first.eventID.split(':')[0]!;
    expect(first).toEqual({
      kinesis: {
        kinesisSchemaVersion: '1.0',
        partitionKey: text(first),
        sequenceNumber: first.kinesis.sequenceNumber,
        data: Buffer.from(text(first)).toString('base64'),
        approximateArrivalTimestamp: first.kinesis.approximateArrivalTimestamp,
      },
      eventSource: 'aws:kinesis',
      eventVersion: '1.0',
      eventID: `${shardId}:${first.kinesis.sequenceNumber}`,
      eventName: 'aws:kinesis:record',
      invokeIdentityArn: 'arn:aws:iam::123456789012:role/lambda-role',
      awsRegion: 'eu-west-1',
      eventSourceARN: `arn:aws:kinesis:eu-west-1:123456789012:stream/${name}`,
    });
    expect(Object.keys(first)).toHaveLength(8);
    // epoch seconds with a fractional (millisecond) part, close to now
    expect(Math.abs(first.kinesis.approximateArrivalTimestamp - Date.now() / 1000)).toBeLessThan(120);

    expect(esm.checkpoints()).toEqual(Object.fromEntries(lastSeq));
    expect(esm.invocationLog.every((e) => e.outcome === 'success' && e.kind === 'initial')).toBe(true);
    expect(esm.invocationLog.map((e) => e.requestId)).toEqual(deliveries.map((d) => d.context.awsRequestId));
  });

  it('respects batchSize', async () => {
    const { name, shards } = await newStream(1);
    await putTo(name, shards[0]!, Array.from({ length: 25 }, (_, i) => `v${i}`));
    const { esm, deliveries } = mapping(name, ok, { batchSize: 10 });
    await esm.drain({ idleMs: 200 });
    expect(deliveries.map((d) => d.event.Records.length)).toEqual([10, 10, 5]);
    expect(deliveries.flatMap((d) => d.event.Records.map(text))).toEqual(Array.from({ length: 25 }, (_, i) => `v${i}`));
  });

  it('with a batching window, gathers records arriving over time into one invocation', async () => {
    const { name, shards } = await newStream(1);
    // A window well above the time the four puts take, even on a loaded machine.
    const { esm, deliveries } = mapping(name, ok, { batchSize: 100, maximumBatchingWindowMs: 2_500 });
    await esm.start();
    const firstPutAt = Date.now();
    for (let i = 0; i < 4; i++) {
      await putTo(name, shards[0]!, [`w${i}`]);
      await sleep(100);
    }
    await esm.drain({ idleMs: 300 });
    await esm.stop();
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]!.event.Records.map(text)).toEqual(['w0', 'w1', 'w2', 'w3']);
    // It waited for the window (which starts when the first record is read), not for more than that.
    const waited = esm.invocationLog[0]!.startedAt - firstPutAt;
    expect(waited).toBeGreaterThanOrEqual(2_500); // the first record cannot be read before it was put
    expect(waited).toBeLessThan(6_000);
  });

  it('with a batching window, a full batch is invoked at once and the remainder after the window', async () => {
    const { name, shards } = await newStream(1);
    await putTo(name, shards[0]!, Array.from({ length: 12 }, (_, i) => `f${i}`));
    const { esm, deliveries } = mapping(name, ok, { batchSize: 5, maximumBatchingWindowMs: 4_000 });
    const startedAt = Date.now();
    await esm.drain({ idleMs: 200 });
    expect(deliveries.map((d) => d.event.Records.length)).toEqual([5, 5, 2]);
    const [first, second, third] = esm.invocationLog;
    // Full batches do not wait for the window; the remainder (read after the second batch) does.
    expect(first!.startedAt - startedAt).toBeLessThan(2_000);
    expect(second!.startedAt - startedAt).toBeLessThan(2_000);
    expect(third!.startedAt - second!.endedAt).toBeGreaterThanOrEqual(4_000);
  });

  it('batchItemFailures: checkpoints before the lowest failed record and retries from it', async () => {
    const { name, shards } = await newStream(1);
    const put = await putTo(name, shards[0]!, Array.from({ length: 10 }, (_, i) => `p${i}`));
    const checkpoints: string[] = [];
    let calls = 0;
    const { esm, deliveries } = mapping(name, async (event) => {
      calls++;
      if (calls === 1) {
        // Two failures, the higher one first: Lambda uses the lowest.
        return { batchItemFailures: [{ itemIdentifier: put[7]!.sequenceNumber }, { itemIdentifier: put[4]!.sequenceNumber }] };
      }
      return { batchItemFailures: [] };
    }, { batchSize: 10, hooks: { onCheckpoint: (_shard, seq) => { checkpoints.push(seq); } } });
    const stats = await esm.drain({ idleMs: 200 });
    expect(deliveries).toHaveLength(2);
    expect(seqs(deliveries[0]!.event)).toEqual(put.map((p) => p.sequenceNumber));
    expect(seqs(deliveries[1]!.event)).toEqual(put.slice(4).map((p) => p.sequenceNumber));
    expect(checkpoints).toEqual([put[3]!.sequenceNumber, put[9]!.sequenceNumber]);
    expect(esm.invocationLog.map((e) => [e.outcome, e.kind])).toEqual([['partial-failure', 'initial'], ['success', 'retry']]);
    expect(esm.invocationLog[0]!.failedSequenceNumber).toBe(put[4]!.sequenceNumber);
    expect(stats).toMatchObject({ records: 10, deliveredRecords: 16, retries: 1, failedBatches: 0 });
  });

  it('batchItemFailures on the first record retries the whole batch; later batches wait', async () => {
    const { name, shards } = await newStream(1);
    const put = await putTo(name, shards[0]!, Array.from({ length: 6 }, (_, i) => `q${i}`));
    let failures = 3;
    const { esm, deliveries } = mapping(name, async (event) => {
      if (failures > 0 && event.Records[0]!.kinesis.sequenceNumber === put[0]!.sequenceNumber) {
        failures--;
        return { batchItemFailures: [{ itemIdentifier: put[0]!.sequenceNumber }] };
      }
      return undefined;
    }, { batchSize: 3 });
    const stats = await esm.drain({ idleMs: 200 });
    expect(deliveries.map((d) => d.event.Records.map(text))).toEqual([
      ['q0', 'q1', 'q2'], ['q0', 'q1', 'q2'], ['q0', 'q1', 'q2'], ['q0', 'q1', 'q2'], ['q3', 'q4', 'q5'],
    ]);
    expect(stats).toMatchObject({ retries: 3, records: 6 });
  });

  it.each([
    ['an empty itemIdentifier', (_: string) => ({ batchItemFailures: [{ itemIdentifier: '' }] })],
    ['a null itemIdentifier', (_: string) => ({ batchItemFailures: [{ itemIdentifier: null }] })],
    ['a bad key name', (seq: string) => ({ batchItemFailures: [{ sequenceNumber: seq }] })],
    ['an identifier not in the batch', (_: string) => ({ batchItemFailures: [{ itemIdentifier: '123' }] })],
  ])('%s fails the whole batch', async (_label, response) => {
    const { name, shards } = await newStream(1);
    const put = await putTo(name, shards[0]!, ['a', 'b', 'c', 'd']);
    let calls = 0;
    const { esm, deliveries } = mapping(name, async (event) => {
      calls++;
      return calls === 1 ? response(event.Records[2]!.kinesis.sequenceNumber) as unknown as KinesisStreamBatchResponse : undefined;
    }, { batchSize: 10 });
    const stats = await esm.drain({ idleMs: 200 });
    expect(deliveries).toHaveLength(2);
    expect(seqs(deliveries[1]!.event)).toEqual(put.map((p) => p.sequenceNumber));
    expect(esm.invocationLog[0]!.outcome).toBe('function-error');
    expect(stats).toMatchObject({ retries: 1, records: 4 });
  });

  it('ignores batchItemFailures when reportBatchItemFailures is off; null/empty lists are success', async () => {
    const { name, shards } = await newStream(1);
    const put = await putTo(name, shards[0]!, ['a', 'b', 'c']);
    const off = mapping(name, async () => ({ batchItemFailures: [{ itemIdentifier: put[1]!.sequenceNumber }] }),
      { reportBatchItemFailures: false });
    expect(await off.esm.drain({ idleMs: 150 })).toMatchObject({ invocations: 1, records: 3, retries: 0 });
    for (const response of [null, {}, { batchItemFailures: null }, { batchItemFailures: [] }]) {
      const on = mapping(name, async () => response as unknown as KinesisStreamBatchResponse);
      expect(await on.esm.drain({ idleMs: 150 })).toMatchObject({ invocations: 1, records: 3, retries: 0 });
    }
  });

  it('a throwing handler with bisectBatchOnFunctionError splits the batch in halves, recursively', async () => {
    const { name, shards } = await newStream(1);
    const put = await putTo(name, shards[0]!, Array.from({ length: 8 }, (_, i) => `b${i}`));
    const poison = put[5]!.sequenceNumber;
    const failed: BatchFailureInfo[] = [];
    const { esm, deliveries } = mapping(name, async (event) => {
      if (seqs(event).includes(poison)) throw new Error('poison record');
    }, {
      batchSize: 8, bisectBatchOnFunctionError: true, maximumRetryAttempts: 2,
      onFailure: async (info) => { failed.push(info); },
    });
    const stats = await esm.drain({ idleMs: 200 });
    expect(deliveries.map((d) => d.event.Records.map(text))).toEqual([
      ['b0', 'b1', 'b2', 'b3', 'b4', 'b5', 'b6', 'b7'],
      ['b0', 'b1', 'b2', 'b3'], // first half succeeds
      ['b4', 'b5', 'b6', 'b7'], // second half fails, split again
      ['b4', 'b5'],
      ['b4'],
      ['b5'], ['b5'], ['b5'], // a single record cannot be split: 1 try + 2 retries
      ['b6', 'b7'],
    ]);
    expect(esm.invocationLog.map((e) => e.kind)).toEqual(
      ['initial', 'bisected', 'bisected', 'bisected', 'bisected', 'bisected', 'retry', 'retry', 'bisected']);
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({
      condition: 'RetryAttemptsExhausted', reason: 'poison record', shardId: shards[0]!.ShardId,
      startSequenceNumber: poison, endSequenceNumber: poison, batchSize: 1,
      streamArn: `arn:aws:kinesis:us-east-1:000000000000:stream/${name}`,
      approximateInvokeCount: 6,
    });
    expect(failed[0]!.records.map(text)).toEqual(['b5']);
    expect(stats).toMatchObject({ bisects: 3, retries: 2, failedBatches: 1, discardedRecords: 1, records: 7 });
    expect(esm.checkpoint(shards[0]!.ShardId!)).toBe(put[7]!.sequenceNumber);
  });

  it('retry exhaustion without bisect: onFailure once with the whole batch, then the shard moves on', async () => {
    const { name, shards } = await newStream(1);
    const put = await putTo(name, shards[0]!, Array.from({ length: 10 }, (_, i) => `r${i}`));
    const failed: BatchFailureInfo[] = [];
    const { esm, deliveries } = mapping(name, async (event) => {
      if (event.Records.some((r) => text(r) === 'r2')) return Promise.reject(new Error('cannot process r2'));
    }, { batchSize: 5, maximumRetryAttempts: 2, onFailure: (info) => { failed.push(info); } });
    const stats = await esm.drain({ idleMs: 200 });
    expect(deliveries.map((d) => d.event.Records.map(text).join(','))).toEqual([
      'r0,r1,r2,r3,r4', 'r0,r1,r2,r3,r4', 'r0,r1,r2,r3,r4', 'r5,r6,r7,r8,r9',
    ]);
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({
      startSequenceNumber: put[0]!.sequenceNumber, endSequenceNumber: put[4]!.sequenceNumber,
      batchSize: 5, approximateInvokeCount: 3, reason: 'cannot process r2',
    });
    expect(stats).toMatchObject({ retries: 2, failedBatches: 1, discardedRecords: 5, records: 5 });

    // Still moving: new records are delivered on a restart from the retained position.
    await putTo(name, shards[0]!, ['r10']);
    await esm.drain({ idleMs: 200 });
    expect(deliveries.at(-1)!.event.Records.map(text)).toEqual(['r10']);
    expect(failed).toHaveLength(1);
  });

  it('maximumRetryAttempts 0 discards on the first failure; a failing destination is retried before moving on', async () => {
    const { name, shards } = await newStream(1);
    await putTo(name, shards[0]!, ['x0', 'x1', 'x2']);
    let destinationCalls = 0;
    const { esm, deliveries } = mapping(name, async (event) => {
      if (text(event.Records[0]!) === 'x0') throw new Error('boom');
    }, {
      batchSize: 1, maximumRetryAttempts: 0,
      onFailure: async () => { if (++destinationCalls === 1) throw new Error('destination down'); },
    });
    const stats = await esm.drain({ idleMs: 200 });
    expect(deliveries.map((d) => text(d.event.Records[0]!))).toEqual(['x0', 'x1', 'x2']);
    expect(destinationCalls).toBe(2);
    expect(stats).toMatchObject({ failedBatches: 1, retries: 0, records: 2, errors: 1 });
  });

  it('a crash after the handler ran (afterInvoke throws) redelivers the same records', async () => {
    const { name, shards } = await newStream(1);
    const put = await putTo(name, shards[0]!, ['c0', 'c1', 'c2', 'c3']);
    let crashes = 1;
    const { esm, deliveries } = mapping(name, async () => ({ batchItemFailures: [] }), {
      batchSize: 2,
      hooks: { afterInvoke: () => { if (crashes-- > 0) throw new Error('runtime crashed before replying'); } },
    });
    const stats = await esm.drain({ idleMs: 200 });
    expect(deliveries.map((d) => seqs(d.event))).toEqual([
      [put[0]!.sequenceNumber, put[1]!.sequenceNumber],
      [put[0]!.sequenceNumber, put[1]!.sequenceNumber],
      [put[2]!.sequenceNumber, put[3]!.sequenceNumber],
    ]);
    expect(esm.invocationLog.map((e) => e.outcome)).toEqual(['response-lost', 'success', 'success']);
    expect(stats).toMatchObject({ invocations: 3, retries: 1, records: 4 });
  });

  it('a failure before the function is reached (beforeInvoke throws) is retried without spending retries', async () => {
    const { name, shards } = await newStream(1);
    await putTo(name, shards[0]!, ['n0', 'n1']);
    let throttles = 3;
    const { esm, deliveries } = mapping(name, ok, {
      maximumRetryAttempts: 0,
      onFailure: () => { throw new Error('must not be called'); },
      hooks: { beforeInvoke: () => { if (throttles-- > 0) throw new Error('TooManyRequestsException'); } },
    });
    const stats = await esm.drain({ idleMs: 200 });
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]!.event.Records.map(text)).toEqual(['n0', 'n1']);
    expect(esm.invocationLog.map((e) => e.outcome)).toEqual(['not-invoked', 'not-invoked', 'not-invoked', 'success']);
    expect(stats).toMatchObject({ invocations: 1, retries: 0, failedBatches: 0, records: 2 });
  });

  it('a timed-out invocation is a function error; callback-style handlers work', async () => {
    const { name, shards } = await newStream(1);
    await putTo(name, shards[0]!, ['t0']);
    let calls = 0;
    const esm = new LocalEventSourceMapping({
      kinesis: clients.kinesis, streamName: name, ...FAST, functionTimeoutMs: 150,
      handler: (_event, _context, callback) => {
        calls++;
        if (calls === 1) return; // never calls back: times out
        setTimeout(() => callback(null, { batchItemFailures: [] }), 5);
      },
    });
    const stats = await esm.drain({ idleMs: 200 });
    expect(calls).toBe(2);
    expect(esm.invocationLog[0]).toMatchObject({ outcome: 'function-error', error: 'Task timed out after 0.15 seconds' });
    expect(stats).toMatchObject({ invocations: 2, retries: 1, records: 1 });
  });

  it('SplitShard mid-stream: the parent is read to its end before its children; every record once', async () => {
    const { name, shards } = await newStream(1);
    const parent = shards[0]!;
    const before = Array.from({ length: 30 }, (_, i) => `before-${i}`);
    await putTo(name, parent, before);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    let calls = 0;
    const { esm, deliveries } = mapping(name, async () => {
      if (++calls === 2) await gate; // hold the parent mid-stream while the stream is resharded
    }, { batchSize: 5 });
    await esm.start();
    while (calls < 2) await sleep(10);

    const children = await splitShardEvenly(clients.kinesis, name, parent.ShardId!);
    expect(children).toHaveLength(2);
    const all = await listAllShards(clients.kinesis, name);
    const after: string[] = [];
    for (const childId of children) {
      const child = all.find((s) => s.ShardId === childId)!;
      const values = Array.from({ length: 12 }, (_, i) => `${childId}-${i}`);
      const put = await putTo(name, child, values);
      expect(put.every((p) => p.shardId === childId)).toBe(true);
      after.push(...values);
    }
    // Records with random keys too, spread over both children.
    const spread = await putRecordsBatched(clients.kinesis, name, Array.from({ length: 20 }, (_, i) => ({ data: `spread-${i}`, partitionKey: `key-${i * 7919}` })));
    expect(spread.every((p) => children.includes(p.shardId))).toBe(true);
    await sleep(300); // children exist and have records, but must wait for the held parent
    expect(deliveries.every((d) => d.event.Records[0]!.eventID.startsWith(`${parent.ShardId}:`))).toBe(true);
    release();

    const stats = await esm.drain({ idleMs: 300 });
    await esm.stop();
    const delivered = deliveries.flatMap((d) => d.event.Records.map(text));
    expect(delivered).toHaveLength(30 + 24 + 20);
    expect(new Set(delivered).size).toBe(delivered.length);
    expect(new Set(delivered)).toEqual(new Set([...before, ...after, ...spread.map((_, i) => `spread-${i}`)]));

    const shardOf = (d: Delivery): string => d.event.Records[0]!.eventID.split(':')[0]!;
    const parentIdx = deliveries.map((d, i) => (shardOf(d) === parent.ShardId ? i : -1)).filter((i) => i >= 0);
    const childIdx = deliveries.map((d, i) => (shardOf(d) !== parent.ShardId ? i : -1)).filter((i) => i >= 0);
    expect(Math.max(...parentIdx)).toBeLessThan(Math.min(...childIdx));
    expect(deliveries.filter((d) => shardOf(d) === parent.ShardId).flatMap((d) => d.event.Records.map(text))).toEqual(before);
    for (const childId of children) {
      const mine = deliveries.filter((d) => shardOf(d) === childId).flatMap((d) => d.event.Records);
      const ordered = [...mine].sort((x, y) => (big(x.kinesis.sequenceNumber) < big(y.kinesis.sequenceNumber) ? -1 : 1));
      expect(mine).toEqual(ordered);
      expect(mine.filter((r) => text(r).startsWith(childId)).map(text)).toEqual(after.filter((v) => v.startsWith(childId)));
    }
    expect(stats).toMatchObject({ records: 74, shardsCompleted: 1, retries: 0 });
    expect(esm.shards().find((s) => s.shardId === parent.ShardId)).toMatchObject({ status: 'completed', parentShardIds: [] });
    expect(esm.shards().filter((s) => s.parentShardIds.includes(parent.ShardId!))).toHaveLength(2);
  });

  it('MergeShards before start: the child waits until both parents are consumed', async () => {
    const { name, shards } = await newStream(2);
    const [a, b] = shards as [Shard, Shard];
    await putTo(name, a, Array.from({ length: 15 }, (_, i) => `a${i}`));
    await putTo(name, b, Array.from({ length: 15 }, (_, i) => `b${i}`));
    const childId = await mergeShards(clients.kinesis, name, a.ShardId!, b.ShardId!);
    const child = (await listAllShards(clients.kinesis, name)).find((s) => s.ShardId === childId)!;
    await putTo(name, child, Array.from({ length: 10 }, (_, i) => `c${i}`));
    const { esm, deliveries } = mapping(name, async (event) => {
      if (text(event.Records[0]!).startsWith('b')) await sleep(20); // a slower parent
    }, { batchSize: 4 });
    const stats = await esm.drain({ idleMs: 300 });
    const shardOf = (d: Delivery): string => d.event.Records[0]!.eventID.split(':')[0]!;
    const firstChild = deliveries.findIndex((d) => shardOf(d) === childId);
    expect(firstChild).toBeGreaterThan(0);
    expect(deliveries.slice(firstChild).every((d) => shardOf(d) === childId)).toBe(true);
    expect(deliveries.slice(firstChild).flatMap((d) => d.event.Records.map(text))).toEqual(Array.from({ length: 10 }, (_, i) => `c${i}`));
    expect(stats).toMatchObject({ records: 40, shardsCompleted: 2 });
  });

  it('LATEST skips records already in the stream', async () => {
    const { name, shards } = await newStream(1);
    await putTo(name, shards[0]!, ['old0', 'old1']);
    const { esm, deliveries } = mapping(name, ok, { startingPosition: 'LATEST' });
    await esm.start();
    await putTo(name, shards[0]!, ['new0', 'new1']);
    await esm.drain({ idleMs: 200 });
    await esm.stop();
    expect(deliveries.flatMap((d) => d.event.Records.map(text))).toEqual(['new0', 'new1']);
  });

  it('stop() waits for the in-flight invocation; a restart resumes without loss or duplicates', async () => {
    const { name, shards } = await newStream(1);
    await putTo(name, shards[0]!, Array.from({ length: 9 }, (_, i) => `s${i}`));
    let inside = false;
    let finished = 0;
    const { esm, deliveries } = mapping(name, async () => {
      inside = true;
      await sleep(150);
      inside = false;
      finished++;
    }, { batchSize: 3 });
    await esm.start();
    while (!inside) await sleep(5);
    await esm.stop();
    expect(inside).toBe(false);
    expect(finished).toBe(deliveries.length);
    const processedBeforeStop = deliveries.length;
    expect(processedBeforeStop).toBeLessThan(3);

    await putTo(name, shards[0]!, ['s9']);
    await esm.drain({ idleMs: 200 });
    expect(deliveries.flatMap((d) => d.event.Records.map(text))).toEqual(Array.from({ length: 10 }, (_, i) => `s${i}`));
  });

  it('initialCheckpoints: a new mapping resumes after the last processed record', async () => {
    const { name, shards } = await newStream(2);
    await putTo(name, shards[0]!, ['a0', 'a1']);
    await putTo(name, shards[1]!, ['b0']);
    const first = mapping(name, ok);
    await first.esm.drain({ idleMs: 150 });
    expect(first.deliveries.flatMap((d) => d.event.Records.map(text)).sort()).toEqual(['a0', 'a1', 'b0']);

    await putTo(name, shards[0]!, ['a2']);
    await putTo(name, shards[1]!, ['b1', 'b2']);
    const second = mapping(name, ok, { initialCheckpoints: first.esm.checkpoints() });
    await second.esm.drain({ idleMs: 150 });
    expect(second.deliveries.flatMap((d) => d.event.Records.map(text)).sort()).toEqual(['a2', 'b1', 'b2']);
  });

  it('read errors (beforeGetRecords throws) are retried with nothing lost; redeliveries are fresh copies', async () => {
    const { name, shards } = await newStream(1);
    await putTo(name, shards[0]!, ['g0', 'g1', 'g2', 'g3']);
    let readFaults = 2;
    let calls = 0;
    const seen: string[][] = [];
    const { esm } = mapping(name, async (event) => {
      calls++;
      seen.push(event.Records.map(text));
      for (const r of event.Records) r.kinesis.data = 'mutated'; // must not leak into the retry
      if (calls === 1) throw new Error('first attempt fails');
    }, {
      batchSize: 2,
      hooks: { beforeGetRecords: () => { if (readFaults-- > 0) throw new Error('ProvisionedThroughputExceededException'); } },
    });
    const stats = await esm.drain({ idleMs: 200 });
    expect(stats).toMatchObject({ errors: 2, retries: 1, records: 4, invocations: 3 });
    expect(seen).toEqual([['g0', 'g1'], ['g0', 'g1'], ['g2', 'g3']]);
  });

  it('chaos: random throws, partial failures, lost responses and read errors never lose or reorder an acknowledged record', async () => {
    const { name, shards } = await newStream(2);
    const expected = new Map<string, string[]>();
    for (const shard of shards) {
      const put = await putTo(name, shard, Array.from({ length: 120 }, (_, i) => `${shard.ShardId}#${i}`));
      expected.set(shard.ShardId!, put.map((p) => p.sequenceNumber));
    }
    let state = 0x2545f491;
    const random = (): number => { state ^= state << 13; state ^= state >>> 17; state ^= state << 5; return (state >>> 0) / 2 ** 32; };
    const { esm } = mapping(name, async (event) => {
      const roll = random();
      if (roll < 0.15) throw new Error('chaos: handler threw');
      if (roll < 0.35) {
        const k = Math.floor(random() * event.Records.length);
        return { batchItemFailures: [{ itemIdentifier: event.Records[k]!.kinesis.sequenceNumber }] };
      }
      return undefined;
    }, {
      batchSize: 9, bisectBatchOnFunctionError: true,
      hooks: {
        afterInvoke: () => { if (random() < 0.1) throw new Error('chaos: crashed after the handler'); },
        beforeInvoke: () => { if (random() < 0.05) throw new Error('chaos: throttled'); },
        beforeGetRecords: () => { if (random() < 0.05) throw new Error('chaos: read error'); },
      },
    });
    const stats = await esm.drain({ idleMs: 300 });
    // What Lambda considers processed: whole successful batches, and the prefix before a partial failure.
    const acked = new Map<string, string[]>();
    for (const entry of esm.invocationLog) {
      const done = entry.outcome === 'success' ? entry.sequenceNumbers
        : entry.outcome === 'partial-failure' ? entry.sequenceNumbers.slice(0, entry.sequenceNumbers.indexOf(entry.failedSequenceNumber!))
          : [];
      acked.set(entry.shardId, [...(acked.get(entry.shardId) ?? []), ...done]);
    }
    expect(acked).toEqual(expected);
    expect(stats.records).toBe(240);
    expect(stats.failedBatches).toBe(0);
    expect(stats.retries + stats.bisects).toBeGreaterThan(10);
    expect(esm.checkpoints()).toEqual(Object.fromEntries([...expected].map(([id, list]) => [id, list.at(-1)!])));
  });

  it('drain on an idle stream returns promptly; a handler never runs with an empty batch', async () => {
    const { name } = await newStream(1);
    const { esm, deliveries } = mapping(name, ok);
    const startedAt = Date.now();
    const stats = await esm.drain({ idleMs: 200 });
    expect(Date.now() - startedAt).toBeLessThan(3_000);
    expect(deliveries).toHaveLength(0);
    expect(stats.invocations).toBe(0);
  });
});
