/**
 * The repartition stage on memory backends: stage 1 on every source shard routes rows by state key
 * through an in-memory "internal stream"; stage 2 on its shards keeps the state. Whatever the
 * number of shards and however the records are duplicated, the answer is the in-memory engine's.
 */
import { describe, expect, it } from 'vitest';
import { defineQuery, type StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { SluiceSession } from '../../lib/api/session.js';
import type { DataFrame } from '../../lib/api/data-frame.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { col, count, sum, window, window_time } from '../../lib/plan/functions.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { RepartitionSink, type RepartitionChannel, type RepartitionRecordOut, type RepartitionTarget } from '../../lib/sinks/repartition-sink.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { compileForDeployment, compileQuery } from '../../lib/query/compiled-query.js';
import { streamNameOfArn } from '../../lib/aws/kinesis-trigger-handler.js';
import { explainQuery, PARTIAL_AGGREGATION_CONF, validateQuery } from '../../lib/query/validate-query.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import { parseTimestamp } from '../../lib/core/timestamps.js';
import type { OutputMode } from '../../lib/core/output-mode.js';

const SCHEMA = 'user_id string, event_type string, ts timestamp';
interface Event { user_id: string; event_type: string; ts: string }

/** A seeded PRNG so every run is reproducible. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => { s = (s * 1664525 + 1013904223) >>> 0; return s / 2 ** 32; };
}

function events(n: number, seed: number): Event[] {
  const rand = prng(seed);
  const types = ['click', 'view', 'buy'];
  return Array.from({ length: n }, (_, i) => ({
    user_id: `u${Math.floor(rand() * 12)}`,
    event_type: types[Math.floor(rand() * types.length)]!,
    ts: new Date(Date.UTC(2024, 4, 1, 14, 0) + i * 20_000).toISOString(),
  }));
}

/** The internal stream: shards with hash ranges and ordered records; may deliver duplicates. */
class MemoryStream implements RepartitionChannel {
  readonly records = new Map<string, ShardRecord[]>();
  private seq = 1n;
  constructor(private readonly targets: RepartitionTarget[], private readonly duplicateEvery = 0) {
    for (const t of targets) this.records.set(t.shardId, []);
  }
  static withShards(k: number, duplicateEvery = 0): MemoryStream {
    const span = (2n ** 128n) / BigInt(k);
    return new MemoryStream(Array.from({ length: k }, (_, i) => ({
      shardId: `internal-${i}`, startingHashKey: span * BigInt(i), endingHashKey: i === k - 1 ? 2n ** 128n - 1n : span * BigInt(i + 1) - 1n,
    })), duplicateEvery);
  }
  async shards(): Promise<readonly RepartitionTarget[]> { return this.targets; }
  async put(records: readonly RepartitionRecordOut[]): Promise<void> {
    let n = 0;
    for (const r of records) {
      const hash = BigInt(r.explicitHashKey);
      const target = this.targets.find((t) => hash >= t.startingHashKey && hash <= t.endingHashKey)!;
      const copies = this.duplicateEvery > 0 && ++n % this.duplicateEvery === 0 ? 2 : 1;
      for (let c = 0; c < copies; c++) {
        this.records.get(target.shardId)!.push({
          sequenceNumber: String(this.seq++), partitionKey: r.partitionKey, dataBase64: Buffer.from(r.data).toString('base64'), approximateArrivalTimestampMs: 0,
        });
      }
    }
  }
}

function definition(name: string, outputMode: OutputMode, transform: (df: DataFrame) => DataFrame): StreamingQueryDefinition {
  return defineQuery({ name, source: { schema: SCHEMA }, transform, outputMode, sink: { kind: 'dynamodb' } });
}

const queries = {
  windowedCountByUser: (mode: OutputMode) => definition(`windowed-${mode}`, mode, (df) => df
    .withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '30 minutes'), col('user_id')).agg(count('*').as('events'))),
  countByType: () => definition('by-type', 'update', (df) => df.groupBy(col('event_type')).agg(count('*').as('events'))),
  dedupByUser: () => definition('dedup', 'append', (df) => df.dropDuplicates(['user_id']).select('user_id')),
  /** Spark's chained stateful operators: a dedup within the watermark, then a windowed count. */
  dedupThenWindowedCount: (mode: OutputMode) => definition(`dedup-then-count-${mode}`, mode, (df) => df
    .withWatermark('ts', '10 minutes').dropDuplicatesWithinWatermark(['user_id', 'ts'])
    .groupBy(window(col('ts'), '30 minutes'), col('event_type')).agg(count('*').as('events'))),
  /** Dedup by (user, type), then a count per (user, type): co-partitioned, one stateful stage with both. */
  dedupThenCountPerUser: () => definition('dedup-then-per-user', 'update', (df) => df.dropDuplicates(['user_id', 'event_type'])
    .groupBy(col('user_id'), col('event_type')).agg(count('*').as('events'))),
  /** Aggregate → aggregate (append): per-user counts per 5 minutes, then per 20 minutes over all users. */
  windowedCountThenHourly: () => definition('count-then-coarser', 'append', (df) => df
    .withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '5 minutes'), col('user_id')).agg(count('*').as('events'))
    .groupBy(window(window_time(col('window')), '20 minutes')).agg(count('*').as('users'), sum(col('events')).as('events'))),
};

