/**
 * The internal stream resharded mid-run under join state, on the emulators (kinesis-mock's
 * SplitShard, MergeShards and UpdateShardCount; DynamoDB Local; s3rver). Orders and payments go in
 * three phases cut by event time; between the phases the internal stream(s) are split, merged or
 * scaled with UpdateShardCount. Each child starts from its parents' join state restricted to its
 * hash range (a merge: the union) once their last records are committed, with their watermarks
 * and, for each of the join's inputs, what they applied. The sink must hold the in-memory engine's
 * rows. Before this, a split child of a join was refused (RESHARD_WITH_STATE) and never ran.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readS3Files } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { listAllShards, reshardStream, type ReshardStep } from '../../lib/local/kinesis-admin.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import type { MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';
import { canonicalRow, inMemoryJoin, joinEvents, joinPhases, joinQuery, prng } from '../support/join-queries.js';
import { inMemoryThree, joinThenJoinOnOtherKey, joinThenWindowedSum, shipmentsByAmount } from '../support/chain-queries.js';
import type { ScheduledTriggerSummary } from '../../lib/aws/scheduled-trigger-handler.js';

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const TIMEOUT = Number(process.env.RESHARD_TEST_TIMEOUT_MS ?? 600_000);

/** Reshards per internal stream (hop index) after each phase but the last. */
type Plan = readonly (Readonly<Record<number, readonly ReshardStep[]>>)[];

async function runWithReshards(query: MultiSourceQueryDefinition, events: ReturnType<typeof joinEvents>, plan: Plan): Promise<{ rows: string[]; d: Deployment }> {
  const hops = compileQuery(query, { allowRepartition: true }).hops.length;
  const d = await deploy(emulators, query, 2, { repartitionShards: 2, expectedShardCount: undefined, hops });
  const internal = d.config.repartitionStreamNames ?? [d.config.repartitionStreamName!];
  const rand = prng(23);
  const key = () => `k${Math.floor(rand() * 1e6)}`;
  const phases = joinPhases(events);
  for (let i = 0; i < phases.length; i++) {
    await d.put(phases[i]!.orders.map((e) => ({ data: JSON.stringify(e), partitionKey: key() })), 'orders');
    await d.put(phases[i]!.payments.map((e) => ({ data: JSON.stringify(e), partitionKey: key() })), 'payments');
    await d.drain({ batchSize: 20 });
    for (const [hop, steps] of Object.entries(plan[i] ?? {})) await reshardStream(d.clients.kinesis, internal[Number(hop)]!, steps);
  }
  await d.drain({ batchSize: 20 });
  // Every source shard caught up and quiet: idle; one tick per stage lets each forward its watermark.
  for (let tick = 0; tick <= hops + 1; tick++) await d.tick(Date.now() + 3_600_000);
  const rows = (await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)).map((r) => canonicalRow(r)).sort();
  return { rows, d };
}

/** The join's buffered rows each child started with: from its first committed batch's progress. */
function joinRowsAtStart(d: Deployment, shardId: string, stageIndex: number): number | null {
  const first = d.results.filter((r) => r.shardId === shardId && r.result.stage.index === stageIndex).flatMap((r) => r.result.progress)[0];
  return first?.stateOperators[0]?.numRowsTotal ?? null;
}

