/**
 * The limits of one state partition (issue 11): how much state one shard holds at the construct's
 * default memory (1,024 MB, 1-minute timeout), and how large one state value may be. Figures, not
 * ratios: they are what the README's limits section quotes.
 *
 *   npm run bench:limits                          (LIMITS_KEYS=100000,300000,1000000 by default)
 *   LIMITS_KEYS=100000 LIMITS_VALUES_MB=1 npm run bench:limits    (a quick run)
 *
 * On the emulators (DynamoDB Local, kinesis-mock, s3rver), every measurement in its own Node
 * process, one at a time (the machine is shared; each stays well under 4 GB):
 *
 *   state-write  the real Kinesis handler, one warm container, grows a windowed
 *                count+sum (groupBy(window(event_time, 1 day), user_id), append: the state is
 *                held, nothing is emitted) to N keys in deliveries of 10,000 records (Lambda's
 *                largest batch), once with a DynamoDB sink (state in DynamoDB items) and once
 *                with an S3 files sink (state payloads in S3 objects when cheaper)
 *   state-open   a fresh process (a cold container) with the function's memory set to 1,024 MB
 *                and a 60 s deadline: one record; the invocation opens the whole state, runs and
 *                commits one batch, and the memory guard judges it
 *   state-value  one key whose value is an M MB collect_list-like array, written through the
 *                DynamoDB state store (chunked items) and read back by a cold store
 *
 * Reported per run: wall times, the process's peak resident set (what Lambda's memory limit
 * counts, and what the memory guard judges), the resident set after the last delivery and the live
 * set after a GC, the stored state bytes, and what the guard answered.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { createAwsClients, type AwsClientOptions } from '../lib/aws/clients.js';
import { createKinesisTriggerHandler } from '../lib/aws/kinesis-trigger-handler.js';
import { createQuietObservability } from '../lib/aws/observability.js';
import { DynamoDbStateStoreProvider } from '../lib/aws/dynamodb-state-store.js';
import { itemSize, type Item } from '../lib/aws/dynamodb-cost.js';
import { startEmulators } from '../lib/local/emulators.js';
import { defineQuery } from '../lib/query/query-definition.js';
import { col, count, sum, window } from '../lib/plan/functions.js';
import type { RuntimeConfig } from '../lib/runtime/runtime-config.js';
import { liveBytesAfterGc } from './live-set.js';
import { deploy, toEvent } from './e2e-cost.bench.js';

const MB = 1024 * 1024;
const DELIVERY = Number(process.env.LIMITS_DELIVERY ?? 10_000);
/** The construct's defaults (cdk/sluice-query.ts): memorySize 1024, timeout 1 minute. */
const DEFAULT_MEMORY_MB = 1024;
const DEFAULT_TIMEOUT_MS = 60_000;
const SHARD = 'shardId-000000000000';

/** Where the state lives: DynamoDB items (a dynamodb sink) or S3 objects when cheaper (an S3 sink). */
type SinkKind = 'dynamodb' | 's3-files';
const queryFor = (sink: SinkKind) => defineQuery({
  name: 'bench-limits',
  source: { schema: 'user_id string, amount double, event_time timestamp', partitionKey: 'user_id' },
  transform: (df) => df.withWatermark('event_time', '10 minutes')
    .groupBy(window(col('event_time'), '1 day'), col('user_id')).agg(count('*').as('events'), sum('amount').as('amount')),
  outputMode: 'append',
  sink: { kind: sink },
});

interface ChildInput { mode: 'state-write' | 'state-open' | 'state-value'; sink: SinkKind; clientOptions: AwsClientOptions; config: RuntimeConfig; keys: number; valueMb?: number }

const seq = (n: number): string => `4968${String(n).padStart(52, '0')}`;
const record = (i: number, user: number) => ({
  data: JSON.stringify({ user_id: `user-${user}`, amount: (i % 997) / 10, event_time: new Date(Date.UTC(2024, 4, 1, 0, 0, 0, Math.floor(i / 100))).toISOString() }),
  partitionKey: `user-${user}`,
});
const peakRssMb = (): number => Math.round(process.resourceUsage().maxRSS / 1024);
const rssMb = (): number => Math.round(process.memoryUsage().rss / MB);