/**
 * Runs a query in its stages over `sourceShards` shards (each hop with `stateShards` shards) and
 * returns the final result rows.
 */
async function runRepartitioned(
  def: StreamingQueryDefinition, all: Event[], sourceShards: number, stateShards: number, duplicateEvery = 0, sourcesGoIdle = true,
  /** Receives the rows that crossed the first hop. */
  crossed?: { rows: number },
): Promise<string[]> {
  const query = compileQuery(def, { allowRepartition: true });
  const hops = query.hops.map((hop) => {
    const stream = MemoryStream.withShards(stateShards, duplicateEvery);
    const sink = RepartitionSink.forHop(hop, stream);
    return { stream, sink };
  });
  const rand = prng(sourceShards * 7 + stateShards);
  const bySource = Array.from({ length: sourceShards }, () => [] as ShardRecord[]);
  all.forEach((e, i) => bySource[Math.floor(rand() * sourceShards)]!.push({
    sequenceNumber: String(1000 + i), partitionKey: String(rand()), dataBase64: Buffer.from(JSON.stringify(e)).toString('base64'), approximateArrivalTimestampMs: 0,
  }));
  const stage1 = bySource.map(() => ({ checkpoint: new MemoryCheckpoint(), sink: hops[0]!.sink, deadLetters: new MemoryDeadLetterWriter() }));
  const finalSinks: MemorySink[] = [];
  // Stage k + 1 reads hop k; its senders are the source shards (k = 0) or hop k - 1's shards.
  const later = query.stages.slice(1).map((stage, k) => {
    const senders = k === 0 ? bySource.map((_, i) => `source-${i}`) : [...hops[k - 1]!.stream.records.keys()];
    const sourcePartitions = async (): Promise<string[]> => senders;
    const input = hops[k]!.stream;
    const backends = [...input.records.keys()].map(() => {
      const sink = hops[k + 1]?.sink ?? new MemorySink();
      if (sink instanceof MemorySink) finalSinks.push(sink);
      return { checkpoint: new MemoryCheckpoint(), sink, deadLetters: new MemoryDeadLetterWriter(), sourcePartitions };
    });
    return { stage, input, backends, consumed: new Map<string, number>() };
  });
  const runLater = async (scheduled = false): Promise<void> => {
    for (const { stage, input, backends, consumed } of later) {
      for (const [i, shardId] of [...input.records.keys()].entries()) {
        const records = input.records.get(shardId)!;
        const from = consumed.get(shardId) ?? 0;
        // Deliver in small slices, as an event source mapping would.
        for (let at = from; at < records.length || (scheduled && at === from); at += 3) {
          const r = await runShardInvocation(query, { shardId, records: records.slice(at, at + 3), stage, scheduled }, backends[i]!);
          expect(r.error).toBeUndefined();
          if (at >= records.length) break;
        }
        consumed.set(shardId, records.length);
      }
    }
  };
  // Interleave: a slice of every source shard, then the later stages catch up.
  for (let at = 0; bySource.some((s) => at < s.length); at += 5) {
    for (const [i, records] of bySource.entries()) {
      if (at >= records.length) continue;
      const r = await runShardInvocation(query, { shardId: `source-${i}`, records: records.slice(at, at + 5), stage: query.sourceStage }, stage1[i]!);
      expect(r.error).toBeUndefined();
    }
    await runLater();
  }
  // The sources go quiet: each is confirmed idle, then a scheduled tick closes what it can.
  for (const [i] of sourcesGoIdle ? bySource.entries() : []) {
    const last = await stage1[i]!.checkpoint.commitLog.getLatest();
    await hops[0]!.sink.broadcastIdle(`source-${i}`, last?.[0] ?? 0);
  }
  await runLater();
  await runLater(true);
  if (crossed) {
    crossed.rows = [...hops[0]!.stream.records.values()].flat()
      .reduce((n, r) => n + (JSON.parse(Buffer.from(r.dataBase64, 'base64').toString()) as { rows: unknown[] }).rows.length, 0);
  }
  return finalAnswer(def, finalSinks, query.schema);
}

