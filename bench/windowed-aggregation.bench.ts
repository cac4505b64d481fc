/**
 * `npm run bench [-- --json]`: engine throughput on
 *   groupBy(window(event_time, 5 min), user_id).agg(count, sum(amount))
 * over 10,000 keys, 20% of events out of order, batches of 1,000 JSON records, against a
 * hand-written baseline in the same run (JSON.parse per record + one Map per window, in place).
 * Reports events/second for both and the ratio engine / baseline (higher is better).
 */
import { SluiceSession } from '../lib/api/session.js';
import { ForeachBatchSink } from '../lib/sinks/foreach-batch-sink.js';
import { col, count, sum, window } from '../lib/plan/functions.js';
import { toSchema } from '../lib/api/session.js';

const KEYS = 10_000;
const BATCH = 1_000;
const BATCHES = Number(process.env.BENCH_BATCHES ?? 300);
const WINDOW_MS = 5 * 60_000;

/** The benchmark's input: `batches` batches of 1,000 JSON records (deterministic). */
export function makeBatches(batches = BATCHES): string[][] {
  let seed = 42;
  const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const out: string[][] = [];
  let clock = Date.parse('2024-05-01T00:00:00Z');
  for (let b = 0; b < batches; b++) {
    const records: string[] = [];
    for (let i = 0; i < BATCH; i++) {
      clock += 50;
      // 20% arrive late by up to 2 minutes.
      const eventMs = random() < 0.2 ? clock - Math.floor(random() * 120_000) : clock;
      records.push(JSON.stringify({
        user_id: `user-${Math.floor(random() * KEYS)}`,
        amount: Math.round(random() * 10_000) / 100,
        event_time: eventMs / 1000,
        country: 'NL',
        device: random() < 0.5 ? 'ios' : 'android',
      }));
    }
    out.push(records);
  }
  return out;
}

const schema = toSchema('user_id string, amount double, event_time timestamp, country string, device string');

/** Wall-clock and CPU (all threads of the process, so GC helpers count) seconds of one run. */
interface Timing {
  readonly wallSec: number;
  readonly cpuSec: number;
}

/** What a run emitted, to check that the engine and the baseline computed the same thing. */
interface Answer {
  groups: number;
  events: number;
  amount: number;
}

function startTiming(): () => Timing {
  const wall = performance.now();
  const cpu = process.cpuUsage();
  return () => {
    const used = process.cpuUsage(cpu);
    return { wallSec: (performance.now() - wall) / 1000, cpuSec: (used.user + used.system) / 1e6 };
  };
}

export async function runEngine(batches: string[][]): Promise<Timing & { answer: Answer }> {
  // Raw JSON records in, as a Kinesis shard delivers them: the engine decodes (only the columns
  // the query reads) as part of each batch.
  const { stream, df } = new SluiceSession().jsonMemoryStream(schema);
  const query = df
    .withWatermark('event_time', '2 minutes')
    .groupBy(window(col('event_time'), '5 minutes'), col('user_id'))
    .agg(count().as('events'), sum('amount').as('amount'));
  const answer: Answer = { groups: 0, events: 0, amount: 0 };
  const handle = await query.writeStream.outputMode('append')
    .sink(new ForeachBatchSink((rows) => {
      for (const row of rows) {
        answer.groups++;
        answer.events += row[2] as number;
        answer.amount += row[3] as number;
      }
    }))
    .start();
  const stop = startTiming();
  for (const records of batches) {
    stream.addData(records);
    await handle.processAllAvailable();
  }
  const timing = stop();
  await handle.stop();
  if (answer.groups === 0) throw new Error('engine emitted nothing: the benchmark query is broken');
  if (stream.invalidRecords.length > 0) throw new Error(`engine refused ${stream.invalidRecords.length} records: the benchmark input is broken`);
  return { ...timing, answer };
}

export function runBaseline(batches: string[][]): Timing & { answer: Answer } {
  const windows = new Map<number, Map<string, { count: number; sum: number }>>();
  let maxEventMs = 0;
  const answer: Answer = { groups: 0, events: 0, amount: 0 };
  const stop = startTiming();
  for (const records of batches) {
    const watermark = maxEventMs - 120_000;
    for (const r of records) {
      const e = JSON.parse(r) as { user_id: string; amount: number; event_time: number };
      const ms = e.event_time * 1000;
      const start = ms - (ms % WINDOW_MS);
      if (start + WINDOW_MS <= watermark) continue;
      if (ms > maxEventMs) maxEventMs = ms;
      let groups = windows.get(start);
      if (!groups) windows.set(start, (groups = new Map()));
      const g = groups.get(e.user_id);
      if (g) {
        g.count++;
        g.sum += e.amount;
      } else groups.set(e.user_id, { count: 1, sum: e.amount });
    }
    const closeBefore = maxEventMs - 120_000;
    for (const [start, groups] of windows) {
      if (start + WINDOW_MS <= closeBefore) {
        for (const g of groups.values()) {
          answer.groups++;
          answer.events += g.count;
          answer.amount += g.sum;
        }
        windows.delete(start);
      }
    }
  }
  const timing = stop();
  if (answer.groups === 0) throw new Error('baseline emitted nothing');
  return { ...timing, answer };
}

