/**
 * The end-to-end cost benchmark: the real Lambda handlers (Kinesis trigger, scheduled tick) on the
 * emulators, every AWS SDK call traced, for
 *
 *   update   → DynamoDB     groupBy(window(event_time, 5 min), user_id).agg(count, sum(amount))
 *   append   → S3 files     the same aggregation
 *   complete → S3 snapshot  groupBy(user_id).agg(count, sum(amount)) (a bounded result table)
 *   large state             append, groupBy(window(event_time, 1 day), user_id) over 100,000 users
 *
 * 10,000 users (100,000 for the large state), 20% of events late by up to 2 minutes, 50 ms of
 * event time per event, one warm container invoked with batches of 1,000 records (as the event
 * source mapping delivers them; see answerAtTheTip), and the scheduled function every 60 invocations (a one-minute
 * schedule at 1,000 events per second). Reports, per 1M events: DynamoDB write and read units,
 * S3 PUT- and GET-class requests, Kinesis calls, and dollars; and the sequential AWS round trips
 * of a steady-state invocation (median), with and without the sink's calls.
 *
 * Lambda's duration is modelled, since the emulators' latency is not AWS's: the invocation's own
 * work (wall time with no AWS call in flight) plus ROUND_TRIP_MS per sequential round trip.
 */
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import type { KinesisStreamEvent } from 'aws-lambda';
import { createAwsClients, type AwsClients } from '../lib/aws/clients.js';
import { createKinesisTriggerHandler } from '../lib/aws/kinesis-trigger-handler.js';
import { createScheduledTriggerHandler } from '../lib/aws/scheduled-trigger-handler.js';
import { createQuietObservability } from '../lib/aws/observability.js';
import { ensureTables } from '../lib/aws/tables.js';
import { createStreamAndWait } from '../lib/local/kinesis-admin.js';
import { startEmulators, type EmulatorSet } from '../lib/local/emulators.js';
import { defineQuery, type StreamingQueryDefinition } from '../lib/query/query-definition.js';
import type { DataFrame } from '../lib/api/data-frame.js';
import { col, count, sum, window } from '../lib/plan/functions.js';
import { DEPLOYMENT_DEFAULTS, type RuntimeConfig } from '../lib/runtime/runtime-config.js';
import { CURRENT_PRICES, unitPrices } from '../lib/core/price-table.js';
import { AwsCallTrace, localComputeMs, sequentialRoundTrips, type TracedCall } from './aws-call-trace.js';

const UNIT_PRICES = unitPrices(CURRENT_PRICES);
/** The one price table's prices per unit (lib/core/price-table.ts), dollars; the functions have 1,024 MB (arm64). */
export const PRICES = {
  writeUnit: UNIT_PRICES.dynamoDbWriteUnit,
  readUnit: UNIT_PRICES.dynamoDbReadUnit,
  s3Put: UNIT_PRICES.s3Put,
  s3Get: UNIT_PRICES.s3Get,
  lambdaGbSecond: UNIT_PRICES.lambdaGbSecond,
  lambdaRequest: UNIT_PRICES.lambdaRequest,
  lambdaMemoryGb: 1,
  kinesisGetRecords: 0,
} as const;
/**
 * The prices issue 17 states its targets at: DynamoDB on-demand at twice today's list price (before
 * AWS halved it), S3 and Lambda as today. Printed beside the current prices' figures.
 */
export const ISSUE_17_PRICES = { ...PRICES, writeUnit: 1.25e-6, readUnit: 0.25e-6 } as const;
/** Modelled latency of one AWS request from Lambda (DynamoDB/S3 in-region: 5–10 ms). */
const ROUND_TRIP_MS = 8;
const BATCH = 1_000;
const TICK_EVERY = 60;
const WARM_UP = 5;

const S3_PUT_CLASS = new Set(['PutObject', 'CopyObject', 'ListObjectsV2', 'ListObjects', 'CreateMultipartUpload', 'UploadPart', 'CompleteMultipartUpload']);
const S3_GET_CLASS = new Set(['GetObject', 'HeadObject']);

