/**
 * The API builds plans that name their sources by id; DataFrames carry the live sources beside
 * the plan, merged across joins and unions, and `writeStream.start()` binds them for the run.
 * Batch queries run without any runtime module being imported first (no registration step).
 */
import { describe, expect, it } from 'vitest';
import { SluiceSession } from '../../lib/api/session.js';
import { col } from '../../lib/plan/functions.js';
import { collectNodes, type StreamingRelationNode } from '../../lib/plan/logical-plan.js';
import { MemoryStream } from '../../lib/sources/memory-stream.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';

describe('source binding', () => {
  it('df.collect() runs a batch query with only the API imported', () => {
    const session = new SluiceSession();
    const df = session.createDataFrame([[1, 'a'], [2, 'b'], [3, 'a']], 'n int, k string');
    expect(df.filter(col('k').eq('a')).select('n').collect()).toEqual([[1], [3]]);
  });

  it('a plan holds source ids only; the DataFrame holds the live sources of both sides of a union', async () => {
    const session = new SluiceSession();
    const a = session.memoryStream('v int');
    const b = session.memoryStream('v int');
    const both = a.df.union(b.df);
    const relations = collectNodes(both.plan, (n): n is StreamingRelationNode => n.kind === 'StreamingRelation');
    expect(relations.map((r) => r.sourceId)).toEqual([a.stream.name, b.stream.name]);
    expect(relations.every((r) => !('source' in r))).toBe(true);
    expect([...both.sources.keys()]).toEqual([a.stream.name, b.stream.name]);
    const sink = new MemorySink();
    const query = await both.writeStream.sink(sink).start();
    a.stream.addData([[1]]);
    b.stream.addData([[2]]);
    await query.processAllAvailable();
    await query.stop();
    expect(sink.allRows().map((r) => r[0]).sort()).toEqual([1, 2]);
  });

  it('a DataFrame over a source id alone analyses, but a run needs the id bound to a live source', async () => {
    const session = new SluiceSession();
    const unbound = session.streamingRelation('kinesis', [{ name: 'v', type: 'int' }]).groupBy(col('v')).count();
    expect(unbound.isStreaming).toBe(true);
    expect(unbound.sources.size).toBe(0);
    await expect(unbound.writeStream.outputMode('update').sink(new MemorySink()).start())
      .rejects.toThrow(/reads source 'kinesis', but no live source is bound to that id/);
  });

  it('refuses two different sources under one id in one query', () => {
    const session = new SluiceSession();
    const one = session.readStream(new MemoryStream([{ name: 'v', type: 'int' }], 'events'));
    const other = session.readStream(new MemoryStream([{ name: 'v', type: 'int' }], 'events'));
    expect(() => one.union(other)).toThrow(/Two different sources of this query have the id 'events'/);
    // The same source read twice is one source: a self-join or self-union is fine.
    expect(() => one.union(one)).not.toThrow();
  });
});