/** Same windows, same counts, same sums (up to the order of floating-point additions). */
function checkSameAnswer(engine: Answer, baseline: Answer): void {
  const close = Math.abs(engine.amount - baseline.amount) <= 1e-9 * Math.abs(baseline.amount);
  if (engine.groups !== baseline.groups || engine.events !== baseline.events || !close) {
    throw new Error(`the engine and the baseline disagree: engine ${JSON.stringify(engine)}, baseline ${JSON.stringify(baseline)}`);
  }
}

export interface WindowedAggregationResult {
  /** Events per wall-clock second, best run. */
  readonly engineEventsPerSec: number;
  readonly baselineEventsPerSec: number;
  /** engineEventsPerSec / baselineEventsPerSec. */
  readonly ratio: number;
  /** The same per CPU second of the process (GC threads included): steadier on a shared machine. */
  readonly engineEventsPerCpuSec: number;
  readonly baselineEventsPerCpuSec: number;
  readonly ratioCpu: number;
  /** Median over the alternated rounds of each round's baseline/engine ratio (wall, CPU): less luck than best-of. */
  readonly ratioMedian: number;
  readonly ratioCpuMedian: number;
  readonly rounds: number;
  /** V8 flags of the process (npm run bench sizes the young generation as the Lambda functions do). */
  readonly v8Flags: readonly string[];
}

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Engine vs baseline on the same batches, measured alternately; the best run of each. */
export async function measureWindowedAggregation(): Promise<WindowedAggregationResult> {
  const batches = makeBatches();
  const events = batches.length * BATCH;
  // Warm up both paths, then measure alternately: the best of each, and the median ratio of the rounds (noisy 2-core machine).
  runBaseline(batches.slice(0, 20));
  await runEngine(batches.slice(0, 20));
  const best = { engineWall: Infinity, baselineWall: Infinity, engineCpu: Infinity, baselineCpu: Infinity };
  const wallRatios: number[] = [];
  const cpuRatios: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const b = runBaseline(batches);
    const e = await runEngine(batches);
    checkSameAnswer(e.answer, b.answer);
    wallRatios.push(b.wallSec / e.wallSec);
    cpuRatios.push(b.cpuSec / e.cpuSec);
    best.baselineWall = Math.min(best.baselineWall, b.wallSec);
    best.baselineCpu = Math.min(best.baselineCpu, b.cpuSec);
    best.engineWall = Math.min(best.engineWall, e.wallSec);
    best.engineCpu = Math.min(best.engineCpu, e.cpuSec);
  }
  return {
    engineEventsPerSec: Math.round(events / best.engineWall),
    baselineEventsPerSec: Math.round(events / best.baselineWall),
    ratio: Number((best.baselineWall / best.engineWall).toFixed(3)),
    engineEventsPerCpuSec: Math.round(events / best.engineCpu),
    baselineEventsPerCpuSec: Math.round(events / best.baselineCpu),
    ratioCpu: Number((best.baselineCpu / best.engineCpu).toFixed(3)),
    ratioMedian: Number(median(wallRatios).toFixed(3)),
    ratioCpuMedian: Number(median(cpuRatios).toFixed(3)),
    rounds: ROUNDS,
    v8Flags: process.execArgv.filter((a) => a.startsWith('--max-semi-space-size')),
  };
}

export function printWindowedAggregation(result: WindowedAggregationResult): void {
  console.log(`windowed aggregation, ${KEYS} keys, ${BATCHES} batches x ${BATCH} JSON records, 20% out of order`
    + ` (V8 flags: ${result.v8Flags.join(' ') || 'defaults'})`);
  console.log(`  engine:   ${result.engineEventsPerSec.toLocaleString('en-US')} events/s`);
  console.log(`  baseline: ${result.baselineEventsPerSec.toLocaleString('en-US')} events/s (JSON.parse + Map per window)`);
  console.log(`  ratio:    ${result.ratio} (wall clock); ${result.ratioCpu} per CPU second of the process `
    + `(engine ${result.engineEventsPerCpuSec.toLocaleString('en-US')}, baseline ${result.baselineEventsPerCpuSec.toLocaleString('en-US')}), best of each`);
  console.log(`  median of ${result.rounds} alternated rounds: ${result.ratioMedian} (wall clock); ${result.ratioCpuMedian} per CPU second`);
}

// Run directly (npm run bench:engine), not when imported by bench/all.ts.
if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const result = await measureWindowedAggregation();
  if (process.argv.includes('--json')) console.log(JSON.stringify(result));
  else printWindowedAggregation(result);
}