export interface E2eQueryFigures {
  readonly name: string;
  readonly events: number;
  readonly invocations: number;
  /** Per 1M events. */
  readonly writeUnits: number;
  readonly readUnits: number;
  readonly writeUnitsByTable: Record<string, number>;
  readonly s3Puts: number;
  readonly s3Gets: number;
  readonly kinesisCalls: number;
  readonly lambdaGbSeconds: number;
  readonly usd: { dynamodb: number; s3: number; lambda: number; total: number };
  /** The same at issue 17's prices (ISSUE_17_PRICES). */
  readonly usdAtIssuePrices: number;
  /** Median over steady-state invocations of the Kinesis trigger. */
  readonly roundTripsPerInvocation: number;
  readonly roundTripsWithSink: number;
  /** Batches the steady-state invocations ran without data (no-data batches). */
  readonly noDataBatches: number;
  readonly dataBatches: number;
}

interface Workload {
  readonly name: string;
  readonly outputMode: 'append' | 'update' | 'complete';
  readonly sink: StreamingQueryDefinition['sink'];
  readonly transform: (df: DataFrame) => DataFrame;
  readonly users: number;
  readonly batches: number;
  /** Batches before measuring that fill the state, one new user per event (up to 10,000 records each, Lambda's largest batch). */
  readonly fillBatches?: number;
}

const windowed = (size: string) => (df: DataFrame): DataFrame => df
  .withWatermark('event_time', '2 minutes')
  .groupBy(window(col('event_time'), size), col('user_id'))
  .agg(count().as('events'), sum('amount').as('amount'));
const perUser = (df: DataFrame): DataFrame => df.groupBy(col('user_id')).agg(count().as('events'), sum('amount').as('amount'));

/** Deterministic events: `fill` batches where every event is a new user, then random users. */
function* eventBatches(users: number, batches: number, fill: number): Generator<{ data: string; partitionKey: string }[]> {
  const fillBatch = fill > 0 ? Math.ceil(users / fill) : BATCH;
  let seed = 42;
  const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  let clock = Date.parse('2024-05-01T00:00:00Z');
  let n = 0;
  for (let b = 0; b < fill + batches; b++) {
    const out: { data: string; partitionKey: string }[] = [];
    for (let i = 0; i < (b < fill ? fillBatch : BATCH); i++, n++) {
      clock += 50;
      const eventMs = random() < 0.2 ? clock - Math.floor(random() * 120_000) : clock;
      const user = `user-${b < fill ? n % users : Math.floor(random() * users)}`;
      out.push({ data: JSON.stringify({ user_id: user, amount: Math.round(random() * 10_000) / 100, event_time: eventMs / 1000 }), partitionKey: user });
    }
    yield out;
  }
}

const SHARD = 'shardId-000000000000';

/**
 * The records go to the handler as the event source mapping delivers them, not through
 * kinesis-mock (far too slow for 100,000s of records on a shared machine), so their sequence
 * numbers exist only in the checkpoint: the scheduled function's "anything after my position?"
 * iterator is answered at the (empty) stream's tip, which is what it would find. Its calls are
 * traced and counted all the same.
 */
export function answerAtTheTip(clients: AwsClients): AwsClients {
  clients.kinesis.middlewareStack.add((next, context) => async (args) => {
    const input = args.input as Record<string, unknown>;
    if ((context as { commandName?: string }).commandName === 'GetShardIteratorCommand' && input.StartingSequenceNumber !== undefined) {
      const { StartingSequenceNumber: _ignored, ...rest } = input;
      return next({ ...args, input: { ...rest, ShardIteratorType: 'LATEST' } });
    }
    return next(args);
  }, { step: 'initialize', name: 'benchAnswerAtTheTip', priority: 'low' });
  return clients;
}

let deployments = 0;

export async function deploy(clients: AwsClients, name: string): Promise<RuntimeConfig> {
  const id = `${process.pid}-${++deployments}`;
  const config: RuntimeConfig = {
    ...DEPLOYMENT_DEFAULTS,
    checkpointTable: `bench-checkpoint-${id}`, stateTable: `bench-state-${id}`, sinkTable: `bench-sink-${id}`,
    sinkBucket: `bench-sink-${id}`, sinkPrefix: `${name}/`, deadLetterBucket: `bench-dlq-${id}`, deadLetterPrefix: 'dead-letter/',
    streamName: `bench-stream-${id}`, idleShardTimeoutMs: 60_000, expectedShardCount: 1,
  } as RuntimeConfig;
  await createStreamAndWait(clients.kinesis, config.streamName, 1);
  await ensureTables(clients.dynamodb, { checkpointTable: config.checkpointTable, stateTable: config.stateTable, sinkTable: config.sinkTable });
  await clients.s3.send(new CreateBucketCommand({ Bucket: config.sinkBucket }));
  await clients.s3.send(new CreateBucketCommand({ Bucket: config.deadLetterBucket }));
  return config;
}

