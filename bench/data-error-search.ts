/**
 * Invocations and trigger runs (failed runs and probes included) until a batch commits when N of
 * its records overflow a long sum, each only with the records before it (the per-record screen
 * cannot find them: a search does, one at a time). Per key: +2^62, +2^62, -(2^62 - 1), ...; 3N
 * records over 3 keys, one batch. Lambda's retries are simulated: each invocation gets the records
 * from the first uncommitted one, with a deadline
 *   - none: one invocation;
 *   - `runs=R`: a context whose remaining time lasts R looks (one per run of the batch): a count;
 *   - `ms=T`: a context with T ms left plus the 2 s reserve, on the real clock (varies with load).
 * Counts only, no time; at most 50 invocations (a shard still blocked after them says so).
 *   node --conditions=sluice-source --import tsx bench/data-error-search.ts [N=150] [runs=200] [ms=500]
 */
import { col, count, sum } from '../lib/plan/functions.js';
import { defineQuery } from '../lib/query/query-definition.js';
import { MemoryCheckpoint } from '../lib/checkpoint/memory-checkpoint.js';
import { MemoryDeadLetterWriter, type DeadLetterRecord } from '../lib/sources/dead-letter.js';
import { MemorySink } from '../lib/sinks/memory-sink.js';
import { runShardInvocation } from '../lib/query/shard-invocation.js';
import { compileQuery } from '../lib/query/compiled-query.js';
import { StreamExecution } from '../lib/runtime/stream-execution.js';
import type { InvocationLimits } from '../lib/query/invocation-limits.js';

const args = process.argv.slice(2);
const n = Number(args.find((a) => /^\d+$/.test(a)) ?? 150);
const deadlines = args.filter((a) => /^(runs|ms)=\d+$/.test(a));
const MAX_INVOCATIONS = 50;

let runs = 0;
const original = StreamExecution.prototype.runOneTrigger;
StreamExecution.prototype.runOneTrigger = function runCounted(this: StreamExecution) { runs++; return original.call(this); };

const query = compileQuery(defineQuery({
  name: 'overflows', source: { schema: 'k string, amount long', partitionKey: 'k' },
  transform: (df) => df.groupBy(col('k')).agg(sum(col('amount')).as('total'), count('*').as('n')),
  outputMode: 'update', sink: { kind: 'dynamodb', keyColumns: ['k'] },
}), { expectedShardCount: 1 });
const B = 2n ** 62n;
const amounts = [B, B, -(B - 1n)];
const keys = ['a', 'b', 'c'];
const records = Array.from({ length: 3 * n }, (_, i) => {
  const k = keys[Math.floor(i / 3) % 3]!;
  return {
    sequenceNumber: String(BigInt(i + 1) * 1000n), partitionKey: k, approximateArrivalTimestampMs: 0,
    dataBase64: Buffer.from(`{"k":"${k}","amount":${amounts[i % 3]}}`).toString('base64'),
  };
});

class CountingDeadLetters extends MemoryDeadLetterWriter {
  maxWritesOfOne = 0;
  private readonly writes = new Map<string, number>();
  override async write(letters: readonly DeadLetterRecord[]): Promise<void> {
    for (const l of letters) {
      const w = (this.writes.get(l.sequenceNumber) ?? 0) + 1;
      this.writes.set(l.sequenceNumber, w);
      this.maxWritesOfOne = Math.max(this.maxWritesOfOne, w);
    }
    await super.write(letters);
  }
}

function limitsOf(deadline: string | undefined): () => InvocationLimits {
  if (!deadline) return () => ({});
  const [kind, value] = deadline.split('=') as ['runs' | 'ms', string];
  if (kind === 'runs') {
    return () => {
      let looks = Number(value);
      return { remainingTimeMs: () => (looks-- > 0 ? 600_000 : 0) };
    };
  }
  return () => {
    const end = Date.now() + 2_000 + Number(value);
    return { remainingTimeMs: () => end - Date.now() };
  };
}

async function scenario(deadline: string | undefined): Promise<void> {
  runs = 0;
  const backends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new CountingDeadLetters() };
  const limits = limitsOf(deadline);
  let from = 0;
  let invocations = 0;
  let errors = 0;
  while (from < records.length && invocations < MAX_INVOCATIONS) {
    invocations++;
    const r = await runShardInvocation(query, { shardId: 's', records: records.slice(from), limits: limits() }, backends);
    if (r.error) errors++;
    const next = r.firstUncommittedSequenceNumber;
    from = next === null ? records.length : records.findIndex((x) => x.sequenceNumber === next);
  }
  const committed = from >= records.length;
  console.log(`culprits=${n} records=${records.length} deadline=${deadline ?? 'none'}: invocations=${invocations} failedInvocations=${errors} `
    + `triggerRuns=${runs} deadLetters=${backends.deadLetters.records.length} maxDeadLetterWritesOfOneRecord=${backends.deadLetters.maxWritesOfOne} `
    + `${committed ? 'committed' : `NOT committed after ${MAX_INVOCATIONS} invocations (shard blocked)`}`);
}

for (const deadline of [undefined, ...deadlines]) await scenario(deadline);
