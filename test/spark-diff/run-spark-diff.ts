/**
 * `npm run spark-diff [-- options]`: runs each case on real PySpark (one local[2] JVM for the run)
 * and on Sluice's in-memory engine, compares step by step, shrinks a mismatching random case, and
 * prints a summary per shape. Exits non-zero on a mismatch or a harness error.
 *
 * Options: `--all` (every hand-written case and one random case per shape), `--long` (every
 * hand-written case, ten random cases per shape, longer), `--seeds N` (random cases per shape),
 * `--seed S` (first seed), `--only <substring>` (case ids), `--no-shrink`, `--report <file>`,
 * `--pyspark <version>` (compare against another PySpark, in its own venv; the pin is python-env.ts).
 * The bounded default (CI, a few minutes) is described at CI_SHAPES below.
 * A difference listed in cases/known-divergences.json is reported as KNOWN (not a pass, not a failure).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { UnsupportedScenario, buildInputs, buildQuery } from '../conformance/scenario-query.js';
import type { DiffCase, EngineResult, Json } from './case-format.js';
import { compare, type Difference } from './compare.js';
import { generateCase } from './generate.js';
import { ensurePython } from './python-env.js';
import { shrink } from './shrink.js';
import { runOnSluice } from './sluice-side.js';
import { SparkProcess } from './spark-process.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');

/**
 * The bounded default (CI: a few minutes on a loaded machine): the refusals, one hand-written case
 * per family of CI_SHAPES, one random case of each of CI_RANDOM_SHAPES, one stateful case and the
 * scalar function cases (cases/functions.json).
 */
const CI_SHAPES = ['tumbling-append', 'session-append', 'global-update', 'dedup-within-watermark', 'join-left-outer', 'union-two-watermarks-min', 'refusal', 'sql'];
const CI_RANDOM_SHAPES = ['tumbling-append', 'global-update'];
/** One transformWithState case with event-time timers (issue 16): the whole stateful file is too slow for CI. */
const CI_STATEFUL = ['stateful/tws-session-event-time-timer'];
/** Cases of mismatches found and fixed (so each fix stays checked against Spark) and of the later shapes. */
const CI_CASES = [
  'global-update-watermark/no-data-batch-re-emits', 'join-left-outer-non-key-condition/violated', 'dedup-with-watermark/null-event-time-kept',
  'tumbling-first-last-collect-append/basic', 'join-right-outer/basic', 'stream-static-inner/basic', 'chained-dedup-then-count-append/basic',
  // A windowed aggregation feeding a stream-stream join (Spark 4 runs it in append mode; Sluice stages it behind two hops).
  'agg-then-join-stream/basic',
  'types/cast-timestamp-spark-forms', 'types/timestamp-vs-malformed-string', 'types/timestamp-in-malformed-string',
  // Their pattern and unit arguments once reached Spark as column names (the runner's call_function).
  'types/datetime-fields', 'types/date-arithmetic', 'types/parse-patterns', 'types/to-timestamp-bad-month',
];
const inCiSelection = (c: DiffCase): boolean => CI_SHAPES.includes(c.shape) || c.shape.startsWith('functions-')
  || CI_STATEFUL.includes(c.id) || CI_CASES.includes(c.id) || (c.id.endsWith('/seed-1') && CI_RANDOM_SHAPES.includes(c.shape));

interface Options {
  all: boolean;
  seeds: number;
  seed: number;
  maxSteps: number;
  only: string | null;
  shrink: boolean;
  report: string;
  pyspark: string | undefined;
}

function parseArgs(argv: readonly string[]): Options {
  const o: Options = { all: false, seeds: 0, seed: 1, maxSteps: 4, only: null, shrink: true, report: join(root, '.spark-diff', 'last-report.json'), pyspark: undefined };
  const args = argv.filter((a) => a !== '--');
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--all') {
      o.all = true;
      o.seeds = Math.max(o.seeds, 1);
    } else if (a === '--long') {
      o.all = true;
      o.seeds = 10;
      o.maxSteps = 8;
    } else if (a === '--seeds') o.seeds = Number(args[++i]);
    else if (a === '--seed') o.seed = Number(args[++i]);
    else if (a === '--only') o.only = args[++i]!;
    else if (a === '--no-shrink') o.shrink = false;
    else if (a === '--report') o.report = args[++i]!;
    else if (a === '--pyspark') o.pyspark = args[++i]!;
    else throw new Error(`unknown option ${a} (--all, --long, --seeds N, --seed S, --only <id part>, --no-shrink, --report <file>, --pyspark <version>)`);
  }
  return o;
}

function loadCases(o: Options): DiffCase[] {
  const read = (f: string): Json => JSON.parse(readFileSync(join(here, 'cases', f), 'utf8'));
  const shapes = read('shapes.json') as Record<string, Json>;
  const hand = (read('hand.json') as Json[]).map((h) => ({ ...shapes[h.shape], ...h }));
  const random: DiffCase[] = [];
  const ciDefault = !(o.all || o.only || o.seeds > 0);
  for (const [name, shape] of Object.entries(shapes)) {
    const seeds = ciDefault && CI_RANDOM_SHAPES.includes(name) ? 1 : o.seeds;
    for (let s = 0; s < seeds; s++) random.push(generateCase(name, shape, o.seed + s, { maxSteps: o.maxSteps, maxRowsPerStep: 4, spread: 12 }));
  }
  const all = [
    ...hand, ...(read('refusals.json') as DiffCase[]), ...(read('stateful.json') as DiffCase[]), ...(read('sql.json') as DiffCase[]),
    ...(read('functions.json') as DiffCase[]),
    // Data types and the date/time functions: stateless selects, casts, ANSI refusals, decimal and date keys.
    ...(read('types.json') as DiffCase[]),
    ...random,
  ];
  const chosen = ciDefault ? all.filter(inCiSelection) : all;
  return o.only ? chosen.filter((c) => c.id.includes(o.only!)) : chosen;
}