export function toEvent(records: { data: string; partitionKey: string }[], placed: { shardId: string; sequenceNumber: string }[], arrivalSec: number): KinesisStreamEvent {
  return {
    Records: records.map((r, i) => ({
      eventID: `${placed[i]!.shardId}:${placed[i]!.sequenceNumber}`,
      eventSource: 'aws:kinesis', eventVersion: '1.0', eventName: 'aws:kinesis:record', awsRegion: 'us-east-1',
      invokeIdentityArn: 'arn:aws:iam::000000000000:role/bench', eventSourceARN: 'arn:aws:kinesis:us-east-1:000000000000:stream/bench',
      kinesis: {
        kinesisSchemaVersion: '1.0', partitionKey: r.partitionKey, sequenceNumber: placed[i]!.sequenceNumber,
        data: Buffer.from(r.data).toString('base64'), approximateArrivalTimestamp: arrivalSec,
      },
    })),
  };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s[Math.floor((s.length - 1) / 2)]!;
};

async function measureQuery(emulators: EmulatorSet, workload: Workload): Promise<E2eQueryFigures> {
  const setup = createAwsClients(emulators.clientOptions);
  const trace = new AwsCallTrace();
  const traced = trace.attach(createAwsClients(emulators.clientOptions));
  const tickClients = trace.attach(answerAtTheTip(createAwsClients(emulators.clientOptions)));
  try {
    const config = await deploy(setup, workload.name);
    const definition = defineQuery({ name: `bench-${workload.name}`, source: { schema: 'user_id string, amount double, event_time timestamp', partitionKey: 'user_id' }, transform: workload.transform, outputMode: workload.outputMode, sink: workload.sink });
    const observability = createQuietObservability(definition.name);
    let batchesRun = { data: 0, noData: 0 };
    const count = (progress: readonly { numInputRows: number }[]): void => {
      for (const p of progress) if (p.numInputRows > 0) batchesRun.data++; else batchesRun.noData++;
    };
    const handler = createKinesisTriggerHandler(definition, {
      config, clients: traced, observability, onInvocation: (_shard, result) => count(result.progress),
    });
    let nowMs = Date.now();
    const tick = createScheduledTriggerHandler(definition, {
      config, clients: tickClients, observability, now: () => nowMs, onInvocation: (_shard, result) => count(result.progress),
    });
    let sequence = 0;
    const fill = workload.fillBatches ?? 0;
    let measuredFrom = 0;
    let invocations = 0;
    const roundTrips: number[] = [];
    const roundTripsWithSink: number[] = [];
    let lambdaMs = 0;
    let b = 0;
    const role = (resource: string): string => (resource === config.sinkTable || resource === config.sinkBucket ? 'sink' : resource === config.stateTable ? 'state' : 'checkpoint');
    const isSink = (c: TracedCall): boolean => c.resources.some((r) => r === config.sinkTable || r === config.sinkBucket);
    for (const records of eventBatches(workload.users, workload.batches, fill)) {
      const placed = records.map(() => ({ shardId: SHARD, sequenceNumber: `4968${String(++sequence).padStart(52, '0')}` }));
      if (b === fill + Math.min(WARM_UP, workload.batches - 1)) {
        measuredFrom = trace.calls.length;
        batchesRun = { data: 0, noData: 0 };
        lambdaMs = 0;
        invocations = 0;
      }
      const first = trace.calls.length;
      const started = performance.now();
      const answer = await handler(toEvent(records, placed, Date.now() / 1000));
      const ended = performance.now();
      if (answer.batchItemFailures.length > 0) throw new Error(`${workload.name}: batch ${b} failed: ${JSON.stringify(answer.batchItemFailures)}`);
      const calls = trace.since(first);
      const trips = sequentialRoundTrips(calls);
      lambdaMs += localComputeMs(calls, started, ended) + trips * ROUND_TRIP_MS;
      invocations++;
      if (b >= fill + WARM_UP) {
        roundTrips.push(sequentialRoundTrips(calls.filter((c) => !isSink(c))));
        roundTripsWithSink.push(trips);
      }
      if (process.env.BENCH_VERBOSE) console.error(`${workload.name} batch ${b}: ${Math.round(ended - started)} ms, ${calls.length} calls, ${trips} round trips`);
      // BENCH_VERBOSE=calls: every call of the invocation with the units it cost (where the money goes).
      if (process.env.BENCH_VERBOSE === 'calls') {
        for (const c of calls) {
          const units = (m: Map<string, number>): string => [...m].map(([t, n]) => `${role(t)} ${n}`).join(', ');
          console.error(`    ${c.service} ${c.command} ${c.resources.map(role).join(',')} W[${units(c.writeUnits)}] R[${units(c.readUnits)}]`);
        }
      }
      b++;
      nowMs += 1_000;
      if (b % TICK_EVERY === 0) {
        const tickFirst = trace.calls.length;
        const tickStart = performance.now();
        await tick({ mode: 'tick' });
        const tickCalls = trace.since(tickFirst);
        lambdaMs += localComputeMs(tickCalls, tickStart, performance.now()) + sequentialRoundTrips(tickCalls) * ROUND_TRIP_MS;
        invocations++;
      }
    }
    const measured = trace.since(measuredFrom);
    const events = (workload.batches - Math.min(WARM_UP, workload.batches - 1)) * BATCH;
    const perMillion = 1e6 / events;
    const sumUnits = (kind: 'writeUnits' | 'readUnits'): Map<string, number> => {
      const byTable = new Map<string, number>();
      for (const c of measured) for (const [t, n] of c[kind]) byTable.set(t, (byTable.get(t) ?? 0) + n);
      return byTable;
    };
    const writes = sumUnits('writeUnits');
    const reads = sumUnits('readUnits');
    const total = (m: Map<string, number>): number => [...m.values()].reduce((a, n) => a + n, 0);
    const writeUnitsByTable: Record<string, number> = {};
    for (const [t, n] of writes) writeUnitsByTable[role(t)] = round((writeUnitsByTable[role(t)] ?? 0) + n * perMillion);
    const s3Puts = measured.filter((c) => c.service === 's3' && S3_PUT_CLASS.has(c.command)).length;
    const s3Gets = measured.filter((c) => c.service === 's3' && S3_GET_CLASS.has(c.command)).length;
    const kinesisCalls = measured.filter((c) => c.service === 'kinesis').length;
    const gbSeconds = (lambdaMs / 1000) * PRICES.lambdaMemoryGb;
    const usd = {
      dynamodb: (total(writes) * PRICES.writeUnit + total(reads) * PRICES.readUnit) * perMillion,
      s3: (s3Puts * PRICES.s3Put + s3Gets * PRICES.s3Get) * perMillion,
      lambda: (gbSeconds * PRICES.lambdaGbSecond + invocations * PRICES.lambdaRequest) * perMillion,
      total: 0,
    };
    usd.total = usd.dynamodb + usd.s3 + usd.lambda;
    const usdAtIssuePrices = usd.total - usd.dynamodb + (total(writes) * ISSUE_17_PRICES.writeUnit + total(reads) * ISSUE_17_PRICES.readUnit) * perMillion;
    return {
      name: workload.name, events, invocations,
      writeUnits: round(total(writes) * perMillion), readUnits: round(total(reads) * perMillion), writeUnitsByTable,
      s3Puts: round(s3Puts * perMillion), s3Gets: round(s3Gets * perMillion), kinesisCalls: round(kinesisCalls * perMillion),
      lambdaGbSeconds: round(gbSeconds * perMillion),
      usd: { dynamodb: round(usd.dynamodb, 4), s3: round(usd.s3, 4), lambda: round(usd.lambda, 4), total: round(usd.total, 4) },
      usdAtIssuePrices: round(usdAtIssuePrices, 4),
      roundTripsPerInvocation: median(roundTrips), roundTripsWithSink: median(roundTripsWithSink),
      noDataBatches: batchesRun.noData, dataBatches: batchesRun.data,
    };
  } finally {
    setup.destroy();
    traced.destroy();
    tickClients.destroy();
  }
}

