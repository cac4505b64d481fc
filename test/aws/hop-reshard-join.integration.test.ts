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
import { canonicalRow, inMemoryJoin, joinEvents, joinPhases, joinQuery, prng, type Order } from '../support/join-queries.js';
import { inMemoryNullKeyJoins, nullKeyEvents, nullKeyOuterJoins, nullKeyPhases } from '../support/null-key-join.js';
import { inMemoryThree, joinThenJoin, joinThenJoinOnOtherKey, joinThenWindowedSum, shipmentsByAmount, shipmentsFor } from '../support/chain-queries.js';

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

  /**
   * Stage 2 runs two joins' worth of routing, and each stateful operator routes its entries by its
   * own key. Before, both were refused on a split (RESHARD_WITH_STATE) and the children never ran:
   * - orders ⋈ payments on order_id, then ⋈ shipments on amount = zone: stage 2 holds the first
   *   join's state, routed by order_id, and forwards the shipments routed by zone;
   * - orders ⋈ payments ⋈ shipments on order_id = ref = sid: both joins in stage 2, each by its key
   *   of the class (UpdateShardCount, as a changed repartitionShardCount deploys it).
   */
  it.each([
    ['a join feeding a join on another key: split, then merge', () => joinThenJoinOnOtherKey('hop-reshard-unroutable', 'left_outer'),
      (orders: Order[]) => shipmentsByAmount(orders, 5), [[{ split: 'first-open' }], [{ merge: 'first-adjacent' }]]],
    ['joins chained in stage 2: UpdateShardCount 1 → 2 → 1', () => joinThenJoin('hop-reshard-chain', 'left_outer'),
      (orders: Order[]) => shipmentsFor(orders, 7), [[{ shardCount: 2 }], [{ shardCount: 1 }]]],
  ] as const)('%s of the internal stream, mid-run — the in-memory answer', async (_title, queryOf, shipmentsOf, reshardSteps) => {
    const query = queryOf();
    const compiled = compileQuery(query, { allowRepartition: true });
    expect(compiled.stages.find((s) => s.index === 1)!.inputHop?.stateUnroutable).toBeUndefined();
    const base = joinEvents(180, 13);
    const events = { ...base, shipments: shipmentsOf(base.orders) };
    const expected = await inMemoryThree(query, events);
    expect(expected.length).toBeGreaterThan(50);
    const d = await deploy(emulators, query, 2, { repartitionShards: 1, expectedShardCount: undefined, hops: compiled.hops.length });
    const hop0 = d.config.repartitionStreamNames?.[0] ?? d.config.repartitionStreamName!;
    const rand = prng(31);
    const phases = joinPhases(base);
    const cuts = phases.map((p) => Math.max(...p.orders.map((o) => Date.parse(o.ts))));
    const shipmentsIn = (i: number) => events.shipments.filter((s) => {
      const t = Date.parse(s.sts);
      return (i === 0 || t > cuts[i - 1]!) && (i === phases.length - 1 || t <= cuts[i]!);
    });
    const reshards: readonly (readonly ReshardStep[])[] = reshardSteps;
    const children: string[] = [];
    for (let i = 0; i < phases.length; i++) {
      for (const [source, rows] of [['orders', phases[i]!.orders], ['payments', phases[i]!.payments], ['shipments', shipmentsIn(i)]] as const) {
        await d.put(rows.map((e) => ({ data: JSON.stringify(e), partitionKey: `k${Math.floor(rand() * 1e6)}` })), source);
      }
      // The last phase first by the scheduled drain (its guard seeds the merge's child), then the mappings.
      if (i === phases.length - 1) for (let stage = 0; stage <= compiled.hops.length; stage++) await d.tick(Date.now(), 'drain');
      await d.drain({ batchSize: 20 });
      if (reshards[i]) children.push(...(await reshardStream(d.clients.kinesis, hop0, reshards[i]!)).flat());
    }
    await d.drain({ batchSize: 20 });
    for (let tick = 0; tick <= compiled.hops.length + 1; tick++) await d.tick(Date.now() + 3_600_000);
    const rows = (await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)).map((r) => canonicalRow(r)).sort();
    expect(rows).toEqual(expected);
    expect(d.results.map((r) => (r.result.error as { code?: string } | undefined)?.code).filter((c) => c !== undefined && c !== 'RESHARD_PARENT_PENDING' && c !== 'REPARTITION_RESHARDED')).toEqual([]);
    // The split's children started from their parent's join rows, and every child of stage 2 committed batches.
    expect(children.length).toBe(3);
    const carried = children.slice(0, 2).map((s) => joinRowsAtStart(d, s, 1));
    expect(carried.every((n) => n !== null && n > 0)).toBe(true);
    for (const child of children) expect(d.results.some((r) => r.shardId === child && r.result.stage.index === 1 && r.result.progress.length > 0)).toBe(true);
  }, TIMEOUT);

  /**
   * NULL join keys on preserved sides (test/support/null-key-join.ts): payments without a ref, and
   * the first join's NULL-padded orders under the second join's key. The padded rows sit on the
   * shard their ref was routed to, so after the split both children buffer rows under the NULL
   * key; the merge's child must start from all of them (before: RESHARD_STATE_CONFLICT, the child
   * refused and never ran) and emit each NULL row once.
   */
  it('outer joins with NULL keys on their preserved sides: split, then merge, mid-run — the in-memory answer', async () => {
    const query = nullKeyOuterJoins('hop-reshard-null-keys');
    const compiled = compileQuery(query, { allowRepartition: true });
    const events = nullKeyEvents(150, 5);
    const expected = await inMemoryNullKeyJoins(query, events);
    // Rows whose NULL key waited in state on a preserved side, in both joins.
    expect(expected.filter((r) => r.includes('"ref":null')).length).toBeGreaterThan(3);
    expect(expected.filter((r) => r.includes('"order_id":null') && !r.includes('"ref":null')).length).toBeGreaterThan(3);
    const d = await deploy(emulators, query, 2, { repartitionShards: 1, expectedShardCount: undefined, hops: compiled.hops.length });
    const hop0 = d.config.repartitionStreamNames?.[0] ?? d.config.repartitionStreamName!;
    const rand = prng(41);
    const phases = nullKeyPhases(events);
    const reshards: readonly ReshardStep[][] = [[{ split: 'first-open' }], [{ merge: 'first-adjacent' }]];
    const children: string[] = [];
    for (let i = 0; i < phases.length; i++) {
      for (const source of ['orders', 'payments', 'shipments'] as const) {
        await d.put(phases[i]![source].map((e) => ({ data: JSON.stringify(e), partitionKey: `k${Math.floor(rand() * 1e6)}` })), source);
      }
      await d.drain({ batchSize: 20 });
      if (reshards[i]) children.push(...(await reshardStream(d.clients.kinesis, hop0, reshards[i]!)).flat());
    }
    await d.drain({ batchSize: 20 });
    for (let tick = 0; tick <= compiled.hops.length + 1; tick++) await d.tick(Date.now() + 3_600_000);
    const rows = (await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)).map((r) => canonicalRow(r)).sort();
    expect(d.results.map((r) => (r.result.error as { code?: string } | undefined)?.code).filter((c) => c !== undefined && c !== 'RESHARD_PARENT_PENDING' && c !== 'REPARTITION_RESHARDED')).toEqual([]);
    expect(rows).toEqual(expected);
    expect(children.length).toBe(3);
    for (const child of children) expect(d.results.some((r) => r.shardId === child && r.result.stage.index === 1 && r.result.progress.length > 0)).toBe(true);
    // The merge's child started from rows of both parents.
    const [a, b, merged] = children.map((s) => joinRowsAtStart(d, s, 1));
    expect(merged).toBeGreaterThan(0);
    expect(a! + b!).toBeGreaterThan(0);
  }, TIMEOUT);
});