function outputColumns(c: DiffCase): string[] {
  try {
    return buildQuery([...c.query], buildInputs(c, { ...(c.conf ?? {}) })).plan.output.map((a) => a.name);
  } catch {
    return [];
  }
}

interface KnownDivergence {
  readonly id: string;
  readonly shapes: readonly string[];
  /** Only these case ids, when given. */
  readonly ids?: readonly string[];
  readonly where: string;
  readonly reason: string;
}

const KNOWN: readonly KnownDivergence[] = JSON.parse(readFileSync(join(here, 'cases', 'known-divergences.json'), 'utf8'));

/** The known divergence that explains every difference of a case, if one does. */
function knownDivergence(c: DiffCase, differences: readonly Difference[]): KnownDivergence | undefined {
  return KNOWN.find((k) => k.shapes.includes(c.shape) && (!k.ids || k.ids.includes(c.id))
    && differences.every((d) => new RegExp(`(^|: )(${k.where})$`).test(d.where)));
}

interface Outcome {
  readonly id: string;
  readonly shape: string;
  readonly status: 'match' | 'known' | 'mismatch' | 'unsupported' | 'harness-error';
  readonly differences?: Difference[];
  readonly spark?: EngineResult;
  readonly sluice?: EngineResult;
  readonly shrunk?: { case: DiffCase; differences: Difference[]; tries: number };
  readonly note?: string;
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const cases = loadCases(o);
  const python = ensurePython(root, o.pyspark);
  const started = performance.now();
  const { spark, startupSeconds, version } = await SparkProcess.start(python, join(here, 'spark_runner.py'));
  console.log(`spark-diff: PySpark ${version} ready in ${startupSeconds} s (JVM start + SparkSession); ${cases.length} cases`);
  const diffCase = async (c: DiffCase): Promise<{ spark: EngineResult; sluice: EngineResult; differences: Difference[] }> => {
    const sluice = await runOnSluice(c);
    const sparkResult = await spark.run(c);
    if (sparkResult.harnessError) throw new Error(`Spark runner: ${sparkResult.harnessError}`);
    return { spark: sparkResult, sluice, differences: compare(c, sparkResult, sluice, outputColumns(c)) };
  };
  const outcomes: Outcome[] = [];
  try {
    for (const c of cases) {
      const t = performance.now();
      let outcome: Outcome;
      try {
        const r = await diffCase(c);
        const known = r.differences.length > 0 ? knownDivergence(c, r.differences) : undefined;
        const status = r.differences.length === 0 ? 'match' : known ? 'known' : 'mismatch';
        outcome = { id: c.id, shape: c.shape, status, ...r, ...(known ? { note: `known divergence ${known.id}` } : {}) };
        if (outcome.status === 'mismatch' && o.shrink && c.id.includes('/seed-')) {
          const { smallest, tries } = await shrink(c, async (x) => (await diffCase(x).catch(() => null))?.differences.length !== 0, 25);
          const again = await diffCase(smallest);
          outcome = { ...outcome, shrunk: { case: smallest, differences: again.differences, tries } };
        }
      } catch (error) {
        outcome = error instanceof UnsupportedScenario
          ? { id: c.id, shape: c.shape, status: 'unsupported', note: error.message, spark: await spark.run(c) }
          : { id: c.id, shape: c.shape, status: 'harness-error', note: (error as Error).message.slice(0, 1500) };
      }
      outcomes.push(outcome);
      const secs = ((performance.now() - t) / 1000).toFixed(1);
      console.log(`${outcome.status.toUpperCase().padEnd(13)} ${c.id} (${secs} s)${outcome.note ? `: ${outcome.note.split('\n')[0]}` : ''}`);
      for (const d of (outcome.shrunk?.differences ?? outcome.differences ?? []).slice(0, 4)) {
        console.log(`    ${d.where}\n      spark:  ${JSON.stringify(d.spark)}\n      sluice: ${JSON.stringify(d.sluice)}`);
      }
    }
  } finally {
    await spark.close();
  }
  const byShape = new Map<string, Record<string, number>>();
  for (const x of outcomes) {
    const row = byShape.get(x.shape) ?? { cases: 0, match: 0, known: 0, mismatch: 0, unsupported: 0, 'harness-error': 0 };
    row.cases!++;
    row[x.status]!++;
    byShape.set(x.shape, row);
  }
  console.log('\nshape                          cases  match  known  mismatch  other');
  for (const [shape, r] of [...byShape].sort()) {
    console.log(`${shape.padEnd(30)} ${String(r.cases).padStart(5)}  ${String(r.match).padStart(5)}  ${String(r.known).padStart(5)}  ${String(r.mismatch).padStart(8)}  ${String(r.unsupported! + r['harness-error']!).padStart(5)}`);
  }
  const total = (s: Outcome['status']): number => outcomes.filter((x) => x.status === s).length;
  const seconds = ((performance.now() - started) / 1000).toFixed(0);
  console.log(`\nspark-diff: ${outcomes.length} cases, ${total('match')} match, ${total('known')} known divergence, ${total('mismatch')} mismatch, ${total('unsupported') + total('harness-error')} not compared; Spark start-up ${startupSeconds} s, run ${seconds} s`);
  mkdirSync(dirname(o.report), { recursive: true });
  writeFileSync(o.report, JSON.stringify({ version, startupSeconds, seconds: Number(seconds), outcomes }, null, 1));
  console.log(`details: ${o.report}`);
  if (outcomes.some((x) => x.status !== 'match' && x.status !== 'known')) process.exitCode = 1;
}

await main();
