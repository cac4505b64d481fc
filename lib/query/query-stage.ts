/**
 * The part of a deployed query one shard runs, as an object: the whole query on a source shard
 * (`SingleStage`), or with a repartition stage, stage 1 on a source shard (`SourceStage`: the
 * stateless part, rows routed by state key to the internal stream) and stage 2 on a shard of the
 * internal stream (`StateStage`: the stateful part, the output mode and the sink). Each knows its
 * plan and output, how its source id is bound to a live source per invocation, where its
 * checkpoint partition lives and how its watermark is combined; callers never branch on the kind.
 *
 * Built once per container by `compileQuery`: everything here is analysis, done once.
 */
import { requiredSourceColumns } from '../analysis/required-columns.js';
import { checkRuntimeRestrictions } from '../analysis/unsupported-operation-checker.js';
import type { RepartitionPlan } from '../analysis/stages.js';
import type { OutputMode } from '../core/output-mode.js';
import { eventTimeLimitFor, type EventTimeLimit } from '../execution/event-time-skew.js';
import type { StructField } from '../plan/data-types.js';
import type { LogicalPlan } from '../plan/logical-plan.js';
import type { WatermarkCoordinator } from '../runtime/watermark-coordinator.js';
import type { DeadLetterRecord } from '../sources/dead-letter.js';
import { KinesisShardSource, type ShardRecord } from '../sources/kinesis-shard-source.js';
import { createRecordDecoder, type RecordDecoder } from '../sources/record-decoder.js';
import { RepartitionShardSource } from '../sources/repartition-shard-source.js';
import type { MicroBatchStream, Offset } from '../sources/source.js';
import type { PartitionBackends } from './partition-backends.js';
import type { StreamingQueryDefinition } from './query-definition.js';
import { KINESIS_SOURCE_NAME, sourceSchemaOf } from './validate-query.js';

/** The repartition stream's source id in stage 2's plan and offsets. */
export const REPARTITION_SOURCE_NAME = 'repartition';

/** A stage's name in progress, logs and summaries. */
export type StageKind = 'single' | 'source' | 'state';

/** A live source over one shard: records are offered to it by the invocation. */
export interface ShardSource extends MicroBatchStream {
  setCommitted(offset: Offset | null): void;
  offer(records: readonly ShardRecord[]): unknown;
  covers(start: Offset | null, end: Offset): boolean;
}

/** One invocation's binding of the stage's source id to a live shard source. */
export interface StageBinding {
  readonly source: ShardSource;
  /** How this partition's watermark combines with the others' (undefined: this one alone). */
  readonly watermarks: WatermarkCoordinator | undefined;
  /** The records the source could not decode, for the dead-letter location. */
  deadLetters(): DeadLetterRecord[];
}

export abstract class QueryStage {
  abstract readonly kind: StageKind;
  /** The stream whose shards run this stage, and where its output goes. */
  abstract readonly reads: 'source-stream' | 'internal-stream';
  abstract readonly writes: 'sink' | 'internal-stream';
  /** Whether a shard of this stage keeps state (a reshard would strand it). */
  abstract readonly isStateful: boolean;
  /** The id the plan names the stage's stream by; offsets are keyed by it. */
  abstract readonly sourceId: string;
  /** The columns each source must decode, derived once from the plan. */
  readonly requiredColumns: ReadonlyMap<string, ReadonlySet<string>>;
  /** Rethrows what the runtime restrictions refused, checked once (before the first batch, as before). */
  readonly checkRuntimeRestrictions: () => void;

  constructor(
    readonly plan: LogicalPlan,
    readonly columns: readonly string[],
    readonly schema: readonly StructField[],
    readonly outputMode: OutputMode,
    readonly conf: ReadonlyMap<string, string>,
  ) {
    this.requiredColumns = requiredSourceColumns(plan);
    let refused: unknown = null;
    try {
      checkRuntimeRestrictions(plan, conf);
    } catch (error) {
      refused = error;
    }
    this.checkRuntimeRestrictions = () => {
      if (refused) throw refused;
    };
  }

  /** The checkpoint partition of a shard of this stage. */
  checkpointPartition(shardId: string): string {
    return shardId;
  }

  /** How a shard of this stage is named in reports. */
  label(shardId: string): string {
    return shardId;
  }

  /** A live source for this invocation of `shardId`, bound to the stage's source id. */
  abstract bind(shardId: string, backends: PartitionBackends): StageBinding;
}

/**
 * A stage on the source stream's shards: each invocation binds one, its watermark published to
 * (and combined with) the others'. The record decoder is built once per compiled query, so the
 * JSON layouts it learns and its pruned variants serve every invocation of the container.
 */