describe('resharding the internal stream under a stream-stream join', () => {
  it('left outer join: split, then merge, mid-run — the in-memory answer', async () => {
    const query = joinQuery('hop-reshard-join', 'left_outer');
    const events = joinEvents(240, 31);
    const expected = await inMemoryJoin(query, events);
    expect(expected.length).toBeGreaterThan(100);
    const { rows, d } = await runWithReshards(query, events, [{ 0: [{ split: 'first-open' }] }, { 0: [{ merge: 'first-adjacent' }] }]);
    expect(rows).toEqual(expected);
    expect(d.results.map((r) => (r.result.error as { code?: string } | undefined)?.code).filter((c) => c !== undefined && c !== 'RESHARD_PARENT_PENDING' && c !== 'REPARTITION_RESHARDED')).toEqual([]);
    // The split's children (2, 3) and the merge's child (4) ran, starting from their parents' join rows.
    const shards = await listAllShards(d.clients.kinesis, d.config.repartitionStreamName!);
    expect(shards.map((s) => s.ShardId)).toEqual(expect.arrayContaining(['shardId-000000000002', 'shardId-000000000003', 'shardId-000000000004']));
    const carried = ['shardId-000000000002', 'shardId-000000000003'].map((s) => joinRowsAtStart(d, s, 1));
    expect(carried.every((n) => n !== null && n > 0)).toBe(true);
  }, TIMEOUT);

  it('inner join → windowed sum: both internal streams scaled with UpdateShardCount (up, then down), hop 2 split too — the in-memory answer', async () => {
    const query = joinThenWindowedSum('hop-reshard-join-sum');
    const events = joinEvents(240, 37);
    const expected = await inMemoryJoin(query, events);
    expect(expected.length).toBeGreaterThan(2);
    const { rows, d } = await runWithReshards(query, events, [
      { 0: [{ shardCount: 4 }], 1: [{ split: 'first-open' }] },
      // Kinesis scales by at most half or double per call.
      { 0: [{ shardCount: 2 }], 1: [{ shardCount: 2 }] },
    ]);
    expect(rows).toEqual(expected);
    const internal = d.config.repartitionStreamNames!;
    const open = async (stream: string) => (await listAllShards(d.clients.kinesis, stream)).filter((s) => s.SequenceNumberRange?.EndingSequenceNumber === undefined);
    expect((await open(internal[0]!)).length).toBe(2);
    expect((await open(internal[1]!)).length).toBe(2);
    // Children of hop 1 committed join batches.
    expect(d.results.some((r) => r.result.stage.index === 1 && !['shardId-000000000000', 'shardId-000000000001'].includes(r.shardId) && r.result.progress.length > 0)).toBe(true);
  }, TIMEOUT);

  it('a split of an internal stream whose stage 2 runs each side of a join on its own routing is refused, never mis-routed', async () => {
    // orders ⋈ payments on order_id, then ⋈ shipments on amount = zone: stage 2 holds the first
    // join's state and forwards the shipments routed by zone, so no one key list routes its state.
    const query = joinThenJoinOnOtherKey('hop-reshard-unroutable');
    const compiled = compileQuery(query, { allowRepartition: true });
    expect(compiled.stages.find((s) => s.index === 1)!.inputHop?.stateUnroutable).toBeDefined();
    const base = joinEvents(120, 13);
    const events = { ...base, shipments: shipmentsByAmount(base.orders, 5) };
    const expected = new Set(await inMemoryThree(query, events));
    const d = await deploy(emulators, query, 1, { repartitionShards: 1, expectedShardCount: undefined, hops: compiled.hops.length });
    const rand = prng(31);
    const put = async (half: 0 | 1): Promise<void> => {
      for (const [source, rows] of Object.entries(events) as [string, object[]][]) {
        const cut = Math.floor(rows.length / 2);
        await d.put((half === 0 ? rows.slice(0, cut) : rows.slice(cut)).map((e) => ({ data: JSON.stringify(e), partitionKey: `k${Math.floor(rand() * 1e6)}` })), source);
      }
    };
    await put(0);
    await d.drain({ batchSize: 20 });
    const before = d.results.filter((r) => r.result.stage.index === 1).reduce((n, r) => n + r.result.progress.length, 0);
    expect(before).toBeGreaterThan(0);
    const hop0 = d.config.repartitionStreamNames![0]!;
    const [children] = await reshardStream(d.clients.kinesis, hop0, [{ split: 'first-open' }]);
    await put(1);
    // The scheduled drain: stage 1 sends the second half into the children, stage 2 must refuse them.
    let summary: ScheduledTriggerSummary | undefined;
    for (let i = 0; i < 2; i++) summary = await d.tick(Date.now(), 'drain') as ScheduledTriggerSummary;
    const refused = summary!.shards.filter((s) => children!.includes(s.shardId) && s.stage !== 'source');
    expect(refused.length).toBeGreaterThan(0);
    for (const s of refused) expect(s.error).toMatch(/cannot be divided between its children: stage 2 runs each side of a join on its own routing/);
    // No child of the split ever committed a batch, and nothing in the sink is a row the query does not give.
    expect(d.results.filter((r) => r.result.stage.index === 1 && children!.includes(r.shardId) && r.result.progress.length > 0)).toEqual([]);
    const rows = (await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)).map((r) => canonicalRow(r));
    expect(rows.filter((r) => !expected.has(r))).toEqual([]);
  }, TIMEOUT);
});
