/**
 * The resharding scenarios the emulator tests share (test/aws/reshard*.integration.test.ts): an
 * hourly sales aggregate over 60 orders in event-time order, put in three phases, with reshards
 * of the source stream or of the internal stream between the phases, processed by the local event
 * source mapping (Lambda's ESM), the scheduled function's drain, or ticks beside the ESM. The
 * answer is compared with the run without reshards: on the emulators, or in memory.
 */
import { expect } from 'vitest';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { readS3Files, readS3Snapshots, scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import type { EmulatorSet } from '../../lib/local/emulators.js';
import { canonicalJson } from '../../lib/local/chaos/compare.js';
import { runInMemory } from '../../lib/local/chaos/memory-reference.js';
import { reshardStream, type ReshardStep } from '../../lib/local/kinesis-admin.js';
import { col, count, sum, window } from '../../lib/plan/functions.js';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { deploy, type Deployment } from './aws-pipeline.js';

export type Mode = 'append' | 'update' | 'complete';
export type SinkKind = 'dynamodb' | 's3-files' | 's3-snapshot';
/**
 * esm: the event source mapping; drain: the scheduled function's drain; tick: a scheduled tick
 * (no-data batches on every shard, the children's parents still holding records) before the ESM.
 */
export type Path = 'esm' | 'drain' | 'tick';

export const split: ReshardStep = { split: 'first-open' };
export const merge: ReshardStep = { merge: 'first-adjacent' };

const hourlySales = (df: DataFrame): DataFrame => df
  .withWatermark('ts', '15 minutes')
  .groupBy(window(col('ts'), '1 hour'), col('store_id'))
  .agg(sum('amount').as('revenue'), count('*').as('orders'));

/** The sink a mode used before `sink` could be chosen: files for append, a table otherwise. */
function defaultSink(mode: Mode, snapshots: boolean): SinkKind {
  return mode === 'append' ? 's3-files' : snapshots ? 's3-snapshot' : 'dynamodb';
}

/** One stage: the producer's partition key is the grouping column. Else a repartition stage. */
export function reshardQuery(mode: Mode, repartition: boolean, name: string, sink: SinkKind): StreamingQueryDefinition {
  return defineQuery({
    name,
    source: repartition
      ? { schema: 'order_id string, store_id string, amount long, ts timestamp' }
      : { schema: 'order_id string, store_id string, amount long, ts timestamp', partitionKey: 'store_id' },
    transform: hourlySales,
    outputMode: mode,
    sink: { kind: sink },
  });
}

interface Sale { order_id: string; store_id: string; amount: number; ts: string }
const stores = ['north', 'south', 'east', 'west', 'central'];
/**
 * In event-time order over 14:00–19:54, so nothing is late and the runs can only differ by state:
 * each store has two orders an hour, one in each half hour.
 */
export const sales: Sale[] = Array.from({ length: 60 }, (_, i) => ({
  order_id: `o${i}`,
  store_id: stores[(i * 2) % stores.length]!,
  amount: 1 + ((i * 13) % 29),
  ts: new Date(Date.UTC(2024, 4, 1, 14, 0) + i * 6 * 60_000).toISOString(),
}));
/**
 * Cut in the middle of the 16:00 and 18:00 windows: every store's rows of those windows come
 * before and after the reshard, so a child that did not start from its parent's state answers
 * with part of a group (update and complete modes) or loses an open window (append).
 */
export const phases = [sales.slice(0, 25), sales.slice(25, 45), sales.slice(45)];

/** Long behind the first phase's watermark (16:09): every run drops it, unless a child forgot its parent's watermark. */
const LATE: Sale = { order_id: 'late', store_id: 'north', amount: 100, ts: new Date(Date.UTC(2024, 4, 1, 14, 5)).toISOString() };

/** The scenario's phases: with `late`, the second phase (after the first reshard) starts with a late order. */
export function phasesOf(scenario: Pick<Scenario, 'late'>): Sale[][] {
  return scenario.late ? [phases[0]!, [LATE, ...phases[1]!], phases[2]!] : phases;
}

function records(events: Sale[], repartition: boolean) {
  return events.map((e) => ({ data: JSON.stringify(e), partitionKey: repartition ? e.order_id : e.store_id }));
}

async function process(d: Deployment, path: Path): Promise<void> {
  if (path === 'drain') {
    // Two passes: stage 1 sends, then stage 2 (and children after their parents) catch up.
    for (let i = 0; i < 3; i++) await d.tick(Date.now(), 'drain');
    return;
  }
  // A tick while a child's parent still holds records: the child must not run (nor commit) yet.
  if (path === 'tick') await d.tick(Date.now(), 'tick');
  await d.drain({ batchSize: 10 });
}

/** The result columns as canonical text, sorted (every sink reads back external rows). */
export function canonicalRows(rows: readonly Record<string, unknown>[]): string[] {
  return rows.map((r) => canonicalJson({ window: r.window, store_id: r.store_id, revenue: r.revenue, orders: r.orders })).sort();
}

async function sinkRows(d: Deployment, sink: SinkKind): Promise<string[]> {
  const rows = sink === 's3-files'
    ? await readS3Files(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)
    : sink === 's3-snapshot'
      ? await readS3Snapshots(d.clients.s3, d.config.sinkBucket!, d.config.sinkPrefix)
      : await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
  return canonicalRows(rows);
}

export interface Scenario {
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
  /** Complete mode to the S3 snapshot sink (else DynamoDB); `sink` says it for any mode. */
  readonly snapshots?: boolean;
  readonly sink?: SinkKind;
  /** A late order right after the first reshard (the children must carry their parent's watermark). */
  readonly late?: boolean;
}

export const sinkOf = (scenario: Scenario): SinkKind => scenario.sink ?? defaultSink(scenario.mode, scenario.snapshots ?? false);

let runs = 0;

export interface ScenarioRun {
  readonly rows: string[];
  readonly d: Deployment;
  /** What a snapshot reader saw after each phase (S3 snapshot sink only). */
  readonly phaseRows: string[][];
}

/** Deploys the scenario's query on the emulators and runs its phases, resharding between them when `reshard`. */
export async function runScenario(emulators: EmulatorSet, scenario: Scenario, reshard: boolean): Promise<ScenarioRun> {
  const repartition = scenario.repartition ?? false;
  const sink = sinkOf(scenario);
  const phaseRows: string[][] = [];
  const name = `reshard-${scenario.mode}-${repartition ? 'rp' : 'one'}-${++runs}`;
  const d = await deploy(emulators, reshardQuery(scenario.mode, repartition, name, sink), scenario.shards ?? 1, {
    ...(repartition ? { repartitionShards: scenario.internalShards ?? 1, expectedShardCount: undefined } : {}),
  });
  const started = Date.now();
  const streamName = scenario.stream === 'internal' ? d.config.repartitionStreamName! : d.config.streamName;
  const phased = phasesOf(scenario);
  for (let i = 0; i < phased.length; i++) {
    await d.put(records(phased[i]!, repartition));
    const steps = reshard ? scenario.steps[i] ?? [] : [];
    if (scenario.reshardBeforeProcessing && steps.length > 0) await reshardStream(d.clients.kinesis, streamName, steps);
    await process(d, scenario.path);
    // What a reader sees once the phase is processed (complete mode: the answer so far).
    if (sink === 's3-snapshot') phaseRows.push(await sinkRows(d, sink));
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
  return { rows: await sinkRows(d, sink), d, phaseRows };
}

/**
 * The same records in memory, in the order they were put: one partition, never resharded
 * (lib/local/chaos/memory-reference.ts). Complete mode: the answer over those records.
 */
export async function inMemoryAnswer(mode: Mode, events: readonly Sale[] = sales): Promise<string[]> {
  const placed = events.map((e, i) => ({ shardId: 'memory', sequenceNumber: String(i), partitionKey: e.store_id, data: JSON.stringify(e) }));
  const { rows } = await runInMemory(reshardQuery(mode, false, 'reshard-in-memory', mode === 'append' ? 's3-files' : 'dynamodb'), placed, { batchSize: 10 });
  return canonicalRows(rows);
}

/**
 * The shards of the resharded stream that committed a batch and are not among its first
 * `initialShards`: the reshard's children ran (stage 2's when the internal stream was resharded).
 */
export function childShardsThatRan(d: Deployment, scenario: Scenario): string[] {
  const internal = scenario.stream === 'internal';
  const initial = (internal ? scenario.internalShards : scenario.shards) ?? 1;
  const original = Array.from({ length: initial }, (_, i) => `shardId-${String(i).padStart(12, '0')}`);
  return [...new Set(d.results
    .filter((r) => r.result.progress.length > 0 && (r.result.stage.reads === 'internal-stream') === internal)
    .map((r) => r.shardId))].filter((s) => !original.includes(s));
}

/**
 * Runs the scenario with its reshards on the emulators and expects the in-memory engine's answer
 * (for the S3 snapshot sink, after every phase too: the in-memory answer over the records so far),
 * a child shard that committed batches, and no error but a child waiting for its parents (or
 * stage 1 resending after a reshard of the internal stream).
 */
export async function expectInMemoryAnswer(emulators: EmulatorSet, scenario: Scenario): Promise<ScenarioRun> {
  const phased = phasesOf(scenario);
  const expected = await inMemoryAnswer(scenario.mode, phased.flat());
  expect(expected.length).toBeGreaterThan(0);
  const run = await runScenario(emulators, scenario, true);
  expect(run.rows).toEqual(expected);
  if (sinkOf(scenario) === 's3-snapshot') {
    const sofar = await Promise.all(phased.map((_, i) => inMemoryAnswer(scenario.mode, phased.slice(0, i + 1).flat())));
    expect(run.phaseRows).toEqual(sofar);
  }
  expect(childShardsThatRan(run.d, scenario)).not.toEqual([]);
  const errors = run.d.results.map((r) => (r.result.error as { code?: string } | undefined)?.code ?? r.result.error?.message).filter((c) => c !== undefined);
  expect(errors.filter((c) => c !== 'RESHARD_PARENT_PENDING' && c !== 'REPARTITION_RESHARDED')).toEqual([]);
  return run;
}
