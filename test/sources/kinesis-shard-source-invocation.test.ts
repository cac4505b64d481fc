/**
 * Column pruning through one shard invocation (what a Lambda invocation runs), on memory backends:
 * the Kinesis source gives the same answer as the JSON memory stream for a record whose unread
 * column does not fit the schema, and dead-letters nothing.
 */
import { describe, expect, it } from 'vitest';
import { defineQuery } from '../../lib/query/query-definition.js';
import { SluiceSession } from '../../lib/api/session.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { col } from '../../lib/plan/functions.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { runShardInvocation } from '../../lib/query/shard-invocation.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { MemoryDeadLetterWriter } from '../../lib/sources/dead-letter.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';

const RECORDS = ['{"a":1,"b":"not-a-number"}', '{"a":2,"b":3}', '{"a":"x","b":4}'];

const selectA = defineQuery({
  name: 'select-a',
  source: { schema: 'a long, b long' },
  transform: (events) => events.select(col('a')),
  outputMode: 'append',
  sink: { kind: 's3-files' },
});

function shardRecords(texts: readonly string[]): ShardRecord[] {
  return texts.map((text, i) => ({
    sequenceNumber: String(BigInt(i + 1) * 1_000_000_000_000n),
    partitionKey: 'p',
    dataBase64: Buffer.from(text).toString('base64'),
    approximateArrivalTimestampMs: 0,
  }));
}

describe('Kinesis column pruning through a shard invocation', () => {
  it("select('a') reads [1], [2] from the Kinesis shard, as from the JSON memory stream; only the bad 'a' is dead-lettered", async () => {
    const session = new SluiceSession();
    const { stream, df } = session.jsonMemoryStream('a long, b long');
    const memorySink = new MemorySink();
    const query = await selectA.transform(df, session).writeStream.outputMode('append').sink(memorySink).checkpoint(new MemoryCheckpoint()).start();
    stream.addData(RECORDS);
    await query.processAllAvailable();
    await query.stop();
    expect(memorySink.allRows()).toEqual([[1], [2]]);
    expect(stream.invalidRecords.map((r) => r.record)).toEqual([RECORDS[2]]);

    const backends = { checkpoint: new MemoryCheckpoint(), sink: new MemorySink(), deadLetters: new MemoryDeadLetterWriter() };
    const result = await runShardInvocation(compileQuery(selectA), { shardId: 'shard-0', records: shardRecords(RECORDS) }, backends);
    expect(result.error).toBeUndefined();
    expect(result.firstUncommittedSequenceNumber).toBeNull();
    expect(backends.sink.allRows()).toEqual(memorySink.allRows());
    expect(backends.deadLetters.records.map((d) => Buffer.from(d.dataBase64, 'base64').toString())).toEqual([RECORDS[2]]);
    expect(result.progress[0]!.numDeadLetteredRows).toBe(1);
  });
});
