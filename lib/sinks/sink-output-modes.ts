/**
 * Which output modes each sink can honour: the one rule that validation (`validateQuery`, at
 * synth and cold start), `writeStream.start()`, the sinks themselves and `sluice dev` all read.
 */
import type { OutputMode } from '../core/output-mode.js';
import { AnalysisError } from '../errors/sluice-error.js';

/** The sinks a deployed query can declare (`SinkSpec.kind`). */
export type DeployedSinkKind = 's3-files' | 's3-snapshot' | 'dynamodb';

const ALL_MODES: readonly OutputMode[] = ['append', 'update', 'complete'];

export const SINK_OUTPUT_MODES: Readonly<Record<DeployedSinkKind, readonly OutputMode[]>> = {
  // Files cannot be updated: each batch's rows are written once.
  's3-files': ['append'],
  // One object per batch holding the whole result table.
  's3-snapshot': ['complete'],
  // An upsert per result key (append: a put per row).
  dynamodb: ALL_MODES,
};

/** Memory, console and foreachBatch sinks take every mode, as in Spark. */
export const ANY_OUTPUT_MODE = ALL_MODES;

export function sinkSupportsMode(kind: DeployedSinkKind, mode: OutputMode): boolean {
  return SINK_OUTPUT_MODES[kind].includes(mode);
}

const DEPLOYED_HINTS: Partial<Record<`${DeployedSinkKind}/${OutputMode}`, string>> = {
  's3-files/update': "update mode changes rows already written, and S3 files cannot be updated: use sink { kind: 'dynamodb' } (an upsert per result key), or append mode with a watermark.",
  's3-files/complete': "complete mode rewrites the whole result every batch: use sink { kind: 's3-snapshot' } (one object per partition, replaced each batch) or { kind: 'dynamodb' }.",
  's3-snapshot/append': "use sink { kind: 's3-files' } for append mode; the snapshot sink holds a whole result table.",
  's3-snapshot/update': "use sink { kind: 'dynamodb' } for update mode (an upsert per result key).",
};

/**
 * Refuses a sink that cannot take `mode` (Spark's STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE),
 * before any state or checkpoint is read. `sink` is a deployed sink kind or a Sink object.
 */
export function checkSinkOutputMode(
  sink: DeployedSinkKind | { readonly description: string; readonly supportedOutputModes: readonly OutputMode[] }, mode: OutputMode,
): void {
  const supported = typeof sink === 'string' ? SINK_OUTPUT_MODES[sink] : sink.supportedOutputModes;
  if (supported.includes(mode)) return;
  const name = typeof sink === 'string' ? sink : sink.description;
  const hint = typeof sink === 'string'
    ? DEPLOYED_HINTS[`${sink}/${mode}`] ?? `use one of ${supported.join(', ')} output modes with this sink.`
    : `use one of ${supported.join(', ')}, or a sink that supports ${mode} (e.g. the DynamoDB upsert sink for update).`;
  throw new AnalysisError(`Data source ${name} does not support ${mode} output mode.`, {
    code: 'SINK_DOES_NOT_SUPPORT_OUTPUT_MODE', errorClass: 'STREAMING_OUTPUT_MODE.UNSUPPORTED_DATASOURCE', hint,
  });
}
