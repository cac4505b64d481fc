/**
 * The scheduled function's housekeeping after a tick's batches, for an s3-files sink: the staged
 * copies of batches revealed long ago are deleted (lib/aws/s3-staged-sweep.ts; always, even with
 * compaction off), then quiet small files are merged (lib/aws/s3-compaction.ts), both within the
 * time the invocation has left, so a run never times out half-way through its batches' work; what
 * is left waits for the next tick.
 */
import type { CostMeter } from '../core/cost-meter.js';
import type { CompiledQuery } from '../query/compiled-query.js';
import type { RuntimeConfig } from '../runtime/runtime-config.js';
import type { AwsClients } from './clients.js';
import { sinkPrefixOf } from './aws-backends.js';
import { compactFiles, DEFAULT_COMPACTION_MIN_AGE_MS, type CompactionReport } from './s3-compaction.js';
import { sweepRevealedStaging, type StagedSweepReport } from './s3-staged-sweep.js';

/** Without a Lambda context (tests, `sluice dev`), a run merges for at most this long. */
export const DEFAULT_COMPACTION_BUDGET_MS = 30_000;
/** Kept free before the function's timeout: one merge (read, write, delete) started before it must end in time. */
export const COMPACTION_SAFETY_MARGIN_MS = 20_000;

export interface CompactionStepOptions {
  readonly query: CompiledQuery;
  readonly config: RuntimeConfig;
  readonly clients: AwsClients;
  readonly meter?: CostMeter;
  /** Lambda's remaining time, when invoked by Lambda. */
  readonly remainingMs?: () => number;
  /** Wall clock (S3's LastModified is compared with it). */
  readonly clock?: () => number;
}

/** Null when the query has no s3-files sink or compaction is off. */
export async function compactSinkIfDue(options: CompactionStepOptions): Promise<CompactionReport | null> {
  const { query, config, clients, meter } = options;
  const sink = query.definition.sink;
  if (sink.kind !== 's3-files' || config.compaction === false || !config.sinkBucket) return null;
  const clock = options.clock ?? Date.now;
  const deadline = options.remainingMs
    ? clock() + options.remainingMs() - COMPACTION_SAFETY_MARGIN_MS
    : clock() + DEFAULT_COMPACTION_BUDGET_MS;
  return compactFiles({
    client: clients.s3, bucket: config.sinkBucket, prefix: sinkPrefixOf(query.definition, config), format: sink.format ?? 'jsonl',
    targetBytes: config.compactionTargetBytes, minAgeMs: config.compactionMinAgeMs, now: clock, meter,
    shouldStop: () => clock() >= deadline,
  });
}

/**
 * Null when the query has no s3-files sink. The grace period is compaction's minimum age: both
 * must exceed the functions' timeout for the same reason (no invocation still revealing a batch).
 */
export async function sweepStagingIfFilesSink(options: CompactionStepOptions): Promise<StagedSweepReport | null> {
  const { query, config, clients, meter } = options;
  if (query.definition.sink.kind !== 's3-files' || !config.sinkBucket) return null;
  const clock = options.clock ?? Date.now;
  const deadline = options.remainingMs
    ? clock() + options.remainingMs() - COMPACTION_SAFETY_MARGIN_MS
    : clock() + DEFAULT_COMPACTION_BUDGET_MS;
  return sweepRevealedStaging({
    client: clients.s3, bucket: config.sinkBucket, prefix: sinkPrefixOf(query.definition, config),
    graceMs: config.compactionMinAgeMs ?? DEFAULT_COMPACTION_MIN_AGE_MS, now: clock, meter,
    shouldStop: () => clock() >= deadline,
  });
}
