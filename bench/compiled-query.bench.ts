/**
 * What compiling a deployed query once per container saves per invocation: shard invocations on
 * memory backends (the engine's whole per-invocation path, no AWS latency), with the query
 * compiled once and reused (what the handlers do) against compiled again for every invocation
 * (what every invocation used to do: transform, analyzer, co-partitioning, stage split, runtime
 * checks). Small deliveries (10 records) make the fixed per-invocation cost visible.
 *
 *   npm run bench:compile [-- --json]      (BENCH_INVOCATIONS=2000 by default)
 */
import { performance } from 'node:perf_hooks';
import { MemoryCheckpoint } from '../lib/checkpoint/memory-checkpoint.js';
import { col, count, sum, window } from '../lib/plan/functions.js';
import { compileQuery, type CompileOptions, type CompiledQuery } from '../lib/query/compiled-query.js';
import { defineQuery, type StreamingQueryDefinition } from '../lib/query/query-definition.js';
import { runShardInvocation } from '../lib/query/shard-invocation.js';
import { MemoryDeadLetterWriter } from '../lib/sources/dead-letter.js';
import type { ShardRecord } from '../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../lib/sinks/memory-sink.js';
import type { Sink } from '../lib/sinks/sink.js';

const INVOCATIONS = Number(process.env.BENCH_INVOCATIONS ?? 2000);
const RECORDS_PER_INVOCATION = 10;
const ROUNDS = 3;

const source = { schema: 'store string, product string, amount double, ts timestamp', partitionKey: 'store' } as const;
const cases: { name: string; definition: StreamingQueryDefinition; options: CompileOptions }[] = [
  {
    name: 'hourly sales per store (one stage, update)',
    definition: defineQuery({
      name: 'bench-per-store', source, outputMode: 'update', sink: { kind: 'dynamodb' },
      transform: (df) => df.withWatermark('ts', '15 minutes').groupBy(window(col('ts'), '1 hour'), col('store')).agg(sum('amount').as('revenue'), count('*').as('sales')),
    }),
    options: { expectedShardCount: 4 },
  },
  {
    name: 'hourly sales per product (stage 1 of a repartition stage)',
    definition: defineQuery({
      name: 'bench-per-product', source, outputMode: 'update', sink: { kind: 'dynamodb' },
      transform: (df) => df.filter(col('amount').gt(0)).withWatermark('ts', '15 minutes')
        .groupBy(window(col('ts'), '1 hour'), col('product')).agg(sum('amount').as('revenue'), count('*').as('sales')),
    }),
    options: { expectedShardCount: 4, allowRepartition: true },
  },
];

/** Stage 1's output is routed elsewhere; here it is dropped (the hop is measured by repartition-hop). */
const discard: Sink = { description: 'discard', supportedOutputModes: ['append', 'update', 'complete'], addBatch: async () => {} };

function deliveries(): ShardRecord[][] {
  let seq = 1_000_000n;
  const start = Date.parse('2024-05-01T00:00:00Z');
  return Array.from({ length: INVOCATIONS }, (_, i) => Array.from({ length: RECORDS_PER_INVOCATION }, (_, j) => {
    const n = i * RECORDS_PER_INVOCATION + j;
    const data = JSON.stringify({ store: `s${n % 7}`, product: `p${n % 13}`, amount: (n % 50) + 1, ts: new Date(start + n * 1000).toISOString() });
    return { sequenceNumber: String(seq++), partitionKey: `s${n % 7}`, dataBase64: Buffer.from(data).toString('base64'), approximateArrivalTimestampMs: 0 };
  }));
}

/** Mean CPU milliseconds per invocation over one shard's deliveries (CPU time: the machine may be shared). */
async function run(query: () => CompiledQuery, input: ShardRecord[][], stage1: boolean): Promise<number> {
  const backends = { checkpoint: new MemoryCheckpoint(), sink: stage1 ? discard : new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
  const started = process.cpuUsage();
  for (const records of input) {
    const result = await runShardInvocation(query(), { shardId: 'shardId-0', records }, backends);
    if (result.error) throw result.error;
  }
  const used = process.cpuUsage(started);
  return (used.user + used.system) / 1000 / input.length;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function measureCompiledQuery(): Promise<Record<string, unknown>[]> {
  const input = deliveries();
  const out: Record<string, unknown>[] = [];
  for (const c of cases) {
    const compiled = compileQuery(c.definition, c.options);
    const stage1 = compiled.needsRepartition;
    await run(() => compiled, input.slice(0, 200), stage1); // warm-up
    const reuse: number[] = [];
    const perInvocation: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      reuse.push(await run(() => compiled, input, stage1));
      perInvocation.push(await run(() => compileQuery(c.definition, c.options), input, stage1));
    }
    const compileStart = performance.now();
    for (let i = 0; i < 500; i++) compileQuery(c.definition, c.options);
    const compileMs = (performance.now() - compileStart) / 500;
    const a = median(reuse);
    const b = median(perInvocation);
    out.push({
      query: c.name, invocations: INVOCATIONS, recordsPerInvocation: RECORDS_PER_INVOCATION,
      compiledOnceMsPerInvocation: +a.toFixed(3), compiledPerInvocationMsPerInvocation: +b.toFixed(3),
      savedMsPerInvocation: +(b - a).toFixed(3), savedPercent: +(((b - a) / b) * 100).toFixed(1), compileQueryMs: +compileMs.toFixed(3),
    });
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const results = await measureCompiledQuery();
  if (process.argv.includes('--json')) console.log(JSON.stringify(results));
  else {
    for (const r of results) {
      console.log(`${r.query}: ${r.invocations} invocations of ${r.recordsPerInvocation} records on memory backends`);
      console.log(`  compiled once:            ${r.compiledOnceMsPerInvocation} ms per invocation`);
      console.log(`  compiled every invocation: ${r.compiledPerInvocationMsPerInvocation} ms per invocation`);
      console.log(`  saved: ${r.savedMsPerInvocation} ms per invocation (${r.savedPercent}%); compileQuery alone: ${r.compileQueryMs} ms`);
    }
  }
}