const round = (n: number, digits = 1): number => Math.round(n * 10 ** digits) / 10 ** digits;

export interface E2eFigures {
  readonly queries: E2eQueryFigures[];
  readonly summary: {
    appendUsdPerMillion: number;
    updateUsdPerMillion: number;
    completeUsdPerMillion: number;
    roundTripsPerInvocation: number;
    largeStateWriteUnitsPerEvent: number | null;
  };
}

export async function measureEndToEndCost(options: { batches?: number; largeState?: boolean } = {}): Promise<E2eFigures> {
  const batches = options.batches ?? Number(process.env.BENCH_E2E_BATCHES ?? 40);
  const startedAt = performance.now();
  const emulators = await startEmulators();
  if (process.env.BENCH_VERBOSE) console.error(`emulators up in ${Math.round(performance.now() - startedAt)} ms`);
  try {
    const workloads: Workload[] = [
      { name: 'update-dynamodb', outputMode: 'update', sink: { kind: 'dynamodb' }, transform: windowed('5 minutes'), users: 10_000, batches },
      { name: 'append-s3-files', outputMode: 'append', sink: { kind: 's3-files' }, transform: windowed('5 minutes'), users: 10_000, batches },
      { name: 'complete-s3-snapshot', outputMode: 'complete', sink: { kind: 's3-snapshot' }, transform: perUser, users: 10_000, batches },
    ];
    if (options.largeState ?? process.env.BENCH_E2E_LARGE !== '0') {
      workloads.push({ name: 'append-100k-keys', outputMode: 'append', sink: { kind: 's3-files' }, transform: windowed('1 day'), users: 100_000, batches, fillBatches: 10 });
    }
    const queries: E2eQueryFigures[] = [];
    // BENCH_E2E_ONLY=update-dynamodb (a comma list) measures only those (a quicker check).
    const only = process.env.BENCH_E2E_ONLY?.split(',');
    for (const w of workloads) if (!only || only.includes(w.name)) queries.push(await measureQuery(emulators, w));
    const by = (name: string) => queries.find((q) => q.name === name);
    const large = by('append-100k-keys');
    return {
      queries,
      summary: {
        appendUsdPerMillion: by('append-s3-files')?.usd.total ?? NaN,
        updateUsdPerMillion: by('update-dynamodb')?.usd.total ?? NaN,
        completeUsdPerMillion: by('complete-s3-snapshot')?.usd.total ?? NaN,
        roundTripsPerInvocation: Math.max(...queries.map((q) => q.roundTripsPerInvocation)),
        largeStateWriteUnitsPerEvent: large ? round((large.writeUnitsByTable.state ?? 0) / 1e6, 4) : null,
      },
    };
  } finally {
    await emulators.stop();
  }
}

