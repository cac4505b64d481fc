/**
 * The package as a user gets it: `npm pack`, a fresh CDK app in a temporary folder OUTSIDE the
 * repository, the tarball and its dependencies installed there (npm registry, through the local
 * npm cache), a query module importing from `sluice`, a stack using `SluiceQuery` from
 * `sluice/cdk`. Then `cdk synth` (the functions bundle that module; a bad query is refused with
 * the construct path), every subpath imported and type-checked, `npx sluice explain` and a short
 * `npx sluice dev` in that app.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const REPO = resolve(import.meta.dirname, '../..');
const manifest = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
  devDependencies: Record<string, string>; peerDependencies: Record<string, string>;
};

interface Run { readonly code: number | null; readonly stdout: string; readonly stderr: string }

/** Runs a command in `cwd` to its end (never throws on a non-zero exit: the test asserts it). */
function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}, timeoutMs = 240_000): Promise<Run> {
  return new Promise((done, fail) => {
    // No npm_* variables of the `npm test` that runs this: the app is a project of its own.
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('npm_') && k !== 'NODE_OPTIONS'));
    const child = spawn(command, args, { cwd, env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => { stdout += c.toString(); });
    child.stderr.on('data', (c: Buffer) => { stderr += c.toString(); });
    const timer = setTimeout(() => { child.kill('SIGKILL'); fail(new Error(`${command} ${args.join(' ')} took over ${timeoutMs} ms:\n${stdout}\n${stderr}`)); }, timeoutMs);
    child.on('exit', (code) => { clearTimeout(timer); done({ code, stdout, stderr }); });
  });
}

/** Every path under `dir`, for telling that nothing was written there. */
function listing(dir: string): string[] {
  return readdirSync(dir, { recursive: true }).map(String).sort();
}

const QUERY = `import { col, count, defineQuery, sum, window } from 'sluice';

export default defineQuery({
  name: 'packed-orders-per-store',
  source: { format: 'json', schema: 'store_id string, amount double, ts timestamp', partitionKey: 'store_id' },
  transform: (events) => events
    .withWatermark('ts', '15 minutes')
    .groupBy(window(col('ts'), '1 hour'), col('store_id'))
    .agg(sum('amount').as('sales'), count('*').as('orders')),
  outputMode: 'update',
  sink: { kind: 'dynamodb' },
});
`;

/** Refused by the analyzer: update mode into an S3 files sink. */
const BAD_QUERY = QUERY.replace("'packed-orders-per-store'", "'packed-bad'").replace("{ kind: 'dynamodb' }", "{ kind: 's3-files' }");

const APP = `import { App, Stack } from 'aws-cdk-lib';
import { SluiceQuery } from 'sluice/cdk';

const app = new App();
const stack = new Stack(app, 'PackedApp');
new SluiceQuery(stack, 'Orders', { queryModule: './query.ts' });
if (process.env.WITH_BAD_QUERY) new SluiceQuery(stack, 'Bad', { queryModule: './bad-query.ts' });
app.synth();
`;

/** Every subpath, imported and used with its types: tsc checks it against the shipped .d.ts. */
const USES_EVERY_SUBPATH = `import { SluiceSession, defineQuery, StreamingQuery, type StreamingQueryDefinition } from 'sluice';
import { SluiceQuery, type SluiceQueryProps } from 'sluice/cdk';
import { MemoryStream, testStream, checkNewAnswer, addData } from 'sluice/testing';
import { createKinesisTriggerHandler, createScheduledTriggerHandler, createRepartitionTriggerHandler } from 'sluice/lambda';
import query from './query.js';

const definition: StreamingQueryDefinition = query;
const props: SluiceQueryProps = { queryModule: './query.ts', batchSize: 10 };
const handler = createKinesisTriggerHandler(definition);
export const used = [SluiceSession, defineQuery, StreamingQuery, SluiceQuery, props, MemoryStream, testStream, checkNewAnswer, addData,
  handler, createScheduledTriggerHandler, createRepartitionTriggerHandler];
`;

