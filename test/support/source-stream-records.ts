/**
 * Every record's data (UTF-8) in the source stream's first shard of a deployment, oldest first:
 * what a re-drive put back into the stream shows up here.
 */
import { GetRecordsCommand, GetShardIteratorCommand } from '@aws-sdk/client-kinesis';
import type { Deployment } from './aws-pipeline.js';

export async function sourceRecords(d: Deployment): Promise<string[]> {
  const { ShardIterator } = await d.clients.kinesis.send(new GetShardIteratorCommand({
    StreamName: d.config.streamName, ShardId: 'shardId-000000000000', ShardIteratorType: 'TRIM_HORIZON',
  }));
  const out: string[] = [];
  for (let iterator = ShardIterator; iterator;) {
    const page = await d.clients.kinesis.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 10_000 }));
    out.push(...(page.Records ?? []).map((r) => Buffer.from(r.Data!).toString()));
    // An empty page at the tip: nothing more (an open shard's iterator never runs out).
    if ((page.Records ?? []).length === 0 && (page.MillisBehindLatest ?? 0) === 0) break;
    iterator = page.NextShardIterator;
  }
  return out;
}
