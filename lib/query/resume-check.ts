/**
 * Whether a (new) compiled query can resume from a deployed checkpoint: the check every
 * invocation makes at start (StreamExecution.start: the stored fingerprint against the new
 * plan's, lib/runtime/query-fingerprint.ts), run without running a batch and without writing.
 * The checkpoint is wrapped read-only: a partition that has no metadata yet is compatible (it
 * would start fresh), and the sink's at-start `onCommitted` is not called.
 */
import type { Checkpoint, QueryMetadata } from '../checkpoint/checkpoint.js';
import { SluiceError } from '../errors/sluice-error.js';
import { StreamExecution } from '../runtime/stream-execution.js';
import { Trigger } from '../runtime/trigger.js';
import { systemClock } from '../runtime/clock.js';
import { MemoryDeadLetterWriter } from '../sources/dead-letter.js';
import type { Sink } from '../sinks/sink.js';
import type { CompiledQuery } from './compiled-query.js';
import type { QueryStage } from './query-stage.js';

export interface PartitionToCheck {
  readonly partitionId: string;
  /** 1: the source stream's shard (the whole query or stage 1); 2: a repartition stage's state partition. */
  readonly stage: 1 | 2;
  readonly shardId: string;
  readonly checkpoint: Checkpoint;
}

export interface ResumeVerdict {
  readonly partitionId: string;
  /** Whether the partition had a checkpoint to compare with. */
  readonly hadCheckpoint: boolean;
  readonly compatible: boolean;
  readonly reason?: string;
}

export async function checkResumable(query: CompiledQuery, partitions: readonly PartitionToCheck[]): Promise<ResumeVerdict[]> {
  const verdicts: ResumeVerdict[] = [];
  for (const p of partitions) {
    const stage: QueryStage | null = p.stage === 2 ? query.stateStage : query.sourceStage;
    const stored = await p.checkpoint.readQueryMetadata();
    if (!stage) {
      verdicts.push({
        partitionId: p.partitionId, hadCheckpoint: stored !== undefined, compatible: false,
        reason: 'the deployed query has a repartition stage (this is its state partition) and the new definition has none: its state is keyed differently',
      });
      continue;
    }
    try {
      await startReadOnly(query, stage, p, stored);
      verdicts.push({ partitionId: p.partitionId, hadCheckpoint: stored !== undefined, compatible: true });
    } catch (error) {
      if (!(error instanceof SluiceError)) throw error;
      verdicts.push({ partitionId: p.partitionId, hadCheckpoint: stored !== undefined, compatible: false, reason: error.message });
    }
  }
  return verdicts;
}

async function startReadOnly(query: CompiledQuery, stage: QueryStage, p: PartitionToCheck, stored: QueryMetadata | undefined): Promise<void> {
  const readOnly: Checkpoint = {
    offsetLog: p.checkpoint.offsetLog,
    commitLog: p.checkpoint.commitLog,
    stateStore: p.checkpoint.stateStore,
    readQueryMetadata: async () => stored,
    // A partition without metadata would be initialised by the new query: nothing to compare.
    writeQueryMetadata: async () => {},
  };
  const sink: Sink = { description: 'resume check (writes nothing)', supportedOutputModes: ['append', 'update', 'complete'], addBatch: async () => {} };
  const deadLetters = new MemoryDeadLetterWriter();
  const binding = stage.bind(p.shardId, { checkpoint: readOnly, sink, deadLetters });
  const execution = new StreamExecution({
    plan: stage.plan,
    sources: new Map([[stage.sourceId, binding.source]]),
    requiredColumns: stage.requiredColumns,
    checkRuntimeRestrictions: stage.checkRuntimeRestrictions,
    columns: stage.columns,
    schema: stage.schema,
    outputMode: stage.outputMode,
    sink,
    trigger: Trigger.ProcessingTime(0),
    checkpoint: readOnly,
    conf: stage.conf,
    clock: systemClock,
    queryName: query.name,
    partitionId: p.shardId,
  });
  await execution.start();
}