describe('the packed package in a fresh CDK app outside the repository', () => {
  let app: string;
  let tarball: string;
  const timings: Record<string, number> = {};
  let installedFiles: string[] = [];
  const started: Record<'tsc' | 'synth' | 'badSynth' | 'explain', Promise<Run>> = {} as never;
  const timed = async <T>(name: string, step: () => Promise<T>): Promise<T> => {
    const start = Date.now();
    try { return await step(); } finally { timings[name] = Date.now() - start; }
  };

  beforeAll(async () => {
    app = mkdtempSync(join(tmpdir(), 'sluice-packed-app-'));
    expect(resolve(app).startsWith(REPO)).toBe(false);
    // `npm pack` runs `prepare`: a clean build of dist/.
    const packed = await timed('npm pack', () => run('npm', ['pack', '--json', '--pack-destination', app], REPO));
    expect(packed.code, packed.stderr).toBe(0);
    const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as { filename: string; size: number; entryCount: number }[];
    tarball = join(app, info!.filename);
    timings.tarballBytes = info!.size;
    timings.tarballFiles = info!.entryCount;

    const versions = { ...manifest.devDependencies, ...manifest.peerDependencies };
    writeFileSync(join(app, 'package.json'), JSON.stringify({
      name: 'packed-app', private: true, type: 'module',
      dependencies: {
        sluice: `file:./${info!.filename}`,
        'aws-cdk-lib': versions['aws-cdk-lib'], constructs: versions.constructs,
      },
      devDependencies: { tsx: (JSON.parse(readFileSync(join(REPO, 'node_modules/tsx/package.json'), 'utf8')) as { version: string }).version },
    }, null, 2));
    writeFileSync(join(app, 'query.ts'), QUERY);
    writeFileSync(join(app, 'bad-query.ts'), BAD_QUERY);
    writeFileSync(join(app, 'app.ts'), APP);
    writeFileSync(join(app, 'uses-every-subpath.ts'), USES_EVERY_SUBPATH);
    writeFileSync(join(app, 'cdk.json'), JSON.stringify({ app: 'node --import tsx app.ts' }));
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({
      // @types/node from the repository's install (a real app has its own).
      compilerOptions: {
        target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: true, noEmit: true,
        types: ['node'], typeRoots: [join(REPO, 'node_modules/@types')],
      },
      include: ['*.ts'],
    }));
    const installed = await timed('npm install', () => run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], app));
    expect(installed.code, installed.stderr).toBe(0);
    installedFiles = listing(join(app, 'node_modules', 'sluice'));
    // Independent steps start together (the two synths write to different output directories).
    const cdk = join(REPO, 'node_modules/aws-cdk/bin/cdk');
    started.tsc = timed('tsc', () => run(process.execPath, [join(REPO, 'node_modules/typescript/bin/tsc'), '-p', app], app));
    started.synth = timed('cdk synth', () => run(process.execPath, [cdk, 'synth', '--no-notices', '--quiet'], app));
    started.badSynth = timed('cdk synth (bad)', () => run(process.execPath, [cdk, 'synth', '--no-notices', '--quiet', '-o', 'cdk.out.bad'], app, { WITH_BAD_QUERY: '1' }));
    started.explain = timed('sluice explain', () => run('npx', ['--no-install', 'sluice', 'explain', './query.ts'], app));
    await Promise.all(Object.values(started));
  }, 400_000);

  afterAll(() => {
    process.stdout.write(`packed-app timings (ms) and tarball: ${JSON.stringify(timings)}\n`);
    if (app) rmSync(app, { recursive: true, force: true });
  });

  it('installs only the built package: dist (ESM JavaScript + .d.ts), README, package.json; no sources, tests or source maps', () => {
    const root = join(app, 'node_modules', 'sluice');
    // (node_modules: dependencies npm could not hoist, e.g. a version the app also uses differently.)
    expect(readdirSync(root).filter((f) => f !== 'node_modules').sort()).toEqual(['README.md', 'dist', 'package.json']);
    const files = (dir: string): string[] => readdirSync(dir, { withFileTypes: true })
      .flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)]));
    const shipped = files(join(root, 'dist'));
    expect(shipped.filter((f) => !/\.(js|d\.ts)$/.test(f))).toEqual([]);
    expect(readFileSync(join(root, 'dist/bin/sluice.js'), 'utf8')).toMatch(/^#!\/usr\/bin\/env node\n/);
  });

  it('every subpath resolves and loads in Node, no two subpaths export one name, and tsc checks a module using them all against the .d.ts', async () => {
    const probe = await run(process.execPath, ['--input-type=module', '-e', `
      const paths = ['sluice', 'sluice/cdk', 'sluice/testing', 'sluice/lambda'];
      const out = {};
      for (const p of paths) out[p] = Object.keys(await import(p)).filter((k) => k !== 'default');
      console.log(JSON.stringify(out));`], app);
    expect(probe.code, probe.stderr).toBe(0);
    const exports = JSON.parse(probe.stdout) as Record<string, string[]>;
    expect(exports['sluice']).toEqual(expect.arrayContaining(['SluiceSession', 'DataFrame', 'defineQuery', 'StreamingQuery', 'col', 'window', 'validateQuery']));
    expect(exports['sluice/cdk'].sort()).toEqual(['DEFAULT_DASHBOARD_PRICES', 'SluiceLakeTable', 'SluiceQuery', 'dashboardPricesFrom']);
    expect(exports['sluice/testing']).toEqual(expect.arrayContaining(['MemoryStream', 'MemorySink', 'testStream', 'startEmulators']));
    expect(exports['sluice/lambda']).toEqual(expect.arrayContaining(['createKinesisTriggerHandler', 'createScheduledTriggerHandler', 'createRepartitionTriggerHandler']));
    const seen = new Map<string, string>();
    for (const [path, names] of Object.entries(exports)) {
      for (const name of names) {
        expect(seen.get(name), `${name} is exported by ${seen.get(name)} and ${path}`).toBeUndefined();
        seen.set(name, path);
      }
    }
    const tsc = await started.tsc;
    expect(tsc.code, tsc.stdout + tsc.stderr).toBe(0);
  });

  it('cdk synth bundles the app\'s query module into the functions, with the entries under cdk.out, nothing written into node_modules', async () => {
    const synth = await started.synth;
    expect(synth.code, synth.stderr).toBe(0);
    const template = JSON.parse(readFileSync(join(app, 'cdk.out', 'PackedApp.template.json'), 'utf8')) as { Resources: Record<string, { Type: string; Properties: { Code?: { S3Key?: string } } }> };
    const functions = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function' && r.Properties.Code?.S3Key);
    // The Kinesis-trigger, scheduled and on-failure functions (the on-failure one records skipped ranges).
    expect(functions.length).toBe(3);
    for (const fn of functions) {
      const bundle = readFileSync(join(app, 'cdk.out', `asset.${fn.Properties.Code!.S3Key!.replace(/\.zip$/, '')}`, 'index.js'), 'utf8');
      expect(bundle).toContain('packed-orders-per-store');
    }
    expect(readdirSync(join(app, 'cdk.out', 'sluice-entries')).length).toBe(1);
    const sluiceDir = join(app, 'node_modules', 'sluice');
    expect(readdirSync(sluiceDir).filter((f) => f !== 'node_modules').sort()).toEqual(['README.md', 'dist', 'package.json']);
    expect(existsSync(join(app, '.sluice'))).toBe(false);
    expect(listing(join(app, 'node_modules', 'sluice'))).toEqual(installedFiles);
  });

  it('cdk synth refuses a bad query with the construct path and the engine\'s message', async () => {
    const synth = await started.badSynth;
    expect(synth.code).not.toBe(0);
    expect(synth.stderr).toContain('SluiceQuery PackedApp/Bad: query \'packed-bad\'');
    expect(synth.stderr).toContain('Data source s3-files does not support update output mode');
  });

  it('npx sluice explain ./query.ts prints the plans; a module that is not a query is refused by name', async () => {
    const explain = await started.explain;
    expect(explain.code, explain.stderr).toBe(0);
    expect(explain.stdout).toContain('== Logical plan ==');
    expect(explain.stdout).toContain('store_id');
    writeFileSync(join(app, 'not-a-query.ts'), 'export default { hello: 1 };\n');
    const refused = await run('npx', ['--no-install', 'sluice', 'explain', './not-a-query.ts'], app);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/query module .*not-a-query\.ts has a default export that is an object with keys hello, not a query definition/);
  });

  it('npx sluice dev ./query.ts: without the emulator packages it names the one to install; with them it runs the query and prints every batch', async () => {
    // The embedded emulators' check: under LocalStack (AWS_ENDPOINT_URL set) sluice dev starts none.
    const missing = await run('npx', ['--no-install', 'sluice', 'dev', './query.ts'], app, { AWS_ENDPOINT_URL: '' });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/the local emulators need the package '(kinesis-local|amplify-dynamodb-simulator|s3rver)', which is not installed\. Install it next to sluice: npm install --save-dev /);
    // The emulators are optional peers (about 250 MB with DynamoDB Local): linked from this
    // repository's install rather than installed again, to keep the test short.
    for (const name of ['kinesis-local', 'amplify-dynamodb-simulator', 's3rver']) {
      symlinkSync(join(REPO, 'node_modules', name), join(app, 'node_modules', name), 'dir');
    }
    const events = ['north', 'south', 'north', 'east'].map((store, i) => JSON.stringify({ store_id: store, amount: 10 + i, ts: `2024-05-01T12:0${i}:00Z` }));
    writeFileSync(join(app, 'events.jsonl'), `${events.join('\n')}\n`);
    const dev = await timed('sluice dev', () => run('npx', ['--no-install', 'sluice', 'dev', './query.ts', '--input', 'events.jsonl', '--shards', '1'], app));
    expect(dev.code, dev.stdout + dev.stderr).toBe(0);
    expect(dev.stdout).toMatch(/query 'packed-orders-per-store' \(update mode → dynamodb sink\), 1 shard/);
    expect(dev.stdout).toMatch(/\[shardId-000000000000\] batch 0: 4 input rows/);
  });
});
