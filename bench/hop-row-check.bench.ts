/**
 * What the repartition hop's record-size check (RepartitionSink.rowLimits: a row over one record of
 * the internal stream is refused before anything is sent) costs stage 1: the same invocations with
 * the check and without it (the hop as it was before the check), every row crossing (partial
 * aggregation off, the worst case), rows with a 200-character note. Ratios of wall time, the runs
 * interleaved so the machine's load hits both alike.
 *
 *   node --max-semi-space-size=64 --conditions=sluice-source --import tsx bench/hop-row-check.bench.ts
 */
import { defineQuery } from '../lib/query/query-definition.js';
import { compileQuery } from '../lib/query/compiled-query.js';
import { MemoryCheckpoint } from '../lib/checkpoint/memory-checkpoint.js';
import { col, count, max, window } from '../lib/plan/functions.js';
import { PARTIAL_AGGREGATION_CONF } from '../lib/query/validate-query.js';
import { runShardInvocation } from '../lib/query/shard-invocation.js';
import { MemoryDeadLetterWriter } from '../lib/sources/dead-letter.js';
import { RepartitionSink, type RepartitionChannel, type RepartitionRecordOut, type RepartitionTarget } from '../lib/sinks/repartition-sink.js';
import type { ShardRecord } from '../lib/sources/kinesis-shard-source.js';

const query = compileQuery(defineQuery({
  name: 'hop-check-bench',
  source: { schema: 'user_id string, note string, amount double, ts timestamp' },
  transform: (df) => df.withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '5 minutes'), col('user_id'))
    .agg(count('*').as('events'), max(col('note')).as('note')),
  outputMode: 'update',
  sink: { kind: 'dynamodb' },
  conf: { [PARTIAL_AGGREGATION_CONF]: 'false' },
}), { allowRepartition: true });

const targets: RepartitionTarget[] = Array.from({ length: 4 }, (_, i) => ({
  shardId: `s${i}`, startingHashKey: ((2n ** 128n) / 4n) * BigInt(i), endingHashKey: i === 3 ? 2n ** 128n - 1n : ((2n ** 128n) / 4n) * BigInt(i + 1) - 1n,
}));
const channel: RepartitionChannel = { shards: async () => targets, put: async (_records: readonly RepartitionRecordOut[]) => undefined };

const BATCH = Number(process.env.HOP_CHECK_BATCH ?? 1000);
const BATCHES = Number(process.env.HOP_CHECK_BATCHES ?? 20);
const note = 'x'.repeat(150) + 'é'.repeat(50);
const batches: ShardRecord[][] = Array.from({ length: BATCHES }, (_, b) => Array.from({ length: BATCH }, (_, j) => {
  const i = b * BATCH + j;
  const data = JSON.stringify({ user_id: `u${(i * 7919) % 5000}`, note: `${i}${note}`, amount: (i % 97) / 3, ts: new Date(Date.UTC(2024, 4, 1) + i * 100).toISOString() });
  return { sequenceNumber: String(1_000_000 + i), partitionKey: `p${i % 13}`, dataBase64: Buffer.from(data).toString('base64'), approximateArrivalTimestampMs: 0 };
}));

/** Wall time of all batches through stage 1, with or without the hop's row check. */
async function run(checked: boolean): Promise<number> {
  const sink = RepartitionSink.forHop(query.hops[0]!, channel);
  const backends = {
    checkpoint: new MemoryCheckpoint(), sink, deadLetters: new MemoryDeadLetterWriter(),
    ...(checked ? {} : { sinkRowLimits: { rowKey: () => '', check: () => null } }),
  };
  const t0 = performance.now();
  for (const records of batches) {
    const result = await runShardInvocation(query, { shardId: 'source-0', records, stage: query.sourceStage }, backends);
    if (result.error) throw result.error;
  }
  return performance.now() - t0;
}

async function main(): Promise<void> {
  await run(true);
  await run(false);
  const times = { checked: [] as number[], unchecked: [] as number[] };
  for (let round = 0; round < Number(process.env.HOP_CHECK_ROUNDS ?? 5); round++) {
    times.checked.push(await run(true));
    times.unchecked.push(await run(false));
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  // The check alone, on rows shaped as the stage's output (window, user, count, note), for scale.
  const sink = RepartitionSink.forHop(query.hops[0]!, channel);
  const rows = Array.from({ length: BATCH * BATCHES }, (_, i) => [{ start: 1714521600000000 + i, end: 1714521900000000 + i }, `u${i % 5000}`, 1, `${i}${note}`]);
  const checkTimes: number[] = [];
  for (let round = 0; round < 5; round++) {
    const t0 = performance.now();
    for (let i = 0; i < rows.length; i++) sink.rowLimits.check({ rows } as never, i);
    checkTimes.push(performance.now() - t0);
  }
  const ratio = median(times.checked) / median(times.unchecked);
  console.log(JSON.stringify({ rows: BATCH * BATCHES, checkedMs: Math.round(median(times.checked)), uncheckedMs: Math.round(median(times.unchecked)), checkAloneMs: Math.round(median(checkTimes)) }));
  console.log(`hop-row-check: the check alone / stage 1 without it: ${(median(checkTimes) / median(times.unchecked)).toFixed(3)}`);
  console.log(`hop-row-check: stage 1 with the hop's row check / without: ${ratio.toFixed(3)} (median of ${times.checked.length} interleaved rounds)`);
}

main().catch((error: unknown) => { console.error(error); process.exit(1); });
