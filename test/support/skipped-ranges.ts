/**
 * Skipped-range scenarios shared by the tests of `sluice redrive --skipped` (test/aws and test/bin):
 * records the function crashes on until the event source mapping gives them up to the real
 * on-failure handler (which records the range), a committed batch given up all the same, a range
 * already past retention, and the CLI pointed at the deployment.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PutRecordCommand, type KinesisClient } from '@aws-sdk/client-kinesis';
import type { KinesisStreamEvent } from 'aws-lambda';
import { KinesisShardReader, listStreamShards } from '../../lib/aws/kinesis-shard-reader.js';
import { createOnFailureHandler } from '../../lib/aws/on-failure-handler.js';
import { createQuietObservability } from '../../lib/aws/observability.js';
import type { EmulatorSet } from '../../lib/local/emulators.js';
import type { BatchFailureInfo } from '../../lib/local/event-source-mapping.js';
import { deliverToOnFailureHandler } from '../../lib/local/on-failure-destination.js';
import type { QueryDefinition } from '../../lib/query/query-definition.js';
import type { DeploymentDescriptor, RuntimeConfig } from '../../lib/runtime/runtime-config.js';
import type { Deployment, DrainOptions, InvocationWrapper } from './aws-pipeline.js';
import { emulatorCliEnv, runSluice, type CliResult } from './sluice-cli.js';

/** Lambda's description of a batch it gave up on shard 0 (what its on-failure destination receives). */
export function failureInfo(streamArn: string, first: string, last: string, batchSize: number, shardId = 'shardId-000000000000'): BatchFailureInfo {
  return {
    condition: 'RetryAttemptsExhausted', reason: 'x', shardId, streamArn, startSequenceNumber: first, endSequenceNumber: last, batchSize,
    approximateArrivalOfFirstRecord: new Date().toISOString(), approximateArrivalOfLastRecord: new Date().toISOString(), approximateInvokeCount: 5, records: [],
  };
}

export const streamArnOf = (streamName: string): string => `arn:aws:kinesis:us-east-1:000000000000:stream/${streamName}`;

/**
 * Source records whose sequence numbers crash the source function on every delivery (a bug; a
 * re-driven copy has another sequence number, or runs elsewhere). `asFunction` goes to `deploy`;
 * `drainOptions` give the batches up after one retry (bisected down to the crashing records) to the
 * real on-failure handler, which records each range.
 */
export function crashingRecords(): {
  readonly crashing: Set<string>;
  readonly gaveUp: BatchFailureInfo[];
  readonly asFunction: InvocationWrapper;
  drainOptions(definition: QueryDefinition, config: RuntimeConfig, emulators: EmulatorSet): DrainOptions;
} {
  const crashing = new Set<string>();
  const gaveUp: BatchFailureInfo[] = [];
  return {
    crashing,
    gaveUp,
    asFunction: async (role, invoke, event) => {
      const records = (event as KinesisStreamEvent | undefined)?.Records ?? [];
      if (role === 'kinesisTrigger' && records.some((r) => crashing.has(r.kinesis.sequenceNumber))) throw new Error('Runtime exited with error: signal: killed');
      return invoke();
    },
    drainOptions(definition, config, emulators) {
      const onFailure = createOnFailureHandler(definition, { config, clientOptions: emulators.clientOptions, observability: createQuietObservability(definition.name) });
      return {
        maximumRetryAttempts: 1, retryBackoffMs: 5,
        onFailure: async (info: BatchFailureInfo) => { gaveUp.push(info); await deliverToOnFailureHandler(onFailure, info); },
      };
    },
  };
}

/** Puts each record alone, in order: where each landed. */
export async function putEach(
  kinesis: KinesisClient, streamName: string, records: readonly { data: string; partitionKey: string }[],
): Promise<{ shardId: string; sequenceNumber: string }[]> {
  const placed: { shardId: string; sequenceNumber: string }[] = [];
  for (const r of records) {
    const put = await kinesis.send(new PutRecordCommand({ StreamName: streamName, PartitionKey: r.partitionKey, Data: Buffer.from(r.data) }));
    placed.push({ shardId: put.ShardId!, sequenceNumber: put.SequenceNumber! });
  }
  return placed;
}

/** Whether a record lies in one of the given-up batches. */
export const inGivenUp = (gaveUp: readonly BatchFailureInfo[], at: { shardId: string; sequenceNumber: string }): boolean => gaveUp.some((g) => g.shardId === at.shardId
  && BigInt(g.startSequenceNumber) <= BigInt(at.sequenceNumber) && BigInt(at.sequenceNumber) <= BigInt(g.endSequenceNumber));

/**
 * Six sales on one shard, run three at a time: the second batch (records 3..5) commits and its
 * response is lost on every try, so Lambda gives it up all the same; and a range past what the
 * shard holds (as after retention). Both are recorded by the real on-failure handler.
 */
export async function committedAndGoneRanges(deployment: Deployment, definition: QueryDefinition, emulators: EmulatorSet): Promise<{ seqs: string[]; gone: [string, string] }> {
  const { clients, config } = deployment;
  const sale = (i: number) => ({ store_id: ['north', 'south'][i % 2]!, amount: i + 1, ts: new Date(Date.UTC(2024, 4, 1, 14, i)).toISOString() });
  const seqs = (await putEach(clients.kinesis, config.streamName, Array.from({ length: 6 }, (_, i) => ({ data: JSON.stringify(sale(i)), partitionKey: sale(i).store_id }))))
    .map((p) => p.sequenceNumber);
  const onFailure = createOnFailureHandler(definition, { config, clientOptions: emulators.clientOptions, observability: createQuietObservability(definition.name) });
  await deployment.drain({
    batchSize: 3, maximumRetryAttempts: 0, bisectBatchOnFunctionError: false,
    hooks: { afterInvoke: (event) => { if (event.Records.some((r) => r.kinesis.sequenceNumber === seqs[5])) throw new Error('response lost'); } },
    onFailure: (info) => deliverToOnFailureHandler(onFailure, info),
  });
  const gone = [BigInt(seqs[5]!) + 1000n, BigInt(seqs[5]!) + 2000n].map(String) as [string, string];
  await deliverToOnFailureHandler(onFailure, failureInfo(streamArnOf(config.streamName), gone[0], gone[1], 2));
  return { seqs, gone };
}

/** `sluice <args>` as a user runs it, against the deployment (its descriptor written to `dir`); `kinesis`: another Kinesis endpoint. */
export function cliFor(
  emulators: EmulatorSet, config: RuntimeConfig, query: string, dir: string, options: { kinesis?: string; timeoutMs?: number } = {},
): (args: string[]) => Promise<CliResult> {
  const descriptorFile = join(dir, `deployment-${query}.json`);
  writeFileSync(descriptorFile, JSON.stringify({ ...config, sluiceQuery: query } satisfies DeploymentDescriptor));
  return (args) => runSluice([...args, '--deployment', descriptorFile, '--endpoint', `kinesis=${options.kinesis ?? emulators.endpoints.kinesis}`,
    '--endpoint', `dynamodb=${emulators.endpoints.dynamodb}`, '--endpoint', `s3=${emulators.endpoints.s3}`], options.timeoutMs ?? 60_000, emulatorCliEnv(emulators));
}

/** Every record of every shard of the stream (closed parents included). */
export async function recordsIn(kinesis: KinesisClient, stream: string): Promise<number> {
  let n = 0;
  for (const shard of await listStreamShards(kinesis, stream)) n += (await new KinesisShardReader(kinesis, stream).readAfter(shard.ShardId!, null)).records.length;
  return n;
}
