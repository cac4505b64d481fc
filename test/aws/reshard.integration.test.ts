/**
 * Resharding under stateful queries, on the emulators (kinesis-mock's SplitShard / MergeShards,
 * DynamoDB Local, s3rver): the same events, in the same phases, run once on a stream that is never
 * resharded and once with reshards between the phases; the sinks must hold the same rows. Paths:
 * the local event source mapping (Lambda's ESM) and the scheduled function's drain; one stage and a
 * repartition stage (its source stream or its internal stream resharded).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { readS3Files, readS3Snapshots, scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { deploy, type Deployment } from '../support/aws-pipeline.js';
import { reshardStream, type ReshardStep } from '../../lib/local/kinesis-admin.js';

type Mode = 'append' | 'update' | 'complete';
type Path = 'esm' | 'drain';

const hourlySales = (df: DataFrame): DataFrame => df
  .withWatermark('ts', '15 minutes')
  .groupBy(window(col('ts'), '1 hour'), col('store_id'))
  .agg(sum('amount').as('revenue'), count('*').as('orders'));

/** One stage: the producer's partition key is the grouping column. Else a repartition stage. */
function query(mode: Mode, repartition: boolean, n: number, snapshots = false): StreamingQueryDefinition {
  return defineQuery({
    name: `reshard-${mode}-${repartition ? 'rp' : 'one'}-${n}`,
    source: repartition
      ? { schema: 'order_id string, store_id string, amount long, ts timestamp' }
      : { schema: 'order_id string, store_id string, amount long, ts timestamp', partitionKey: 'store_id' },
    transform: hourlySales,
    outputMode: mode,
    sink: mode === 'append' ? { kind: 's3-files' } : snapshots ? { kind: 's3-snapshot' } : { kind: 'dynamodb' },
  });
}

interface Sale { order_id: string; store_id: string; amount: number; ts: string }
const stores = ['north', 'south', 'east', 'west', 'central', 'harbor', 'airport', 'mall', 'station', 'campus'];
/** In event-time order over 14:00–19:50, so nothing is late and the runs can only differ by state. */
const sales: Sale[] = Array.from({ length: 60 }, (_, i) => ({
  order_id: `o${i}`,
  store_id: stores[(i * 7) % stores.length]!,
  amount: 1 + ((i * 13) % 29),
  ts: new Date(Date.UTC(2024, 4, 1, 14, 0) + i * 6 * 60_000).toISOString(),
}));
const phases = [sales.slice(0, 20), sales.slice(20, 40), sales.slice(40)];

function records(events: Sale[], repartition: boolean) {
  return events.map((e) => ({ data: JSON.stringify(e), partitionKey: repartition ? e.order_id : e.store_id }));
}

async function process(d: Deployment, path: Path): Promise<void> {
  if (path === 'esm') await d.drain({ batchSize: 10 });
  else {
    // Two passes: stage 1 sends, then stage 2 (and children after their parents) catch up.
    for (let i = 0; i < 3; i++) await d.tick(Date.now(), 'drain');
  }
}

async function sinkRows(d: Deployment, mode: Mode, snapshots = false): Promise<string[]> {
  const rows = mode === 'append'
    ? await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)
    : snapshots
      ? await readS3Snapshots(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)
      : await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
  return rows.map((r) => JSON.stringify({ window: r.window, store_id: r.store_id, revenue: r.revenue, orders: r.orders })).sort();
}

interface Scenario {
  readonly mode: Mode;
  readonly path: Path;
  readonly repartition?: boolean;
  /** Which stream is resharded (with a repartition stage): the source stream or the internal one. */
  readonly stream?: 'source' | 'internal';
  readonly shards?: number;
  readonly internalShards?: number;
  /** Reshards after each phase but the last. */
  readonly steps: readonly (readonly ReshardStep[])[];
  /** Reshard before the phase's records are processed (the parent still has unread records). */
  readonly reshardBeforeProcessing?: boolean;
  /** Complete mode to the S3 snapshot sink (else DynamoDB). */
  readonly snapshots?: boolean;
}

let runs = 0;

