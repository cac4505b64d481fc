/**
 * Embedded AWS emulators for `sluice dev` and the integration tests: kinesis-mock (the Kinesis
 * LocalStack runs), DynamoDB Local (AWS's own, run with the machine's Java; it has transactions and
 * conditional writes) and s3rver. Each starts on a free loopback port and stops with the process.
 *
 * When `AWS_ENDPOINT_URL` is set (LocalStack), nothing starts: every service uses that endpoint.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { AwsClientOptions, AwsEndpoints } from '../aws/clients.js';

const require = createRequire(import.meta.url);

export interface EmulatorSet {
  readonly endpoints: AwsEndpoints;
  /** Client options that reach these emulators (endpoints, region, test credentials). */
  readonly clientOptions: AwsClientOptions;
  /** True when the endpoints are an external LocalStack rather than embedded emulators. */
  readonly external: boolean;
  stop(): Promise<void>;
}

export interface StartEmulatorsOptions {
  readonly kinesis?: boolean;
  readonly dynamodb?: boolean;
  readonly s3?: boolean;
  /** Milliseconds to wait for each emulator to answer. */
  readonly startTimeoutMs?: number;
}

const LOCAL_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
const REGION = 'us-east-1';

export async function startEmulators(options: StartEmulatorsOptions = {}): Promise<EmulatorSet> {
  const wanted = { kinesis: options.kinesis ?? true, dynamodb: options.dynamodb ?? true, s3: options.s3 ?? true };
  const external = process.env.AWS_ENDPOINT_URL;
  if (external) {
    const endpoints = { kinesis: external, dynamodb: external, s3: external };
    return {
      endpoints,
      clientOptions: { region: process.env.AWS_REGION ?? REGION, endpoints, credentials: envCredentials() },
      external: true,
      stop: async () => {},
    };
  }
  const timeoutMs = options.startTimeoutMs ?? 60_000;
  const stops: (() => Promise<void>)[] = [];
  const endpoints: { kinesis?: string; dynamodb?: string; s3?: string } = {};
  try {
    const started = await Promise.all([
      wanted.kinesis ? startKinesisMock(timeoutMs) : undefined,
      wanted.dynamodb ? startDynamoDbLocal(timeoutMs) : undefined,
      wanted.s3 ? startS3rver() : undefined,
    ]);
    const [kinesis, dynamodb, s3] = started;
    if (kinesis) { endpoints.kinesis = kinesis.endpoint; stops.push(kinesis.stop); }
    if (dynamodb) { endpoints.dynamodb = dynamodb.endpoint; stops.push(dynamodb.stop); }
    if (s3) { endpoints.s3 = s3.endpoint; stops.push(s3.stop); }
  } catch (error) {
    await Promise.allSettled(stops.map((s) => s()));
    throw error;
  }
  return {
    endpoints,
    clientOptions: { region: REGION, endpoints, credentials: LOCAL_CREDENTIALS },
    external: false,
    stop: async () => { await Promise.allSettled(stops.map((s) => s())); },
  };
}

function envCredentials(): { accessKeyId: string; secretAccessKey: string } {
  return {
    accessKeyId: process.env.AWS_ACCESS_KEY_ID ?? 'test',
    secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY ?? 'test',
  };
}

interface Started { endpoint: string; stop: () => Promise<void> }

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number, timeoutMs: number, child: ChildProcess, name: string, log: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode} before listening:\n${log()}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => { socket.destroy(); resolve(true); });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${name} did not listen on port ${port} within ${timeoutMs} ms:\n${log()}`);
}

function spawnService(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): { child: ChildProcess; log: () => string } {
  const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer): void => { output = (output + chunk.toString()).slice(-4000); };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  // An emulator must never outlive the process that started it.
  const kill = (): void => { if (child.exitCode === null) child.kill('SIGKILL'); };
  process.once('exit', kill);
  child.once('exit', () => process.removeListener('exit', kill));
  return { child, log: () => output };
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) { resolve(); return; }
    const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
    child.once('exit', () => { clearTimeout(timer); resolve(); });
    child.kill('SIGTERM');
  });
}

/** The emulators are optional peer dependencies of the package: a missing one says what to install. */
function resolvePeer(name: 'kinesis-local' | 'amplify-dynamodb-simulator' | 's3rver'): string {
  try {
    return require.resolve(`${name}/package.json`);
  } catch (cause) {
    throw new Error(`the local emulators need the package '${name}', which is not installed. `
      + `Install it next to sluice: npm install --save-dev ${name} (sluice dev and sluice/testing use kinesis-local, `
      + 'amplify-dynamodb-simulator and s3rver; DynamoDB Local also needs Java), or set AWS_ENDPOINT_URL to use LocalStack.', { cause });
  }
}

async function startKinesisMock(timeoutMs: number): Promise<Started> {
  // kinesis-mock reads server.json (its TLS certificate) from the working directory.
  const packageDir = dirname(resolvePeer('kinesis-local'));
  const [plainPort, tlsPort] = [await freePort(), await freePort()];
  const { child, log } = spawnService(process.execPath, ['main.js'], packageDir, {
    KINESIS_MOCK_PLAIN_PORT: String(plainPort),
    KINESIS_MOCK_TLS_PORT: String(tlsPort),
    CREATE_STREAM_DURATION: '0ms',
    DELETE_STREAM_DURATION: '0ms',
    SPLIT_SHARD_DURATION: '0ms',
    MERGE_SHARDS_DURATION: '0ms',
    UPDATE_SHARD_COUNT_DURATION: '0ms',
    SHOULD_PERSIST_DATA: 'false',
    SHARD_LIMIT: '10000',
    ON_DEMAND_STREAM_COUNT_LIMIT: '1000',
    LOG_LEVEL: 'ERROR',
  });
  await waitForPort(plainPort, timeoutMs, child, 'kinesis-mock', log);
  return { endpoint: `http://127.0.0.1:${plainPort}`, stop: () => stopChild(child) };
}

async function startDynamoDbLocal(timeoutMs: number): Promise<Started> {
  const dir = join(dirname(resolvePeer('amplify-dynamodb-simulator')), 'emulator');
  const port = await freePort();
  // -sharedDb: one database whatever the credentials/region, as tables are shared by all clients.
  const { child, log } = spawnService('java', [
    `-Djava.library.path=${join(dir, 'DynamoDBLocal_lib')}`, '-Xmx512m',
    '-jar', join(dir, 'DynamoDBLocal.jar'), '-inMemory', '-sharedDb', '-port', String(port),
  ], dir, {});
  await waitForPort(port, timeoutMs, child, 'DynamoDB Local', log);
  return { endpoint: `http://127.0.0.1:${port}`, stop: () => stopChild(child) };
}

async function startS3rver(): Promise<Started> {
  resolvePeer('s3rver');
  const { default: S3rver } = await import('s3rver');
  const directory = mkdtempSync(join(tmpdir(), 'sluice-s3-'));
  const port = await freePort();
  const server = new S3rver({ port, address: '127.0.0.1', silent: true, directory, resetOnClose: true });
  await server.run();
  return {
    endpoint: `http://127.0.0.1:${port}`,
    stop: async () => {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