function finalAnswer(def: StreamingQueryDefinition, sinks: MemorySink[], schema: { name: string; type: never }[] | readonly { name: string; type: unknown }[]): string[] {
  const rows = sinks.flatMap((s) => s.allRows());
  const external = rows.map((r) => JSON.stringify(toExternalRow(r, schema as never)));
  if (def.outputMode === 'update') {
    // Upsert semantics: the last value per key (all columns but the last are the key here).
    const latest = new Map<string, string>();
    for (const r of sinks.flatMap((s) => s.allRows())) latest.set(JSON.stringify(r.slice(0, -1)), JSON.stringify(toExternalRow(r, schema as never)));
    return [...latest.values()].sort();
  }
  return external.sort();
}

async function inMemory(def: StreamingQueryDefinition, all: Event[]): Promise<string[]> {
  const session = new SluiceSession();
  const { stream, df } = session.memoryStream(SCHEMA);
  const result = def.transform(df, session);
  const sink = new MemorySink();
  const q = await result.writeStream.outputMode(def.outputMode).sink(sink).start();
  stream.addData(all.map((e) => [e.user_id, e.event_type, parseTimestamp(e.ts)]));
  await q.processAllAvailable();
  await q.stop();
  const schema = result.plan.output.map((a) => ({ name: a.name, type: a.type }));
  return finalAnswer(def, [sink], schema);
}