async function run(scenario: Scenario, reshard: boolean): Promise<{ rows: string[]; d: Deployment; phaseRows: string[][] }> {
  const repartition = scenario.repartition ?? false;
  const snapshots = scenario.snapshots ?? false;
  const phaseRows: string[][] = [];
  const d = await deploy(emulators, query(scenario.mode, repartition, ++runs, snapshots), scenario.shards ?? 1, {
    ...(repartition ? { repartitionShards: scenario.internalShards ?? 1, expectedShardCount: undefined } : {}),
  });
  const started = Date.now();
  const streamName = scenario.stream === 'internal' ? d.config.repartitionStreamName! : d.config.streamName;
  for (let i = 0; i < phases.length; i++) {
    await d.put(records(phases[i]!, repartition));
    const steps = reshard ? scenario.steps[i] ?? [] : [];
    if (scenario.reshardBeforeProcessing && steps.length > 0) await reshardStream(d.clients.kinesis, streamName, steps);
    await process(d, scenario.path);
    // What a reader sees once the phase is processed (complete mode: the answer so far).
    if (snapshots) phaseRows.push(await sinkRows(d, scenario.mode, true));
    if (globalThis.process.env.RESHARD_DEBUG) console.log(reshard ? 'resharded' : 'baseline', 'phase', i, Date.now() - started, 'ms');
    if (!scenario.reshardBeforeProcessing && steps.length > 0) await reshardStream(d.clients.kinesis, streamName, steps);
  }
  await process(d, scenario.path);
  // Every shard confirmed idle: the last windows close (append), as in the run without reshards.
  await d.tick(Date.now() + 10 * 60_000);
  await d.tick(Date.now() + 20 * 60_000);
  if (repartition) {
    await d.tick(Date.now() + 30 * 60_000, 'drain');
    await d.tick(Date.now() + 40 * 60_000);
  }
  return { rows: await sinkRows(d, scenario.mode, snapshots), d, phaseRows };
}

async function expectSameAsWithoutReshard(scenario: Scenario): Promise<void> {
  const [baseline, resharded] = await Promise.all([run(scenario, false), run(scenario, true)]);
  expect(baseline.rows.length).toBeGreaterThan(0);
  expect(resharded.rows).toEqual(baseline.rows);
  expect(resharded.phaseRows).toEqual(baseline.phaseRows);
  // The reshard happened: some committed batch ran on a child shard.
  const children = new Set(resharded.d.results.filter((r) => r.result.progress.length > 0).map((r) => r.shardId));
  expect([...children].some((s) => s !== 'shardId-000000000000' && s !== 'shardId-000000000001')).toBe(true);
}

const TIMEOUT = Number(globalThis.process.env.RESHARD_TEST_TIMEOUT_MS ?? 240_000);
let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const split: ReshardStep = { split: 'first-open' };
const merge: ReshardStep = { merge: 'first-adjacent' };

describe('resharding a stateful query gives the answer of the run without resharding (one stage)', () => {
  it('split mid-stream, update mode, event source mapping', async () => {
    await expectSameAsWithoutReshard({ mode: 'update', path: 'esm', steps: [[split]] });
  }, TIMEOUT);

  it('split mid-stream, update mode, scheduled drain (the path that ran children with empty state)', async () => {
    await expectSameAsWithoutReshard({ mode: 'update', path: 'drain', steps: [[split]] });
  }, TIMEOUT);

  it('merge mid-stream, append mode, event source mapping', async () => {
    await expectSameAsWithoutReshard({ mode: 'append', path: 'esm', shards: 2, steps: [[merge]] });
  }, TIMEOUT);

  it('split twice (a child split again before it ran), complete mode, scheduled drain', async () => {
    await expectSameAsWithoutReshard({ mode: 'complete', path: 'drain', steps: [[split], [split, split]], reshardBeforeProcessing: true });
  }, TIMEOUT);

  it('split then merge back mid-stream, complete mode to the S3 snapshot sink: a reader sees each phase\'s answer, never a parent\'s rows beside its children\'s', async () => {
    await expectSameAsWithoutReshard({ mode: 'complete', path: 'esm', snapshots: true, steps: [[split], [merge]] });
  }, TIMEOUT);

  it('split then merge back, append mode, the parent still holding unread records at the reshard', async () => {
    await expectSameAsWithoutReshard({ mode: 'append', path: 'esm', steps: [[split], [merge]], reshardBeforeProcessing: true });
  }, TIMEOUT);
});

describe('resharding under a repartition stage', () => {
  it('the internal stream split mid-stream, update mode, event source mapping', async () => {
    await expectSameAsWithoutReshard({ mode: 'update', path: 'esm', repartition: true, stream: 'internal', steps: [[split]] });
  }, TIMEOUT);

  it('the internal stream merged, append mode, scheduled drain', async () => {
    await expectSameAsWithoutReshard({ mode: 'append', path: 'drain', repartition: true, stream: 'internal', internalShards: 2, steps: [[merge]] });
  }, TIMEOUT);

  it('the internal stream split twice, complete mode, event source mapping', async () => {
    await expectSameAsWithoutReshard({ mode: 'complete', path: 'esm', repartition: true, stream: 'internal', steps: [[split], [split]] });
  }, TIMEOUT);

  it('the source stream split (stage 1 stateless), update mode, scheduled drain', async () => {
    await expectSameAsWithoutReshard({ mode: 'update', path: 'drain', repartition: true, stream: 'source', steps: [[split]] });
  }, TIMEOUT);
});
