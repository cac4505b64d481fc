/**
 * SluiceQuery's `compaction` prop: how the scheduled function merges an s3-files sink's small
 * per-batch files (lib/aws/s3-compaction.ts), passed to it as runtime environment settings.
 */
import type { Duration, Size } from 'aws-cdk-lib';
import { DEPLOYMENT_DEFAULTS, type RuntimeConfig } from '../lib/runtime/runtime-config.js';

export interface SinkCompactionOptions {
  /**
   * Merged files grow up to this size.
   *
   * @default Size.mebibytes(128)
   */
  readonly targetSize?: Size;
  /**
   * Only files at least this old are merged: a folder still receiving batches is left alone (a
   * reader listing a folder during a merge can see its rows twice; S3 has no atomic swap). Must
   * exceed the functions' timeout, so no run that could still reveal a batch's file is alive.
   *
   * @default Duration.hours(1)
   */
  readonly minAge?: Duration;
}

/** The runtime settings for the prop; `{}` for a sink other than s3-files (which has nothing to compact). */
export function compactionConfig(
  prop: SinkCompactionOptions | false | undefined, sinkKind: string, functionTimeout: Duration, propError: (message: string) => Error,
): Partial<RuntimeConfig> {
  if (sinkKind !== 's3-files') {
    if (prop) throw propError(`compaction is for the s3-files sink; this query writes to an ${sinkKind} sink.`);
    return {};
  }
  if (prop === false) return { compaction: false };
  const minAge = prop?.minAge;
  if (minAge !== undefined) {
    if (minAge.isUnresolved()) throw propError('compaction.minAge must be known at synth time (the scheduled function gets it in milliseconds).');
    if (!functionTimeout.isUnresolved() && minAge.toMilliseconds() <= functionTimeout.toMilliseconds()) {
      throw propError(`compaction.minAge (${minAge.toHumanString()}) must exceed the functions' timeout (${functionTimeout.toHumanString()}): `
        + 'a run still alive could otherwise reveal a batch\'s file after it was merged.');
    }
  }
  const targetBytes = prop?.targetSize?.toBytes();
  if (targetBytes !== undefined && targetBytes < 1024 * 1024) {
    throw propError(`compaction.targetSize must be at least 1 MiB, got ${targetBytes} bytes.`);
  }
  return {
    compaction: true,
    compactionTargetBytes: targetBytes ?? DEPLOYMENT_DEFAULTS.compactionTargetBytes,
    compactionMinAgeMs: minAge?.toMilliseconds() ?? DEPLOYMENT_DEFAULTS.compactionMinAgeMs,
  };
}
