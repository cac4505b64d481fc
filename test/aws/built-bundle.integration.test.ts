/**
 * A function bundle as the construct builds it (cdk/bundling.ts's esbuild options, per-sink), run in
 * a fresh Node process against the emulators: one invocation with good records and a malformed one.
 * The DynamoDB-sink function loads no S3 SDK at init (lib/aws/s3-sdk.ts), loads it for the dead
 * letter, and answers as the unbundled handler does: the sink holds the records' sums, the dead
 * letter names the bad record. The entry is the generated one plus the emulators' endpoints (the
 * S3 emulator needs path-style requests, which only client options can ask for).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { GetRecordsCommand, GetShardIteratorCommand } from '@aws-sdk/client-kinesis';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { esbuildOptionsFor } from '../../cdk/bundling.js';
import { readDeadLetters } from '../../lib/aws/s3-dead-letter-writer.js';
import { scanDynamoDbSink } from '../../lib/aws/sink-readers.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { RUNTIME_ENV, type RuntimeConfig } from '../../lib/runtime/runtime-config.js';
import liveQuery from '../../examples/hourly-sales-live.js';
import { deploy } from '../support/aws-pipeline.js';

const ROOT = resolve(import.meta.dirname, '../..');

/** Builds the DynamoDB-sink kinesis function (under cdk.out, so `sluice/lambda` and the SDK resolve from the project). */
async function buildLiveBundle(): Promise<string> {
  const dir = join(ROOT, 'cdk.out', `built-bundle-test-${process.pid}`);
  mkdirSync(join(dir, 'out'), { recursive: true });
  // A Lambda asset is CommonJS; the project's package.json says "module".
  writeFileSync(join(dir, 'out', 'package.json'), '{ "type": "commonjs" }\n');
  const entry = join(dir, 'entry.mjs');
  writeFileSync(entry, [
    `import query from ${JSON.stringify(join(ROOT, 'examples', 'hourly-sales-live.ts'))};`,
    "import { createKinesisTriggerHandler } from 'sluice/lambda';",
    'export const handler = createKinesisTriggerHandler(query, { clientOptions: JSON.parse(process.env.SLUICE_TEST_CLIENT_OPTIONS) });',
    '',
  ].join('\n'));
  const outfile = join(dir, 'out', 'index.js');
  await build(esbuildOptionsFor(entry, outfile, 'dynamodb'));
  return outfile;
}

/** Loads the bundle, invokes its handler once with the event in argv[2]; prints which SDK clients were loaded when. */
const CHILD = `
const loaded = () => Object.keys(require.cache).filter((k) => /@aws-sdk[\\\\/]client-(s3|dynamodb|kinesis)[\\\\/]/.test(k))
  .map((k) => k.match(/client-(s3|dynamodb|kinesis)/)[0]).filter((v, i, a) => a.indexOf(v) === i).sort();
const { handler } = require(process.argv[1]);
const atInit = loaded();
handler(JSON.parse(process.argv[2])).then((response) => {
  // The SDK's keep-alive sockets would hold the process open (Lambda freezes it instead).
  process.stdout.write('\\nRESULT ' + JSON.stringify({ atInit, afterInvocation: loaded(), response }) + '\\n', () => process.exit(0));
}, (error) => { console.error(error); process.exit(1); });
`;

/** Not spawnSync: s3rver runs in this process and must keep answering while the child runs. */
function runChild(args: string[], env: Record<string, string>): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['-e', CHILD, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => { stdout += c.toString(); });
    child.stderr.on('data', (c: Buffer) => { stderr += c.toString(); });
    child.on('error', fail);
    child.on('exit', (status) => done({ status, stdout, stderr }));
  });
}

function runtimeEnv(config: RuntimeConfig): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [field, variable] of Object.entries(RUNTIME_ENV)) {
    const value = (config as unknown as Record<string, unknown>)[field];
    if (value !== undefined) env[variable] = typeof value === 'object' ? JSON.stringify(value) : String(value);
  }
  return env;
}

let emulators: EmulatorSet;
let bundle: string;

beforeAll(async () => {
  [emulators, bundle] = await Promise.all([startEmulators(), buildLiveBundle()]);
}, 300_000);
afterAll(async () => {
  await emulators?.stop();
});

describe('a built function bundle on the emulators', () => {
  it('the DynamoDB-sink function writes the sink and a dead letter, loading the S3 SDK only for the dead letter', async () => {
    const d = await deploy(emulators, liveQuery, 1);
    const sales = [
      { store_id: 'north', amount: 10, ts: '2024-05-01T14:05:00Z' },
      { store_id: 'north', amount: 5, ts: '2024-05-01T14:35:00Z' },
      { store_id: 'south', amount: 7, ts: '2024-05-01T14:40:00Z' },
    ];
    await d.put([
      ...sales.map((s) => ({ data: JSON.stringify(s), partitionKey: s.store_id })),
      { data: '{"store_id": "north", "amount": ', partitionKey: 'north' },
    ]);
    const shardId = 'shardId-000000000000';
    const { ShardIterator } = await d.clients.kinesis.send(new GetShardIteratorCommand({
      StreamName: d.config.streamName, ShardId: shardId, ShardIteratorType: 'TRIM_HORIZON',
    }));
    const { Records = [] } = await d.clients.kinesis.send(new GetRecordsCommand({ ShardIterator }));
    expect(Records).toHaveLength(4);
    const event = {
      Records: Records.map((r) => ({
        eventID: `${shardId}:${r.SequenceNumber}`,
        eventSourceARN: `arn:aws:kinesis:us-east-1:000000000000:stream/${d.config.streamName}`,
        kinesis: {
          sequenceNumber: r.SequenceNumber, partitionKey: r.PartitionKey,
          data: Buffer.from(r.Data!).toString('base64'), approximateArrivalTimestamp: r.ApproximateArrivalTimestamp!.getTime() / 1000,
        },
      })),
    };

    const run = await runChild([bundle, JSON.stringify(event)], {
      PATH: process.env.PATH ?? '', ...runtimeEnv(d.config), SLUICE_TEST_CLIENT_OPTIONS: JSON.stringify(emulators.clientOptions),
    });
    expect(run.status, run.stderr).toBe(0);
    const line = run.stdout.split('\n').find((l) => l.startsWith('RESULT '));
    const result = JSON.parse(line!.slice('RESULT '.length)) as { atInit: string[]; afterInvocation: string[]; response: { batchItemFailures: unknown[] } };

    expect(result.atInit).toEqual(['client-dynamodb', 'client-kinesis']);
    expect(result.response.batchItemFailures).toEqual([]);
    expect(result.afterInvocation).toEqual(['client-dynamodb', 'client-kinesis', 'client-s3']);

    const rows = await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!);
    expect(rows.map((r) => ({ store_id: r.store_id, sales: r.sales, orders: r.orders })).sort((a, b) => String(a.store_id).localeCompare(String(b.store_id))))
      .toEqual([{ store_id: 'north', sales: 15, orders: 2 }, { store_id: 'south', sales: 7, orders: 1 }]);
    const letters = await readDeadLetters(d.clients.s3, d.config.deadLetterBucket, d.config.deadLetterPrefix);
    expect(letters).toHaveLength(1);
    expect(Buffer.from(String(letters[0]!.dataBase64), 'base64').toString()).toBe('{"store_id": "north", "amount": ');
  }, 300_000);
});