describe('repartition stage (memory backends)', () => {
  const all = events(150, 42);

  it('splits the plan below the watermark and routes by the non-window grouping key', () => {
    const split = validateQuery(queries.windowedCountByUser('append'), { allowRepartition: true }).repartition!.hops[0]!;
    expect(split.routingColumns).toEqual(['user_id']);
    expect(split.output.map((a) => a.name)).toEqual(['user_id', 'event_type', 'ts']);
    expect(split.eventTime).toEqual({ ordinal: 2, delayMs: 600_000 });
  });

  for (const [name, make] of [
    ['global count by event_type (update)', queries.countByType],
    ['dedup by user_id (append)', queries.dedupByUser],
    ['windowed count by user_id (update)', () => queries.windowedCountByUser('update')],
  ] as const) {
    it(`${name}: same answer on 1, 2 and 4 shards as in memory`, async () => {
      const def = make();
      const expected = await inMemory(def, all);
      expect(expected.length).toBeGreaterThan(0);
      for (const shards of [1, 2, 4]) {
        expect(await runRepartitioned(def, all, shards, Math.max(1, shards - 1))).toEqual(expected);
      }
    });
  }

  it('windowed count in append mode: every window once, none lost, after the sources go idle', async () => {
    const def = queries.windowedCountByUser('append');
    // In memory, the last windows never close (the watermark stops with the data); compare what closed.
    const closedInMemory = await inMemory(def, all);
    for (const shards of [1, 2, 4]) {
      const rows = await runRepartitioned(def, all, shards, shards);
      expect(rows).toEqual(closedInMemory);
    }
  });

  it('explain shows the stage boundary and the routing key', () => {
    const text = explainQuery(queries.windowedCountByUser('update'), { allowRepartition: true });
    expect(text).toMatch(/Stage 1 \(each source shard\).*routed by \[user_id\]/);
    expect(text).toMatch(/---- repartition boundary/);
    expect(text).toMatch(/Stage 2 .*Aggregate by \[window, user_id\], output mode update/);
    expect(explainQuery(queries.countByType(), { expectedShardCount: 1 })).toMatch(/one stage/);
  });

  it('plans one hop per stateful operator not co-partitioned with its input', () => {
    const dedupThenCount = compileQuery(queries.dedupThenWindowedCount('append'), { allowRepartition: true });
    expect(dedupThenCount.hops.map((h) => [h.operator.kind, h.routingColumns, h.carries])).toEqual([
      ['Deduplicate', ['user_id', 'ts'], 'max-event-time'],
      ['Aggregate', ['event_type'], 'watermark'],
    ]);
    expect(dedupThenCount.stages.map((s) => `${s.kind}:${s.writes}:${s.outputMode}`)).toEqual(['source:internal-stream:append', 'state:internal-stream:append', 'state:sink:append']);
    const chained = compileQuery(queries.windowedCountThenHourly(), { allowRepartition: true });
    // The hourly window is computed: not routable, so the second hop is one partition.
    expect(chained.hops.map((h) => h.routingColumns)).toEqual([['user_id'], []]);
    // A second operator whose keys include every routing column of its stage's input stays in that stage...
    const sameKey = compileQuery(queries.dedupThenCountPerUser(), { allowRepartition: true });
    expect(sameKey.hops.length).toBe(1);
    expect(sameKey.stages.map((s) => s.writes)).toEqual(['internal-stream', 'sink']);
    // ...one keyed by only part of them does not (rows of one user sit in several partitions).
    const partKey = compileQuery(definition('part-key', 'update', (df) => df.dropDuplicates(['user_id', 'event_type'])
      .groupBy(col('user_id')).agg(count('*').as('types'))), { allowRepartition: true });
    expect(partKey.hops.map((h) => h.routingColumns)).toEqual([['user_id', 'event_type'], ['user_id']]);
  });

  for (const [name, make] of [
    ['dedup within watermark → windowed count (append)', () => queries.dedupThenWindowedCount('append')],
    ['dedup within watermark → windowed count (update)', () => queries.dedupThenWindowedCount('update')],
    ['windowed count → hourly count and sum (append)', queries.windowedCountThenHourly],
    ['dedup → count by the same key, one stage (update)', queries.dedupThenCountPerUser],
  ] as const) {
    it(`chained stateful operators, ${name}: same answer on 1, 2 and 4 shards as in memory`, async () => {
      const def = make();
      // Every fourth event sent twice (a producer retry): the dedup has something to drop.
      const withRetries = all.flatMap((e, i) => (i % 4 === 0 ? [e, e] : [e]));
      const expected = await inMemory(def, withRetries);
      expect(expected.length).toBeGreaterThan(0);
      for (const shards of [1, 2, 4]) {
        expect({ shards, rows: await runRepartitioned(def, withRetries, shards, Math.max(1, shards - 1), shards === 4 ? 3 : 0) }).toEqual({ shards, rows: expected });
      }
    });
  }

  it('a stage that never evicts still forwards its watermark: the next stage closes its windows as in memory', async () => {
    // dropDuplicates without the event-time column keeps its state forever; the watermark that moves
    // after the last data batch reaches the aggregate by the dedup's no-data batch (Spark runs one
    // whenever the watermark advances), carried on the hop. One live source shard, never idle:
    // its watermark is exactly Spark's.
    const def = definition('dedup-forever-then-count', 'append', (df) => df.withWatermark('ts', '10 minutes')
      .dropDuplicates(['user_id']).groupBy(window(col('ts'), '10 minutes'), col('event_type')).agg(count('*').as('events')));
    // The last event jumps an hour ahead: only the batch after it knows the watermark that closes the rest.
    const unique = [...all, { ...all[all.length - 1]!, ts: '2024-05-01T16:00:00.000Z' }].map((e, i) => ({ ...e, user_id: `order-${i}` }));
    const withRetries = unique.flatMap((e, i) => (i % 3 === 0 ? [e, e] : [e]));
    const expected = await inMemory(def, withRetries);
    expect(expected.length).toBeGreaterThan(0);
    expect(await runRepartitioned(def, withRetries, 1, 2, 0, false)).toEqual(expected);
    expect(await runRepartitioned(def, withRetries, 3, 2)).toEqual(expected);
  });

  it('partial aggregation before the hop: the answer of shipping every row, late rows dropped alike, far fewer rows across', async () => {
    for (const def of [queries.windowedCountByUser('append'), queries.windowedCountByUser('update'), queries.countByType()]) {
      expect(compileQuery(def, { allowRepartition: true }).hops[0]!.partial).not.toBeNull();
      const rowsAcross = { ...def, conf: { [PARTIAL_AGGREGATION_CONF]: 'false' } };
      expect(compileQuery(rowsAcross, { allowRepartition: true }).hops[0]!.partial).toBeNull();
      // Events an hour and more behind, at the end of the input: behind every partition's watermark.
      const late = all.slice(0, 20).map((e) => ({ ...e, ts: new Date(Date.parse(e.ts) - 3_600_000).toISOString() }));
      const input = [...all, ...late];
      for (const shards of [1, 3]) {
        const partial = { rows: 0 };
        const rows = { rows: 0 };
        const withPartial = await runRepartitioned(def, input, shards, 2, 0, true, partial);
        expect(withPartial).toEqual(await runRepartitioned(rowsAcross, input, shards, 2, 0, true, rows));
        expect(rows.rows).toBe(input.length);
        // Stage-1 batches here are 5 records: few repeat a (window, user) group, so those batches ship
        // their rows (turned into partial aggregates by the receiver); three event types always repeat.
        if (def.name === 'by-type') expect(partial.rows).toBeLessThan(rows.rows * 0.8);
        else expect(partial.rows).toBe(rows.rows);
      }
    }
    // Where the watermark cannot have moved (one batch), nothing is late: the in-memory answer.
    expect(await runRepartitioned(queries.countByType(), all, 2, 2)).toEqual(await inMemory(queries.countByType(), all));
  });

  it('a plan that cannot be staged is refused naming the operator and the fix; a deployment short of internal streams at cold start', () => {
    const watermarkAbove = definition('wm-above', 'append', (df) => df.dropDuplicates(['user_id'])
      .withWatermark('ts', '10 minutes').groupBy(window(col('ts'), '30 minutes')).agg(count('*').as('n')));
    expect(() => compileQuery(watermarkAbove, { allowRepartition: true }))
      .toThrow(/cannot be split into repartition stages: its watermark is declared above the first stateful operator \(Deduplicate\)/);
    const selfJoin = definition('self-join', 'append', (df) => df.filter(col('event_type').eq('buy'))
      .join(df.filter(col('event_type').eq('view')).select(col('user_id').alias('viewer')), col('user_id').eq(col('viewer'))));
    expect(() => explainQuery(selfJoin, { allowRepartition: true })).toThrow(/stream 'kinesis' is read twice \(a self-join\)/);
    const chained = queries.dedupThenWindowedCount('append');
    expect(() => compileForDeployment(chained, { repartitionStreamName: 'only-one' }))
      .toThrow(/needs 2 internal streams .* but the deployment has 1: Aggregate by \[window, event_type\] has no stream to read/);
    expect(compileForDeployment(chained, { repartitionStreamName: 'a', repartitionStreamNames: ['a', 'b'] }).stages.length).toBe(3);
    expect(streamNameOfArn('arn:aws:kinesis:eu-west-1:123456789012:stream/sluice-repartition-2')).toBe('sluice-repartition-2');
  });

  it('explain shows every stage and hop of a chained query', () => {
    const text = explainQuery(queries.windowedCountThenHourly(), { allowRepartition: true });
    expect(text).toMatch(/Stage 2 \(each shard of internal stream 1 = a state partition\): Aggregate by \[window, user_id\], rows routed by nothing \(every row to one partition\) to internal stream 2/);
    expect(text).toMatch(/---- repartition boundary 2: .*stage 2's output watermark travels with its rows/);
    expect(text).toMatch(/Stage 3 .*: Aggregate by \[window\], output mode append, sink dynamodb/);
  });

  it('duplicated internal records (PutRecords retries) are applied once', async () => {
    const def = queries.countByType();
    expect(await runRepartitioned(def, all, 3, 2, 2)).toEqual(await inMemory(def, all));
  });
});
