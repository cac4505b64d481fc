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

export function measureDrain(d: Deployment, options: DrainOptions): Promise<MeasuredRun> {
  return measure(d, async () => { await d.drain(options); });
}

/**
 * The same counts over `d.drainInSteps`: the input put in rounds (one second of the modelled rate
 * each), every stage drained in order after each, so the batches are those of steady arrival
 * whatever the machine's load. The first `warmup` rounds run but are not counted (the estimate
 * prices the steady state, not the first batches of an empty checkpoint).
 */
export function measureSteppedDrain(
  d: Deployment, rounds: { warmup: number; counted: number }, putStep: (step: number) => Promise<void>, options: DrainOptions,
): Promise<MeasuredRun> {
  return measure(d, (startCounting) => d.drainInSteps(rounds.warmup + rounds.counted, async (step) => {
    if (step === rounds.warmup) startCounting();
    await putStep(step);
  }, options), rounds.warmup > 0);
}

/** Counts what `run` sends, from its start or, with `later`, from its call of `startCounting`. */
async function measure(d: Deployment, run: (startCounting: () => void) => Promise<void>, later = false): Promise<MeasuredRun> {
  let counting = !later;
  let before = d.results.length;
  const startCounting = (): void => { counting = true; before = d.results.length; };
  const writes = new Map<string, number>();
  const hops = new Map<string, { records: number; payloadUnits: number }>();
  let s3Puts = 0;
  const dynamoSend = DynamoDBClient.prototype.send;
  const kinesisSend = KinesisClient.prototype.send;
  const s3Send = S3Client.prototype.send;
  type Send = (...a: unknown[]) => Promise<unknown>;
  DynamoDBClient.prototype.send = async function (this: DynamoDBClient, ...args: Parameters<typeof dynamoSend>) {
    if (counting) for (const [table, units] of writeUnitsByTable(args[0] as never)) writes.set(table, (writes.get(table) ?? 0) + units);
    return (dynamoSend as Send).apply(this, args);
  } as typeof dynamoSend;
  KinesisClient.prototype.send = async function (this: KinesisClient, ...args: Parameters<typeof kinesisSend>) {
    const command = args[0] as { input: { StreamName?: string; StreamARN?: string } };
    const stream = String(command.input.StreamName ?? command.input.StreamARN);
    const hop = hops.get(stream) ?? { records: 0, payloadUnits: 0 };
    if (counting) countHopRecords(args[0] as never, hop);
    if (hop.records > 0) hops.set(stream, hop);
    return (kinesisSend as Send).apply(this, args);
  } as typeof kinesisSend;
  S3Client.prototype.send = async function (this: S3Client, ...args: Parameters<typeof s3Send>) {
    const name = (args[0] as { constructor: { name: string } }).constructor.name;
    if (counting && (name === 'PutObjectCommand' || name === 'CopyObjectCommand')) s3Puts++;
    return (s3Send as Send).apply(this, args);
  } as typeof s3Send;
  try {
    await run(startCounting);
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
