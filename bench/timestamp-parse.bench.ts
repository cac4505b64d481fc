/**
 * Event times as JSON records mostly carry them (`2024-05-01T14:00:05.250Z`), parsed by the
 * decoders' `parseTimestamp` (its fast path for that form) against the general parser it falls
 * back to (Spark 4's string-to-timestamp forms), alternated rounds, CPU time, answers compared
 * every round:
 *
 *   node --conditions=sluice-source --import tsx bench/timestamp-parse.bench.ts [--json]
 */
import { pathToFileURL } from 'node:url';
import { parseTimestamp, parseTimestampUnbounded } from '../lib/core/timestamps.js';

const RECORDS = 200_000;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);

export interface TimestampParseFigures {
  readonly generalNsPerRecord: number;
  readonly fastNsPerRecord: number;
  /** General CPU time over fast (median of the rounds): how many times faster the fast path is. */
  readonly ratioCpuMedian: number;
}

function sampleTimes(): string[] {
  const start = Date.UTC(2024, 4, 1);
  // Ten days, with and without milliseconds, as producers write them.
  return Array.from({ length: RECORDS }, (_, i) => {
    const iso = new Date(start + i * 4_321).toISOString();
    return i % 2 === 0 ? iso : iso.replace(/\.\d{3}Z$/, 'Z');
  });
}

function cpuMsOf(parse: (text: string) => number | null, texts: readonly string[], out: (number | null)[]): number {
  const before = process.cpuUsage();
  for (let i = 0; i < texts.length; i++) out[i] = parse(texts[i]!);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}

export function measureTimestampParse(): TimestampParseFigures {
  const texts = sampleTimes();
  const general: (number | null)[] = new Array(texts.length);
  const fast: (number | null)[] = new Array(texts.length);
  const ratios: number[] = [];
  let generalMs = Infinity;
  let fastMs = Infinity;
  for (let round = 0; round < ROUNDS; round++) {
    const g = cpuMsOf(parseTimestampUnbounded, texts, general);
    const f = cpuMsOf(parseTimestamp, texts, fast);
    for (let i = 0; i < texts.length; i++) {
      if (general[i] !== fast[i]) throw new Error(`${texts[i]}: the fast path gives ${fast[i]}, the general parser ${general[i]}`);
    }
    if (round === 0) continue; // warm-up
    generalMs = Math.min(generalMs, g);
    fastMs = Math.min(fastMs, f);
    ratios.push(g / f);
  }
  ratios.sort((a, b) => a - b);
  return {
    generalNsPerRecord: Math.round((generalMs * 1e6) / RECORDS),
    fastNsPerRecord: Math.round((fastMs * 1e6) / RECORDS),
    ratioCpuMedian: Math.round(ratios[ratios.length >> 1]! * 100) / 100,
  };
}

export function printTimestampParse(f: TimestampParseFigures): void {
  console.log(`timestamp parsing, ${RECORDS} ISO-8601 UTC event times: general parser ${f.generalNsPerRecord} ns, `
    + `decoders' fast path ${f.fastNsPerRecord} ns per record; ${f.ratioCpuMedian}x (median CPU ratio of ${ROUNDS - 1} rounds)`);
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) {
  const figures = measureTimestampParse();
  if (process.argv.includes('--json')) console.log(JSON.stringify(figures));
  else printTimestampParse(figures);
}
