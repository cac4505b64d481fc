/**
 * `npm run bench:compare -- <treeA> <treeB>`: the windowed-aggregation query of the engine
 * benchmark, run by two checkouts of Sluice (e.g. `git worktree add /tmp/before HEAD~1`) in ONE
 * process, alternately, so both see the same machine noise. Prints CPU seconds per run (min and
 * median) and B/A: below 1 means B is faster. For deciding whether a change is worth keeping on a
 * noisy machine, where two separate `npm run bench` runs can differ by ±30%. Even so, run it with
 * BENCH_BATCHES=300 and in both orders: the first rounds favour whichever runs second, and a tree
 * compared with itself can show B/A from 0.5 (min) on short runs.
 */
import { resolve } from 'node:path';
import { makeBatches } from './windowed-aggregation.bench.js';

interface Tree {
  readonly name: string;
  readonly session: typeof import('../lib/api/session.js');
  readonly sink: typeof import('../lib/sinks/foreach-batch-sink.js');
  readonly fns: typeof import('../lib/plan/functions.js');
}

async function load(dir: string): Promise<Tree> {
  const root = resolve(dir);
  return {
    name: root,
    session: await import(`${root}/lib/api/session.ts`),
    sink: await import(`${root}/lib/sinks/foreach-batch-sink.ts`),
    fns: await import(`${root}/lib/plan/functions.ts`),
  };
}

/** CPU seconds (all threads) of one run over `batches`. */
async function run(tree: Tree, batches: string[][]): Promise<number> {
  const { SluiceSession, toSchema } = tree.session;
  const { col, count, sum, window } = tree.fns;
  const { stream, df } = new SluiceSession().jsonMemoryStream(toSchema('user_id string, amount double, event_time timestamp, country string, device string'));
  let emitted = 0;
  const handle = await df.withWatermark('event_time', '2 minutes')
    .groupBy(window(col('event_time'), '5 minutes'), col('user_id'))
    .agg(count().as('events'), sum('amount').as('amount'))
    .writeStream.outputMode('append')
    .sink(new tree.sink.ForeachBatchSink((rows) => { emitted += rows.length; }))
    .start();
  const cpu = process.cpuUsage();
  for (const records of batches) {
    stream.addData(records);
    await handle.processAllAvailable();
  }
  const used = process.cpuUsage(cpu);
  await handle.stop();
  if (emitted === 0) throw new Error(`${tree.name} emitted nothing`);
  return (used.user + used.system) / 1e6;
}

const [dirA, dirB] = process.argv.slice(2);
if (!dirA || !dirB) {
  console.error('usage: npm run bench:compare -- <treeA> <treeB>');
  process.exit(2);
}
const a = await load(dirA);
const b = await load(dirB);
const batches = makeBatches(Number(process.env.BENCH_BATCHES ?? 100));
await run(a, batches.slice(0, 20));
await run(b, batches.slice(0, 20));
const ta: number[] = [];
const tb: number[] = [];
for (let i = 0; i < Number(process.env.BENCH_ROUNDS ?? 8); i++) {
  ta.push(await run(a, batches));
  tb.push(await run(b, batches));
}
const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
const line = (name: string, xs: number[]): string => `${name}: min ${Math.min(...xs).toFixed(3)} s, median ${median(xs).toFixed(3)} s CPU per ${batches.length * 1000} events`;
console.log(line(`A ${a.name}`, ta));
console.log(line(`B ${b.name}`, tb));
console.log(`B/A: ${(Math.min(...tb) / Math.min(...ta)).toFixed(3)} (min), ${(median(tb) / median(ta)).toFixed(3)} (median)`);
