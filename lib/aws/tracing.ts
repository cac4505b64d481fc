/**
 * Optional X-Ray tracing through Powertools Tracer (the construct's `tracing` prop sets
 * SLUICE_TRACING=true and active tracing). The tracer is imported on first use, so a function
 * without tracing never loads the X-Ray SDK. Each shard's batch run is a subsegment annotated with
 * query, shard and stage (searchable in X-Ray), with the SDK calls it made beneath it.
 */
import type { Tracer } from '@aws-lambda-powertools/tracer';
import { TRACING_ENV } from '../runtime/runtime-config.js';
import type { AwsClients } from './clients.js';
import { builtS3Client } from './s3-sdk.js';

export function tracingEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[TRACING_ENV] === 'true';
}

let loading: Promise<Tracer | undefined> | undefined;

/** The process's tracer when tracing is on, else undefined. */
export function loadTracer(): Promise<Tracer | undefined> {
  loading ??= tracingEnabled()
    ? import('@aws-lambda-powertools/tracer').then(({ Tracer: TracerClass }) => new TracerClass({ serviceName: 'sluice' }))
    : Promise.resolve(undefined);
  return loading;
}

/** Loads the tracer (when on) and has it record every call these clients make. */
export async function tracerForClients(clients: AwsClients | undefined): Promise<Tracer | undefined> {
  const tracer = await loadTracer();
  // With tracing on, the S3 client is built now (its SDK loaded) so that its calls are traced too.
  if (tracer && clients) for (const client of [clients.kinesis, clients.dynamodb, await builtS3Client(clients.s3)]) tracer.captureAWSv3Client(client);
  return tracer;
}

/** Runs `run` in a subsegment of the current segment (the invocation's), when tracing. */
export async function inSubsegment<T>(
  tracer: Tracer | undefined, name: string, annotations: Readonly<Record<string, string | number>>, run: () => Promise<T>,
): Promise<T> {
  const parent = tracer?.isTracingEnabled() ? tracer.getSegment() : undefined;
  if (!tracer || !parent) return run();
  const subsegment = parent.addNewSubsegment(name);
  tracer.setSegment(subsegment);
  for (const [key, value] of Object.entries(annotations)) subsegment.addAnnotation(key, value);
  try {
    return await run();
  } catch (error) {
    subsegment.addError(error as Error);
    throw error;
  } finally {
    subsegment.close();
    tracer.setSegment(parent);
  }
}
