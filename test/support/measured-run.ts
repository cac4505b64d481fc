/**
 * A `sluice cost` comparison's measured side: drains an emulated deployment while counting, at the
 * clients, what its handlers sent: DynamoDB write units per table (AWS's rules on the items
 * written), the records and 25 KB payload units put on each internal stream, S3 PUTs (and copies),
 * and each stage's invocations that had input.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { S3Client } from '@aws-sdk/client-s3';
import type { Deployment, DrainOptions } from './aws-pipeline.js';
import { countHopRecords, writeUnitsByTable } from './request-units.js';

export interface MeasuredRun {
  /** DynamoDB write units by table name. */
  readonly writes: Map<string, number>;
  /** Per internal stream (by name): records put and their payload units. */
  readonly hops: Map<string, { records: number; payloadUnits: number }>;
  /** S3 PutObject and CopyObject requests. */
  readonly s3Puts: number;
  /** Invocations with input rows, by stage: 1 for the source stages, k + 1 for the stage reading hop k. */
  readonly invocations: Map<number, number>;
  /** Batches (progress records), by stage. */
  readonly batches: Map<number, number>;
  /** Input rows of the source stages. */
  readonly sourceRows: number;
}

export async function measureDrain(d: Deployment, options: DrainOptions): Promise<MeasuredRun> {
  const writes = new Map<string, number>();
  const hops = new Map<string, { records: number; payloadUnits: number }>();
  let s3Puts = 0;
  const dynamoSend = DynamoDBClient.prototype.send;
  const kinesisSend = KinesisClient.prototype.send;
  const s3Send = S3Client.prototype.send;
  type Send = (...a: unknown[]) => Promise<unknown>;
  DynamoDBClient.prototype.send = async function (this: DynamoDBClient, ...args: Parameters<typeof dynamoSend>) {
    for (const [table, units] of writeUnitsByTable(args[0] as never)) writes.set(table, (writes.get(table) ?? 0) + units);
    return (dynamoSend as Send).apply(this, args);
  } as typeof dynamoSend;
  KinesisClient.prototype.send = async function (this: KinesisClient, ...args: Parameters<typeof kinesisSend>) {
    const command = args[0] as { input: { StreamName?: string; StreamARN?: string } };
    const stream = String(command.input.StreamName ?? command.input.StreamARN);
    const hop = hops.get(stream) ?? { records: 0, payloadUnits: 0 };
    countHopRecords(args[0] as never, hop);
    if (hop.records > 0) hops.set(stream, hop);
    return (kinesisSend as Send).apply(this, args);
  } as typeof kinesisSend;
  S3Client.prototype.send = async function (this: S3Client, ...args: Parameters<typeof s3Send>) {
    const name = (args[0] as { constructor: { name: string } }).constructor.name;
    if (name === 'PutObjectCommand' || name === 'CopyObjectCommand') s3Puts++;
    return (s3Send as Send).apply(this, args);
  } as typeof s3Send;
  const before = d.results.length;
  try {
    await d.drain(options);
  } finally {
    DynamoDBClient.prototype.send = dynamoSend;
    KinesisClient.prototype.send = kinesisSend;
    S3Client.prototype.send = s3Send;
  }
  const results = d.results.slice(before);
  const invocations = new Map<number, number>();
  const batches = new Map<number, number>();
  for (const r of results) {
    const stage = r.result.stage.inputHop ? r.result.stage.inputHop.index + 2 : 1;
    batches.set(stage, (batches.get(stage) ?? 0) + r.result.progress.length);
    if (r.result.progress.some((p) => p.numInputRows > 0)) invocations.set(stage, (invocations.get(stage) ?? 0) + 1);
  }
  const sourceRows = results.filter((r) => !r.result.stage.inputHop).flatMap((r) => r.result.progress).reduce((n, p) => n + p.numInputRows, 0);
  return { writes, hops, s3Puts, invocations, batches, sourceRows };
}

/** How far an estimate is from what was measured, relative to the measured figure. */
export function relativeError(f: { estimated: number; measured: number }): number {
  return Math.abs(f.estimated - f.measured) / f.measured;
}
