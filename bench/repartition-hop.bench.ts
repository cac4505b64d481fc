/**
 * What the repartition hop costs: Kinesis records and bytes written to the internal stream per
 * 1,000 input events, for a windowed count by a key the stream is not partitioned by, with the
 * stage-1 batch size and the number of state partitions (internal shards) varied. Records are
 * the billed unit (PUT payload units of 25 KB on provisioned streams), so both are reported.
 * Each shape runs with partial aggregation before the hop (the default: one row per group and
 * batch crosses) and without (every row crosses), and for two key cardinalities: 5,000 users
 * (few repeats per batch) and 3 event types (many).
 *
 *   npm run bench:hop            (or: npx tsx bench/repartition-hop.bench.ts --json)
 */
import { defineQuery } from '../lib/query/query-definition.js';
import { compileQuery } from '../lib/query/compiled-query.js';
import { MemoryCheckpoint } from '../lib/checkpoint/memory-checkpoint.js';
import { col, count, sum, window } from '../lib/plan/functions.js';
import { PARTIAL_AGGREGATION_CONF } from '../lib/query/validate-query.js';
import type { StreamingQueryDefinition } from '../lib/query/query-definition.js';
import { runShardInvocation } from '../lib/query/shard-invocation.js';
import { MemoryDeadLetterWriter } from '../lib/sources/dead-letter.js';
import { RepartitionSink, type RepartitionChannel, type RepartitionRecordOut, type RepartitionTarget } from '../lib/sinks/repartition-sink.js';
import { CostMeter } from '../lib/core/cost-meter.js';

const perUser = defineQuery({
  name: 'hop-bench',
  source: { schema: 'user_id string, event_type string, amount double, ts timestamp' },
  transform: (df) => df.withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '5 minutes'), col('user_id')).agg(count('*').as('events')),
  outputMode: 'update',
  sink: { kind: 'dynamodb' },
});
const perType = defineQuery({
  name: 'hop-bench-type',
  source: { schema: 'user_id string, event_type string, amount double, ts timestamp' },
  transform: (df) => df.withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '5 minutes'), col('event_type'))
    .agg(count('*').as('events'), sum(col('amount')).as('amount')),
  outputMode: 'update',
  sink: { kind: 'dynamodb' },
});
const SHAPES: Record<string, StreamingQueryDefinition> = { perUser, perType };

class CountingChannel implements RepartitionChannel {
  records = 0;
  bytes = 0;
  payloadUnits = 0;
  constructor(private readonly targets: RepartitionTarget[]) {}
  static withShards(k: number): CountingChannel {
    const span = (2n ** 128n) / BigInt(k);
    return new CountingChannel(Array.from({ length: k }, (_, i) => ({
      shardId: `s${i}`, startingHashKey: span * BigInt(i), endingHashKey: i === k - 1 ? 2n ** 128n - 1n : span * BigInt(i + 1) - 1n,
    })));
  }
  async shards(): Promise<readonly RepartitionTarget[]> { return this.targets; }
  async put(records: readonly RepartitionRecordOut[]): Promise<void> {
    for (const r of records) {
      this.records++;
      this.bytes += r.data.length + r.partitionKey.length;
      this.payloadUnits += Math.ceil((r.data.length + r.partitionKey.length) / 25_600);
    }
  }
}

async function measure(
  shape: string, partial: boolean, events: number, batchSize: number, internalShards: number,
): Promise<Record<string, number | string | boolean>> {
  const base = SHAPES[shape]!;
  const query = partial ? base : { ...base, conf: { [PARTIAL_AGGREGATION_CONF]: 'false' } };
  const compiled = compileQuery(query, { allowRepartition: true });
  const channel = CountingChannel.withShards(internalShards);
  const meter = new CostMeter();
  const sink = RepartitionSink.forHop(compiled.hops[0]!, channel, meter);
  const backends = { checkpoint: new MemoryCheckpoint(), sink, deadLetters: new MemoryDeadLetterWriter() };
  let inputBytes = 0;
  for (let start = 0; start < events; start += batchSize) {
    const records = Array.from({ length: Math.min(batchSize, events - start) }, (_, j) => {
      const i = start + j;
      const data = JSON.stringify({ user_id: `u${(i * 7919) % 5000}`, event_type: ['click', 'view', 'buy'][i % 3], amount: (i % 97) / 3, ts: new Date(Date.UTC(2024, 4, 1) + i * 100).toISOString() });
      inputBytes += data.length;
      return { sequenceNumber: String(1_000_000 + i), partitionKey: `p${i % 13}`, dataBase64: Buffer.from(data).toString('base64'), approximateArrivalTimestampMs: 0 };
    });
    const result = await runShardInvocation(compiled, { shardId: 'source-0', records, stage: compiled.sourceStage }, backends);
    if (result.error) throw result.error;
  }
  const per1000 = (n: number): number => Math.round((n * 1000 / events) * 10) / 10;
  return {
    shape, partial, events, batchSize, internalShards,
    recordsPer1000Events: per1000(channel.records),
    bytesPer1000Events: per1000(channel.bytes),
    putPayloadUnitsPer1000Events: per1000(channel.payloadUnits),
    inputBytesPer1000Events: per1000(inputBytes),
    bytesRatioToInput: Math.round((channel.bytes / inputBytes) * 100) / 100,
  };
}

/** The hop's cost for a few batch sizes and internal shard counts. */
export async function measureRepartitionHop(events = Number(process.env.HOP_EVENTS ?? 20_000)): Promise<Record<string, number | string | boolean>[]> {
  const results = [];
  for (const shape of Object.keys(SHAPES)) {
    for (const partial of [false, true]) {
      for (const [batchSize, shards] of [[100, 2], [1000, 2], [1000, 8], [10_000, 8]] as const) {
        results.push(await measure(shape, partial, events, batchSize, shards));
      }
    }
  }
  return results;
}

export function printRepartitionHop(results: readonly Record<string, number | string | boolean>[]): void {
  console.log('Repartition hop cost (stage 1 -> internal stream), per 1,000 input events:');
  console.table(results);
}

// Run directly (npm run bench:hop), not when imported by bench/all.ts.
if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const results = await measureRepartitionHop();
  if (process.argv.includes('--json')) console.log(JSON.stringify(results));
  else printRepartitionHop(results);
}
