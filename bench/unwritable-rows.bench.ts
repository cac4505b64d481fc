/**
 * What finding the records behind a refused result row costs: one batch of N records through the
 * shard invocation (memory backends), with 0, 1 or 5 groups whose row the sink refuses. Prints the
 * wall time and how many runs reached the guarded sink (the committed batches plus the probes).
 *
 *   node --conditions=sluice-source --import tsx bench/unwritable-rows.bench.ts
 */
import { defineQuery } from '../lib/query/query-definition.js';
import { MemoryCheckpoint } from '../lib/checkpoint/memory-checkpoint.js';
import { col, collect_list, count, window } from '../lib/plan/functions.js';
import { MemoryDeadLetterWriter } from '../lib/sources/dead-letter.js';
import { MemorySink } from '../lib/sinks/memory-sink.js';
import type { SinkBatch, SinkRowLimits } from '../lib/sinks/sink.js';
import { runShardInvocation } from '../lib/query/shard-invocation.js';
import { GuardedSink } from '../lib/query/unwritable-rows.js';
import { compileQuery } from '../lib/query/compiled-query.js';

/** Refuses a row whose notes print longer than 500 characters. */
class LimitedSink extends MemorySink {
  readonly rowLimits: SinkRowLimits = {
    rowKey: (b, i) => JSON.stringify(b.rows[i]!.slice(0, 2)),
    check: (b, i) => (JSON.stringify(b.rows[i]![2]).length > 500 ? { code: 'SINK_ITEM_TOO_LARGE', reason: 'over 500 characters' } : null),
  };
}

const query = compileQuery(defineQuery({
  name: 'probe-bench',
  source: { schema: 'k string, note string, ts timestamp' },
  transform: (e) => e.withWatermark('ts', '1 hour').groupBy(window(col('ts'), '1 hour'), col('k')).agg(collect_list('note').as('notes'), count('*').as('n')),
  outputMode: 'update',
  sink: { kind: 'dynamodb' },
}), { expectedShardCount: 1 });

let guardedRuns = 0;
const addBatch = GuardedSink.prototype.addBatch;
GuardedSink.prototype.addBatch = function (this: GuardedSink, b: SinkBatch) { guardedRuns++; return addBatch.call(this, b); };

for (const [records, refused] of [[1000, 0], [1000, 0], [1000, 1], [1000, 5], [10_000, 0], [10_000, 1]] as const) {
  let seq = 1n;
  const batch = Array.from({ length: records }, (_, i) => ({
    sequenceNumber: String(seq++ * 1000n), partitionKey: 'p', approximateArrivalTimestampMs: 0,
    dataBase64: Buffer.from(JSON.stringify({
      k: i < refused ? `big${i}` : `k${i % 200}`, note: i < refused ? 'x'.repeat(600) : 'n', ts: '2024-05-01T14:10:00Z',
    })).toString('base64'),
  }));
  const deadLetters = new MemoryDeadLetterWriter();
  guardedRuns = 0;
  const started = performance.now();
  const result = await runShardInvocation(query, { shardId: 's', records: batch }, { checkpoint: new MemoryCheckpoint(), sink: new LimitedSink(), deadLetters });
  console.log(`records=${records} refusedGroups=${refused} ms=${(performance.now() - started).toFixed(0)} `
    + `guardedRuns=${guardedRuns} deadLetters=${deadLetters.records.length} error=${result.error?.message ?? 'none'}`);
}