abstract class SourceStreamStage extends QueryStage {
  readonly reads = 'source-stream';
  readonly sourceId = KINESIS_SOURCE_NAME;
  private readonly recordSchema: readonly StructField[];
  private readonly decode: RecordDecoder;
  private readonly eventTimeLimit: EventTimeLimit | undefined;

  constructor(
    private readonly definition: StreamingQueryDefinition, plan: LogicalPlan, columns: readonly string[],
    schema: readonly StructField[], outputMode: OutputMode, conf: ReadonlyMap<string, string>,
    /** The plan whose watermark the source's event-time check serves (the whole query's). */
    watermarkPlan: LogicalPlan = plan,
  ) {
    super(plan, columns, schema, outputMode, conf);
    this.recordSchema = sourceSchemaOf(definition.source);
    this.decode = createRecordDecoder(definition.source, this.recordSchema);
    this.eventTimeLimit = eventTimeLimitFor(watermarkPlan, KINESIS_SOURCE_NAME, conf);
  }

  bind(shardId: string, backends: PartitionBackends): StageBinding {
    const source = new KinesisShardSource({
      name: KINESIS_SOURCE_NAME,
      queryName: this.definition.name,
      shardId,
      schema: this.recordSchema,
      decode: this.decode,
      partitionKeyColumn: this.definition.source.partitionKey,
      eventTimeLimit: this.eventTimeLimit,
    });
    // Stage 1 has no watermark of its own either: publishing its progress lets the scheduled
    // handler confirm the shard idle and tell the state partitions.
    return { source, watermarks: backends.watermarks, deadLetters: () => source.deadLetters() };
  }
}

/** The whole query on a shard of the source stream. */
export class SingleStage extends SourceStreamStage {
  readonly kind = 'single';
  readonly writes = 'sink';

  constructor(
    definition: StreamingQueryDefinition, plan: LogicalPlan, columns: readonly string[], schema: readonly StructField[],
    conf: ReadonlyMap<string, string>, readonly isStateful: boolean,
  ) {
    super(definition, plan, columns, schema, definition.outputMode, conf);
  }
}

/** Stage 1 on a shard of the source stream: the stateless part, rows routed by state key. */
export class SourceStage extends SourceStreamStage {
  readonly kind = 'source';
  readonly writes = 'internal-stream';
  readonly isStateful = false;

  constructor(definition: StreamingQueryDefinition, split: RepartitionPlan, conf: ReadonlyMap<string, string>, wholePlan?: LogicalPlan) {
    const cut = split.cutOutput.map((a) => ({ name: a.name, type: a.type }));
    super(definition, split.stage1, cut.map((f) => f.name), cut, 'append', conf, wholePlan);
  }

  override label(shardId: string): string {
    return `stage 1 ${shardId}`;
  }
}

/** Stage 2 on a shard of the internal stream (a state partition): the stateful part and the sink. */
export class StateStage extends QueryStage {
  readonly kind = 'state';
  readonly reads = 'internal-stream';
  readonly writes = 'sink';
  readonly isStateful = true;
  readonly sourceId = REPARTITION_SOURCE_NAME;
  private readonly cutSchema: readonly StructField[];
  private readonly delayMs: number;

  constructor(
    definition: StreamingQueryDefinition, split: RepartitionPlan, columns: readonly string[], schema: readonly StructField[],
    conf: ReadonlyMap<string, string>,
  ) {
    super(split.stage2(REPARTITION_SOURCE_NAME), columns, schema, definition.outputMode, conf);
    this.cutSchema = split.cutOutput.map((a) => ({ name: a.name, type: a.type }));
    this.delayMs = split.eventTime?.delayMs ?? 0;
  }

  /** Stage-2 partitions live beside the source shards' partitions. */
  override checkpointPartition(shardId: string): string {
    return `state.${shardId}`;
  }

  override label(shardId: string): string {
    return `stage 2 ${shardId}`;
  }

  bind(shardId: string, backends: PartitionBackends): StageBinding {
    const source = new RepartitionShardSource(REPARTITION_SOURCE_NAME, this.cutSchema, shardId);
    const { delayMs } = this;
    return {
      source,
      // The source shards' watermarks arrive with their rows; batch N runs with what N-1 applied.
      watermarks: {
        combine: async () => source.committedWatermarkMs(delayMs, (await backends.sourcePartitions?.()) ?? []),
        publish: async () => {},
      },
      deadLetters: () => [],
    };
  }
}
