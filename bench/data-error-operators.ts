/**
 * Trigger runs (failed runs and probes included) and dead letters for one batch whose records
 * raise DIVIDE_BY_ZERO inside the operators row screening reaches beyond aggregates: a session
 * window's aggregate input, a stream-static join's condition, a stream-stream join's condition on
 * one side. A count, no time. On main before the screen covered them: 64 dead letters, 587 runs,
 * the shard blocked, for each.
 *   node --conditions=sluice-source --import tsx bench/data-error-operators.ts [records]
 */
import { col, count, lit, session_window, sum } from '../lib/plan/functions.js';
import { interval } from '../lib/plan/column.js';
import { defineQuery } from '../lib/query/query-definition.js';
import { SluiceSession } from '../lib/api/session.js';
import type { DataFrame } from '../lib/api/data-frame.js';
import { MemoryCheckpoint } from '../lib/checkpoint/memory-checkpoint.js';
import { MemoryDeadLetterWriter } from '../lib/sources/dead-letter.js';
import { MemorySink } from '../lib/sinks/memory-sink.js';
import { runShardInvocation } from '../lib/query/shard-invocation.js';
import { compileQuery } from '../lib/query/compiled-query.js';
import { StreamExecution } from '../lib/runtime/stream-execution.js';

const SCHEMA = 'k string, amount long, qty long, ts timestamp, code string';
const N = Number(process.argv[2] ?? 420);
const at = (s: number) => new Date(Date.UTC(2024, 4, 1, 12) + s * 1000).toISOString();
const events = Array.from({ length: N }, (_, i) => ({ k: ['a', 'b', 'c'][i % 3], amount: i + 1, qty: i % 4 === 1 ? 0 : 2, ts: at(i * 7), code: String(i) }));
let seq = 1000n;
const records = events.map((e) => ({ sequenceNumber: String(seq++ * 1_000_000n), partitionKey: e.k, dataBase64: Buffer.from(JSON.stringify(e)).toString('base64'), approximateArrivalTimestampMs: 0 }));
const unit = col('amount').divide(col('qty'));
const stores = () => new SluiceSession().createDataFrame([['a', 10], ['b', 20], ['c', 30]], 'sk string, w long');
const shapes: [string, 'append' | 'complete', (df: DataFrame) => DataFrame][] = [
  ['session window, sum(amount/qty)', 'complete', (df) => df.withWatermark('ts', '1 minute').groupBy(session_window(col('ts'), '20 seconds'), col('k')).agg(sum(unit).as('u'), count('*').as('n'))],
  ['stream-static inner join, condition amount/qty > 0', 'append', (df) => df.join(stores(), col('k').eq(col('sk')).and(unit.gt(lit(0))))],
  ['stream-stream self-join, left-only condition', 'append', (df) => df.withWatermark('ts', '1 minute').join(df.select(col('k').as('k2'), col('ts').as('t2')).withWatermark('t2', '1 minute'), col('k').eq(col('k2')).and(unit.gt(lit(0))).and(col('t2').between(col('ts'), col('ts').plus(interval('30 seconds')))))],
];
for (const [name, mode, transform] of shapes) {
  const def = defineQuery({ name: 'm', source: { schema: SCHEMA, partitionKey: 'k' }, transform, outputMode: mode, sink: mode === 'append' ? { kind: 's3-files' } : { kind: 'dynamodb' } });
  const backends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
  const original = StreamExecution.prototype.runOneTrigger;
  let runs = 0;
  StreamExecution.prototype.runOneTrigger = function runCounted(this: StreamExecution) { runs++; return original.call(this); };
  const r = await runShardInvocation(compileQuery(def, { expectedShardCount: 1 }), { shardId: 's', records }, backends);
  StreamExecution.prototype.runOneTrigger = original;
  console.log(`${name}: ${N} records, ${events.filter((e) => e.qty === 0).length} zero divisors -> ${backends.deadLetters.records.length} dead letters, ${runs} trigger runs, ${r.error ? 'FAILED (shard blocked)' : 'committed'}`);
}
