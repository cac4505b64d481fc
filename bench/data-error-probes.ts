/**
 * How many trigger runs (the failing runs plus the probes, which write nothing) it takes to
 * dead-letter the records of one batch that raise DIVIDE_BY_ZERO: a count, and the time as a
 * ratio to the same batch with every divisor valid (no wall-clock figure on its own).
 *   node --conditions=sluice-source --import tsx bench/data-error-probes.ts <records> <bad records>
 */
import { StreamExecution } from '../lib/runtime/stream-execution.js';
import { defineQuery } from '../lib/query/query-definition.js';
import { col, count, sum } from '../lib/plan/functions.js';
import { MemoryCheckpoint } from '../lib/checkpoint/memory-checkpoint.js';
import { MemoryDeadLetterWriter } from '../lib/sources/dead-letter.js';
import { MemorySink } from '../lib/sinks/memory-sink.js';
import { runShardInvocation } from '../lib/query/shard-invocation.js';
import { compileQuery } from '../lib/query/compiled-query.js';
let runs = 0;
const orig = StreamExecution.prototype.runOneTrigger;
StreamExecution.prototype.runOneTrigger = function (...a: []) { runs++; return orig.apply(this, a); };
const q = compileQuery(defineQuery({ name: 'p', source: { schema: 'k string, amount long, qty long', partitionKey: 'k' },
  transform: (df) => df.groupBy(col('k')).agg(sum(col('amount').divide(col('qty'))).as('u'), count('*').as('n')),
  outputMode: 'update', sink: { kind: 'dynamodb', keyColumns: ['k'] } }), { expectedShardCount: 1 });
const [n, bad] = process.argv.slice(2).map(Number);
const every = bad! > 0 ? Math.floor(n! / bad!) : 0;
const records = (withBad: boolean) => Array.from({ length: n! }, (_, i) => ({ sequenceNumber: String(BigInt(i + 1) * 1000n), partitionKey: 'a',
  dataBase64: Buffer.from(JSON.stringify({ k: 'a', amount: 6, qty: withBad && every > 0 && i % every === 1 ? 0 : 2 })).toString('base64'), approximateArrivalTimestampMs: 0 }));
async function run(withBad: boolean) {
  runs = 0;
  const b = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
  const started = performance.now();
  const r = await runShardInvocation(q, { shardId: 's', records: records(withBad) }, b);
  return { ms: performance.now() - started, runs, letters: b.deadLetters.records.length, error: r.error };
}
/** The median time of five runs (a shared machine's noise is larger than one batch). */
async function median(withBad: boolean) {
  const results = [];
  for (let i = 0; i < 5; i++) results.push(await run(withBad));
  return results.sort((a, b) => a.ms - b.ms)[2]!;
}
// Warm up the compiled query once, so neither side pays for it.
await run(false);
const clean = await median(false);
const dirty = await median(true);
console.log(`records=${n} bad=${dirty.letters} error=${dirty.error?.message.slice(0, 40) ?? 'none'} triggerRuns=${dirty.runs} `
  + `timeRatioToCleanBatch=${(dirty.ms / clean.ms).toFixed(1)} (median of 5)`);