async function stateWrite(input: ChildInput): Promise<Record<string, unknown>> {
  const definition = queryFor(input.sink);
  const clients = createAwsClients(input.clientOptions);
  let error: string | undefined;
  // LIMITS_WARM_MEMORY_MB: the warm container judged against that memory too; its first refusal ends the run.
  const warmMemoryMb = process.env.LIMITS_WARM_MEMORY_MB ? Number(process.env.LIMITS_WARM_MEMORY_MB) : undefined;
  let code: string | undefined;
  const handler = createKinesisTriggerHandler(definition, {
    config: { ...input.config, ...(warmMemoryMb ? { functionMemoryMb: warmMemoryMb } : {}) }, clients, observability: createQuietObservability(definition.name),
    onInvocation: (_shard, result) => {
      if (result.error) ({ message: error, code } = result.error as Error & { code?: string });
    },
  });
  const started = performance.now();
  let lastMs = 0;
  for (let from = 0; from < input.keys; from += DELIVERY) {
    const records = Array.from({ length: Math.min(DELIVERY, input.keys - from) }, (_, j) => record(from + j, from + j));
    const placed = records.map((_, j) => ({ shardId: SHARD, sequenceNumber: seq(from + j + 1) }));
    const t0 = performance.now();
    const answer = await handler(toEvent(records, placed, Date.now() / 1000), undefined as never);
    lastMs = performance.now() - t0;
    if (process.env.LIMITS_VERBOSE) console.error(`delivery ${from / DELIVERY}: ${Math.round(lastMs)} ms, rss ${rssMb()} MB`);
    if (code === 'STATE_EXCEEDS_MEMORY') {
      return { refusedAtKeys: from, refusal: error!.split('\n')[0], peakRssMb: peakRssMb(), rssMb: rssMb(), liveMb: Math.round(liveBytesAfterGc() / MB) };
    }
    if (answer.batchItemFailures.length > 0 || error) throw new Error(`delivery at ${from} failed: ${error ?? JSON.stringify(answer.batchItemFailures)}`);
  }
  const rss = rssMb();
  // The live set after a GC, beside the peak the memory guard judges: what a batch needs on top of it.
  const liveMb = Math.round(liveBytesAfterGc() / MB);
  return { writeSeconds: +((performance.now() - started) / 1000).toFixed(1), lastDeliveryMs: Math.round(lastMs), peakRssMb: peakRssMb(), rssMb: rss, liveMb };
}

async function stateOpen(input: ChildInput): Promise<Record<string, unknown>> {
  const definition = queryFor(input.sink);
  const clients = createAwsClients(input.clientOptions);
  let result: { error?: string; code?: string; batches: number } = { batches: 0 };
  const handler = createKinesisTriggerHandler(definition, {
    config: { ...input.config, functionMemoryMb: DEFAULT_MEMORY_MB }, clients, observability: createQuietObservability(definition.name),
    onInvocation: (_shard, r) => {
      result = { batches: r.progress.length, ...(r.error ? { error: r.error.message, code: (r.error as { code?: string }).code } : {}) };
    },
  });
  const deadline = Date.now() + DEFAULT_TIMEOUT_MS;
  const t0 = performance.now();
  const answer = await handler(toEvent([record(input.keys, 0)], [{ shardId: SHARD, sequenceNumber: seq(input.keys + 1) }], Date.now() / 1000), {
    getRemainingTimeInMillis: () => deadline - Date.now(),
  } as never);
  const ms = performance.now() - t0;
  return {
    coldInvocationSeconds: +(ms / 1000).toFixed(1), overDefaultTimeout: ms > DEFAULT_TIMEOUT_MS, peakRssMb: peakRssMb(), rssMb: rssMb(),
    batchItemFailures: answer.batchItemFailures.length, ...result,
  };
}

async function stateValue(input: ChildInput): Promise<Record<string, unknown>> {
  const clients = createAwsClients(input.clientOptions);
  const store = (): DynamoDbStateStoreProvider => new DynamoDbStateStoreProvider({
    client: clients.dynamodb, table: input.config.stateTable, queryName: 'bench-limits-value', partitionId: `v${input.valueMb}`, cache: null,
  });
  // A collect_list of 100-character strings (random: gzip cannot shrink them much), valueMb in all.
  const value = Array.from({ length: Math.ceil((input.valueMb! * MB) / 100) }, () => randomBytes(50).toString('hex'));
  const id = { operatorId: 0, storeName: 'default' };
  const t0 = performance.now();
  const writer = await store().open<string[]>(id, 0);
  writer.put('the-group', value);
  await writer.commit();
  const writeMs = performance.now() - t0;
  const t1 = performance.now();
  const reader = await store().open<string[]>(id, 1);
  const back = reader.get('the-group');
  const readMs = performance.now() - t1;
  const same = back !== undefined && back.length === value.length && back.every((s, i) => s === value[i]);
  return { valueMb: input.valueMb, writeSeconds: +(writeMs / 1000).toFixed(1), coldReadSeconds: +(readMs / 1000).toFixed(1), readBackEqual: same, peakRssMb: peakRssMb() };
}

