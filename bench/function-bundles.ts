/**
 * Builds the functions' bundles the way the SluiceQuery construct does (cdk/bundling.ts: the same
 * generated entries, the same esbuild options), for the bundle benchmark and the size test.
 */
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { esbuildOptionsFor, type BundledSinkKind } from '../cdk/bundling.js';
import { handlerEntrySource, type HandlerKind } from '../cdk/generated-entry.js';

export const PROJECT_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** One example per sink kind, deployed as the construct deploys them (bin/../cdk/sluice-example-stack.ts). */
export const BUNDLED_QUERIES = [
  { name: 'update-dynamodb', module: 'examples/hourly-sales-live.ts', sink: 'dynamodb', kinds: ['kinesis', 'scheduled'] },
  { name: 'append-s3-files', module: 'examples/hourly-sales-archive.ts', sink: 's3-files', kinds: ['kinesis', 'scheduled'] },
  { name: 'complete-s3-snapshot', module: 'examples/hourly-sales-snapshot.ts', sink: 's3-snapshot', kinds: ['kinesis', 'scheduled'] },
  { name: 'per-product-repartitioned', module: 'examples/hourly-sales-per-product.ts', sink: 'dynamodb', kinds: ['kinesis', 'scheduled', 'repartition'] },
] as const satisfies readonly { name: string; module: string; sink: BundledSinkKind; kinds: readonly HandlerKind[] }[];

export interface BuiltBundle {
  readonly name: string;
  readonly file: string;
  readonly bytes: number;
  readonly sourceMapBytes: number;
}

/**
 * Entries and bundles go under cdk.out inside the project (as the construct's do), so that
 * `sluice/lambda` and the external `@aws-sdk/*` resolve from the project's node_modules, as they
 * do from the runtime's on Lambda.
 */
export async function buildFunctionBundles(dir = join(PROJECT_ROOT, 'cdk.out', 'bundle-bench')): Promise<BuiltBundle[]> {
  prepare(dir);
  const built: BuiltBundle[] = [];
  for (const query of BUNDLED_QUERIES) {
    for (const kind of query.kinds) {
      const name = `${query.name}/${kind}`;
      const entry = join(dir, `${query.name}-${kind}-entry.mjs`);
      writeFileSync(entry, handlerEntrySource(kind, join(PROJECT_ROOT, query.module)));
      built.push(await buildOne(name, entry, join(dir, 'out', query.name, kind, 'index.js'), query.sink));
    }
  }
  return built;
}

/** A handler that does nothing: the floor init is measured against. */
export async function buildEmptyBundle(dir = join(PROJECT_ROOT, 'cdk.out', 'bundle-bench')): Promise<BuiltBundle> {
  prepare(dir);
  const entry = join(dir, 'empty-entry.mjs');
  writeFileSync(entry, 'export const handler = async () => {};\n');
  return buildOne('empty', entry, join(dir, 'out', 'empty', 'index.js'));
}

/** The bundles are CommonJS, as in a Lambda asset (the project's package.json says "module"). */
function prepare(dir: string): void {
  mkdirSync(join(dir, 'out'), { recursive: true });
  writeFileSync(join(dir, 'out', 'package.json'), '{ "type": "commonjs" }\n');
}

/** `BENCH_BUNDLE_PER_SINK=0` builds every function with all three sinks (as before per-sink bundles), for comparing. */
const PER_SINK = process.env.BENCH_BUNDLE_PER_SINK !== '0';

/**
 * `BENCH_BUNDLE_SDK=bundled` bundles `@aws-sdk/*` too (the alternative to leaving it to the runtime),
 * for comparing the two choices.
 */
const SDK_BUNDLED = process.env.BENCH_BUNDLE_SDK === 'bundled';

async function buildOne(name: string, entry: string, outfile: string, sinkKind?: BundledSinkKind): Promise<BuiltBundle> {
  await build({ ...esbuildOptionsFor(entry, outfile, PER_SINK ? sinkKind : undefined), ...(SDK_BUNDLED ? { external: [] } : {}) });
  const mapBytes = (() => { try { return statSync(`${outfile}.map`).size; } catch { return 0; } })();
  return { name, file: outfile, bytes: statSync(outfile).size, sourceMapBytes: mapBytes };
}

/**
 * Another revision's bundles, built by its own bench/function-bundles.ts in a copy of its tree
 * (`git archive`, sharing this checkout's node_modules), named `baseline:<function>`.
 */
export function buildBaselineBundles(revision: string): BuiltBundle[] {
  const root = join(PROJECT_ROOT, 'cdk.out', 'bundle-baseline');
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  execFileSync('sh', ['-c', `git archive "$1" | tar -x -C "$2"`, 'archive', revision, root], { cwd: PROJECT_ROOT });
  if (!existsSync(join(root, 'node_modules'))) symlinkSync(join(PROJECT_ROOT, 'node_modules'), join(root, 'node_modules'));
  const script = "const m = await import('./bench/function-bundles.ts'); console.log(JSON.stringify(await m.buildFunctionBundles()));";
  const out = execFileSync(process.execPath, ['--conditions=sluice-source', '--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: root, encoding: 'utf8', env: { ...process.env, NODE_NO_WARNINGS: '1' },
  });
  const built = JSON.parse(out.trim().split('\n').pop()!) as BuiltBundle[];
  return built.map((b) => ({ ...b, name: `baseline:${b.name}` }));
}
