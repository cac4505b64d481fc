/**
 * Runs a multi-source query through its stages on memory backends: each source stream split over
 * `shards` shards (random partition keys), stage 2 (the join, or the operator over the streams)
 * on `stateShards` internal shards, and each later stage (join → aggregate) on the shards of the
 * hop before it. Returns the final sink's rows as canonical text, sorted.
 */
import { expect } from 'vitest';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { RepartitionSink } from '../../lib/sinks/repartition-sink.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { toExternalRow } from '../../lib/sinks/external-row.js';
import type { MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import type { StreamingQueryProgress } from '../../lib/runtime/progress.js';
import { canonicalRow, prng } from './join-queries.js';
import { MemoryInternalStream } from './memory-internal-stream.js';

export interface HopRun {
  readonly rows: string[];
  /** Every batch's progress, by stage index (1: stage 2, …). */
  readonly progress: Map<number, StreamingQueryProgress[]>;
}

export async function runThroughHop(
  def: MultiSourceQueryDefinition, events: Record<string, readonly object[]>, shards: number, stateShards: number, duplicateEvery = 0,
): Promise<string[]> {
  return (await runThroughHops(def, events, shards, stateShards, duplicateEvery)).rows;
}

export async function runThroughHops(
  def: MultiSourceQueryDefinition, events: Record<string, readonly object[]>, shards: number, stateShards: number, duplicateEvery = 0,
): Promise<HopRun> {
  const query = compileQuery(def, { allowRepartition: true });
  const internals = query.hops.map(() => MemoryInternalStream.withShards(stateShards, duplicateEvery));
  const rand = prng(shards * 31 + stateShards);
  const streams = Object.entries(events).map(([name, rows]) => {
    const stage = query.sourceStageOf(name);
    const sink = RepartitionSink.forHop(stage.outputHop!, internals[0]!, undefined, stage.hopInput);
    const byShard = Array.from({ length: shards }, () => [] as ShardRecord[]);
    rows.forEach((e, i) => byShard[Math.floor(rand() * shards)]!.push({
      sequenceNumber: String(1000 + i), partitionKey: String(rand()), dataBase64: Buffer.from(JSON.stringify(e)).toString('base64'), approximateArrivalTimestampMs: 0,
    }));
    const backends = byShard.map(() => ({ checkpoint: new MemoryCheckpoint(), sink, deadLetters: new MemoryDeadLetterWriter() }));
    return { name, stage, sink, byShard, backends };
  });
  const finalSinks: MemorySink[] = [];
  const progress = new Map<number, StreamingQueryProgress[]>();
  // Stage k + 1 reads hop k: its senders are the source streams' shards (k = 0) or hop k - 1's shards.
  const later = query.stages.filter((s) => s.reads === 'internal-stream').map((stage) => {
    const k = stage.inputHop!.index;
    const input = internals[k]!;
    const senders = k === 0 ? null : [...internals[k - 1]!.records.keys()];
    const sourcePartitions = async (name?: string): Promise<string[]> => (senders
      ?? Array.from({ length: shards }, (_, i) => `shard-${i}`).filter(() => name !== undefined));
    const out = stage.outputHop ? RepartitionSink.forHop(stage.outputHop, internals[stage.outputHop.index]!) : null;
    const backends = [...input.records.keys()].map(() => {
      const sink = out ?? new MemorySink();
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
        // Small slices, as an event source mapping delivers them.
        for (let at = from; at < records.length || (scheduled && at === from); at += 3) {
          const r = await runShardInvocation(query, { shardId, records: records.slice(at, at + 3), stage, scheduled }, backends[i]!);
          expect(r.error).toBeUndefined();
          progress.set(stage.index, [...(progress.get(stage.index) ?? []), ...r.progress]);
          if (at >= records.length) break;
        }
        consumed.set(shardId, records.length);
      }
    }
  };
  for (let at = 0; streams.some((s) => s.byShard.some((r) => at < r.length)); at += 5) {
    for (const s of streams) {
      for (const [i, records] of s.byShard.entries()) {
        if (at >= records.length) continue;
        const r = await runShardInvocation(query, { shardId: `shard-${i}`, records: records.slice(at, at + 5), stage: s.stage }, s.backends[i]!);
        expect(r.error).toBeUndefined();
      }
    }
    await runLater();
  }
  // The sources go quiet: each shard is confirmed idle, then scheduled ticks close what they can.
  for (const s of streams) {
    for (const [i] of s.byShard.entries()) {
      const last = await s.backends[i]!.checkpoint.commitLog.getLatest();
      await s.sink.broadcastIdle(s.stage.partitionId(`shard-${i}`), last?.[0] ?? 0);
    }
  }
  await runLater();
  for (let tick = 0; tick < later.length; tick++) await runLater(true);
  await runLater();
  const rows = finalSinks.flatMap((b) => b.allRows())
    .map((r) => canonicalRow(toExternalRow(r, query.schema as never) as Record<string, unknown>)).sort();
  return { rows, progress };
}