export function printEndToEndCost(figures: E2eFigures): void {
  console.log('End-to-end cost (real handlers on the emulators, every SDK call traced), per 1M events:');
  console.log(`  prices: $${PRICES.writeUnit * 1e6}/M WRU, $${PRICES.readUnit * 1e6}/M RRU, S3 PUT $${PRICES.s3Put * 1000}/1000, GET $${PRICES.s3Get * 1000}/1000, Lambda arm64 1024 MB (${ROUND_TRIP_MS} ms per sequential round trip)`);
  const header = ['query', 'WRU (sink/state/ckpt)', 'RRU', 'S3 PUT', 'S3 GET', 'Kinesis', 'Lambda GB-s', 'trips (w/ sink)', 'no-data/data', '$ DDB', '$ S3', '$ λ', '$ total'];
  console.log(`  ${header.join(' | ')}`);
  for (const q of figures.queries) {
    const t = q.writeUnitsByTable;
    console.log(`  ${[q.name, `${q.writeUnits} (${t.sink ?? 0}/${t.state ?? 0}/${t.checkpoint ?? 0})`, q.readUnits, q.s3Puts, q.s3Gets, q.kinesisCalls, q.lambdaGbSeconds,
      `${q.roundTripsPerInvocation} (${q.roundTripsWithSink})`, `${q.noDataBatches}/${q.dataBatches}`, q.usd.dynamodb, q.usd.s3, q.usd.lambda, q.usd.total].join(' | ')}`);
  }
  console.log(`  $ total at issue 17's prices ($${ISSUE_17_PRICES.writeUnit * 1e6}/M WRU, $${ISSUE_17_PRICES.readUnit * 1e6}/M RRU, the rest as above): ${figures.queries.map((q) => `${q.name} ${q.usdAtIssuePrices}`).join(', ')}`);
  const s = figures.summary;
  console.log(`  round trips per steady-state invocation besides the sink (max over queries): ${s.roundTripsPerInvocation}`);
  if (s.largeStateWriteUnitsPerEvent !== null) console.log(`  state write units per event at 100,000 keys: ${s.largeStateWriteUnitsPerEvent}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const figures = await measureEndToEndCost();
  if (process.argv.includes('--json')) console.log(JSON.stringify(figures));
  else printEndToEndCost(figures);
}