/** The stored bytes of the state: DynamoDB items of the state table and state objects in the sink bucket. */
async function storedStateBytes(clientOptions: AwsClientOptions, config: RuntimeConfig): Promise<{ items: number; itemBytes: number; objects: number; objectBytes: number }> {
  const clients = createAwsClients(clientOptions);
  let items = 0;
  let itemBytes = 0;
  let start: Record<string, unknown> | undefined;
  do {
    const page = await clients.dynamodb.send(new ScanCommand({ TableName: config.stateTable, ExclusiveStartKey: start as never }));
    for (const item of page.Items ?? []) { items++; itemBytes += itemSize(item as Item); }
    start = page.LastEvaluatedKey;
  } while (start);
  let objects = 0;
  let objectBytes = 0;
  let token: string | undefined;
  do {
    const page = await clients.s3.send(new ListObjectsV2Command({ Bucket: config.sinkBucket, Prefix: `${config.sinkPrefix}_sluice_state/`, ContinuationToken: token }));
    for (const o of page.Contents ?? []) { objects++; objectBytes += o.Size ?? 0; }
    token = page.NextContinuationToken;
  } while (token);
  return { items, itemBytes, objects, objectBytes };
}

/** Runs one measurement in its own process (asynchronously: s3rver serves from this one). */
async function runChild(input: ChildInput): Promise<Record<string, unknown>> {
  // The construct's V8 flag at the default memory (semiSpaceMb(1024) = 64), and gc for the live-set reading.
  const child = spawn(process.execPath, ['--max-semi-space-size=64', '--expose-gc', '--conditions=sluice-source', '--import', 'tsx', fileURLToPath(import.meta.url)], {
    env: { ...process.env, LIMITS_CHILD: JSON.stringify(input) }, stdio: ['ignore', 'pipe', process.env.LIMITS_VERBOSE ? 'inherit' : 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => { stdout += d.toString(); });
  child.stderr?.on('data', (d: Buffer) => { stderr += d.toString(); });
  const [status, signal] = await new Promise<[number | null, string | null]>((resolve) => child.on('close', (code, sig) => resolve([code, sig])));
  const line = stdout.trim().split('\n').pop() ?? '';
  if (status !== 0 || !line.startsWith('{')) {
    return { failed: true, status, signal, stderr: stderr.split('\n').filter((l) => !/Warning|SDK|node >=|a\.co|upgrade|trace-warnings|^\s*$/.test(l)).slice(-8).join('\n') };
  }
  return JSON.parse(line) as Record<string, unknown>;
}

async function main(): Promise<void> {
  const keyCounts = (process.env.LIMITS_KEYS ?? '100000,300000,1000000').split(',').map(Number);
  const sinks = (process.env.LIMITS_SINKS ?? 'dynamodb,s3-files').split(',') as SinkKind[];
  const valueSizes = (process.env.LIMITS_VALUES_MB ?? '1,10,50').split(',').map(Number).filter((n) => n > 0);
  const say = (m: string): void => { if (process.env.LIMITS_VERBOSE) console.error(`${new Date().toISOString()} ${m}`); };
  say('starting the emulators');
  const emulators = await startEmulators();
  say('emulators started');
  try {
    const setup = createAwsClients(emulators.clientOptions);
    for (const sink of sinks) {
      for (const keys of keyCounts) {
        const config = await deploy(setup, `limits-${sink}-${keys}`);
        say(`deployed for ${keys} keys, ${sink} sink`);
        const write = await runChild({ mode: 'state-write', sink, clientOptions: emulators.clientOptions, config, keys });
        const stored = write.failed ? null : await storedStateBytes(emulators.clientOptions, config);
        const open = write.failed ? null : await runChild({ mode: 'state-open', sink, clientOptions: emulators.clientOptions, config, keys });
        console.log(JSON.stringify({ sink, keys, write, stored, open }));
      }
    }
    for (const valueMb of valueSizes) {
      const config = await deploy(setup, `limits-value-${valueMb}`);
      console.log(JSON.stringify({ value: await runChild({ mode: 'state-value', sink: 'dynamodb', clientOptions: emulators.clientOptions, config, keys: 0, valueMb }) }));
    }
  } finally {
    await emulators.stop();
  }
}

async function child(input: ChildInput): Promise<void> {
  const run = { 'state-write': stateWrite, 'state-open': stateOpen, 'state-value': stateValue }[input.mode];
  console.log(JSON.stringify(await run(input)));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const input = process.env.LIMITS_CHILD;
  (input ? child(JSON.parse(input) as ChildInput) : main()).then(() => process.exit(0), (error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
