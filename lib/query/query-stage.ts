/**
 * The part of a deployed query one shard runs, as an object: the whole query on a source shard
 * (`SingleStage`), or with repartition stages, stage 1 on a source shard (`SourceStage`: the
 * stateless part, rows routed by state key to the first internal stream) and each later stage on a
 * shard of the internal stream before it (`StateStage`: its stateful operator(s), then the next
 * hop, or the output mode and the sink). Each knows its
 * plan and output, how its source id is bound to a live source per invocation, where its
 * checkpoint partition lives and how its watermark is combined; callers never branch on the kind.
 *
 * Built once per container by `compileQuery`: everything here is analysis, done once.
 */
import { requiredSourceColumns } from '../analysis/required-columns.js';
import { checkRuntimeRestrictions } from '../analysis/unsupported-operation-checker.js';
import type { Hop, PlannedStage } from '../analysis/stages.js';
import { hopOfInput, type MultiInputHopPlan } from '../analysis/multi-input-stages.js';
import { parseWatermarkPolicy, WATERMARK_POLICY_CONF } from '../runtime/watermark-tracker.js';
import { sourcesWatermarkMs, type SourceProgress, type SourceShard } from '../sources/repartition-records.js';
import type { OutputMode } from '../core/output-mode.js';
import { eventTimeLimitFor, type EventTimeLimit } from '../execution/event-time-skew.js';
import type { StructField } from '../plan/data-types.js';
import { collectNodes, type LogicalPlan, type StreamingRelationNode } from '../plan/logical-plan.js';
import type { WatermarkCoordinator } from '../runtime/watermark-coordinator.js';
import type { DeadLetterRecord } from '../sources/dead-letter.js';
import { KinesisShardSource, type ExpiredRecords, type ShardRecord } from '../sources/kinesis-shard-source.js';
import { createRecordDecoder, type RecordDecoder } from '../sources/record-decoder.js';
import { RepartitionShardSource, type ExpiredInternalRecords, type LostSourceBatches } from '../sources/repartition-shard-source.js';
import { kinesisHashKey as hashKeyOf, repartitionRoutingKey } from '../state/state-routing.js';
import { compilePartialAggregator } from '../execution/partial-aggregation.js';
import type { MicroBatchStream, Offset } from '../sources/source.js';
import type { PartitionBackends } from './partition-backends.js';
import { isMultiSource, type NamedSource, type QueryDefinition } from './query-definition.js';
import { sourceSchemaOf } from './validate-query.js';

/** An internal stream's source id in the plan and offsets of the stage reading it. */
export const REPARTITION_SOURCE_NAME = 'repartition';

/** A stage's name in progress, logs and summaries. */
export type StageKind = 'single' | 'source' | 'state';

/** A live source over one shard: records are offered to it by the invocation. */
export interface ShardSource extends MicroBatchStream {
  setCommitted(offset: Offset | null): void;
  offer(records: readonly ShardRecord[]): unknown;
  covers(start: Offset | null, end: Offset): boolean;
  /** What retention took from the planned batch `(start, end]`, from the shard's `read` alone (see KinesisShardSource's). */
  expiredPrefixOf?(start: Offset | null, end: Offset, read: readonly ShardRecord[]): ExpiredRecords | ExpiredInternalRecords | null;
  /** The planned batch runs without the recorded expired prefix from now on; false when the others are not all held. */
  runWithoutExpired?(start: Offset | null, end: Offset, recorded: ExpiredRecords): boolean;
  /** Stage 2: what the records a batch runs without carried (the senders' batches). */
  expiredLostSources?(start: Offset | null, end: Offset): readonly LostSourceBatches[];
  /** A re-drive run's records for a batch of their own (a Kinesis source shard only). */
  offerRedrive?(run: string, records: readonly ShardRecord[], seeded?: boolean): void;
}

/** One invocation's binding of the stage's source id to a live shard source. */
export interface StageBinding {
  readonly source: ShardSource;
  /** How this partition's watermark combines with the others' (undefined: this one alone). */
  readonly watermarks: WatermarkCoordinator | undefined;
  /** The records the source could not decode, for the dead-letter location. */
  deadLetters(): DeadLetterRecord[];
  /** The plan's other source ids, bound for this invocation (another stream's: empty; another hop input's view). */
  readonly otherSources?: readonly MicroBatchStream[];
}

/**
 * A source stream shard's partition id (checkpoint, watermark row, the `src` of its hop records):
 * the shard id for a one-stream query, as always; `<source>.<shard>` with several streams, whose
 * shard ids repeat.
 */
export function sourcePartitionId(definition: QueryDefinition, sourceName: string, shardId: string): string {
  return isMultiSource(definition) ? `${sourceName}.${shardId}` : shardId;
}

export abstract class QueryStage {
  abstract readonly kind: StageKind;
  /** The stream whose shards run this stage, and where its output goes. */
  abstract readonly reads: 'source-stream' | 'internal-stream';
  abstract readonly writes: 'sink' | 'internal-stream';
  /** The stage's position: 0 on the source stream, k on the shards of hop k-1. */
  abstract readonly index: number;
  /** The hop it reads (null: the source stream) and the one it writes (null: the sink). */
  readonly inputHop: Hop | null = null;
  readonly outputHop: Hop | null = null;
  /** The hop input a stage writing to a multi-input hop tags its records with (undefined: one input). */
  readonly hopInput: string | undefined = undefined;
  /** The source stream whose shards run this stage (its name in the definition); null for an internal stream. */
  readonly sourceName: string | null = null;
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

  /** The partition id a shard of this stage runs as (its watermark row, its sink batches' partition). */
  partitionId(shardId: string): string {
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
  readonly sourceId: string;
  override readonly sourceName: string;
  private readonly recordSchema: readonly StructField[];
  private readonly decode: RecordDecoder;
  private readonly eventTimeLimit: EventTimeLimit | undefined;
  /** The plan's other streams: bound to empty sources on this stream's shards. */
  private readonly otherStreams: readonly { name: string; schema: readonly StructField[] }[];

  constructor(
    private readonly definition: QueryDefinition, private readonly source: NamedSource, plan: LogicalPlan, columns: readonly string[],
    schema: readonly StructField[], outputMode: OutputMode, conf: ReadonlyMap<string, string>,
    /** The plan whose watermark the source's event-time check serves (the whole query's). */
    watermarkPlan: LogicalPlan = plan,
  ) {
    super(plan, columns, schema, outputMode, conf);
    this.sourceId = source.name;
    this.sourceName = source.name;
    this.recordSchema = sourceSchemaOf(source.spec);
    this.decode = createRecordDecoder(source.spec, this.recordSchema);
    this.eventTimeLimit = eventTimeLimitFor(watermarkPlan, source.name, conf);
    this.otherStreams = collectNodes(plan, (n): n is StreamingRelationNode => n.kind === 'StreamingRelation' && n.sourceId !== source.name)
      .map((n) => ({ name: n.sourceId, schema: n.schema }));
  }

  override checkpointPartition(shardId: string): string {
    return sourcePartitionId(this.definition, this.source.name, shardId);
  }

  override partitionId(shardId: string): string {
    return sourcePartitionId(this.definition, this.source.name, shardId);
  }

  bind(shardId: string, backends: PartitionBackends): StageBinding {
    const source = new KinesisShardSource({
      name: this.source.name,
      queryName: this.definition.name,
      shardId,
      schema: this.recordSchema,
      decode: this.decode,
      partitionKeyColumn: this.source.spec.partitionKey,
      eventTimeLimit: this.eventTimeLimit,
    });
    // Stage 1 has no watermark of its own either: publishing its progress lets the scheduled
    // handler confirm the shard idle and tell the state partitions.
    return {
      source, watermarks: backends.watermarks, deadLetters: () => source.deadLetters(),
      ...(this.otherStreams.length > 0 ? { otherSources: this.otherStreams.map((s) => new EmptySource(s.name, s.schema)) } : {}),
    };
  }
}

/** Another stream of the query, on a shard of this one: it has nothing here (its own shards read it). */
class EmptySource implements MicroBatchStream {
  constructor(readonly name: string, readonly schema: readonly StructField[]) {}
  initialOffset(): Offset | null { return null; }
  latestOffset(): Offset | null { return null; }
  getBatch(): unknown[][] { return []; }
  commit(): void {}
}

/** The whole query on a shard of the source stream. */
export class SingleStage extends SourceStreamStage {
  readonly kind = 'single';
  readonly index = 0;
  readonly writes = 'sink';

  constructor(
    definition: QueryDefinition, source: NamedSource, plan: LogicalPlan, columns: readonly string[], schema: readonly StructField[],
    conf: ReadonlyMap<string, string>, readonly isStateful: boolean,
  ) {
    super(definition, source, plan, columns, schema, definition.outputMode, conf);
  }
}

/** Stage 1 on a shard of the source stream: the stateless part, rows routed by state key. */
export class SourceStage extends SourceStreamStage {
  readonly kind = 'source';
  readonly writes = 'internal-stream';
  readonly isStateful = false;
  readonly index = 0;
  override readonly outputHop: Hop;
  override readonly hopInput: string | undefined;

  /** `plan`: stage 1 over `source`; `hopInput`: the tag of its records when the hop has several inputs. */
  constructor(
    definition: QueryDefinition, source: NamedSource, plan: LogicalPlan, hop: Hop, conf: ReadonlyMap<string, string>,
    wholePlan?: LogicalPlan, hopInput?: string,
  ) {
    const cut = hop.output.map((a) => ({ name: a.name, type: a.type }));
    super(definition, source, plan, cut.map((f) => f.name), cut, 'append', conf, wholePlan);
    this.outputHop = hop;
    this.hopInput = hopInput;
  }

  static ofPlannedStage(definition: QueryDefinition, source: NamedSource, planned: PlannedStage, conf: ReadonlyMap<string, string>, wholePlan?: LogicalPlan): SourceStage {
    return new SourceStage(definition, source, planned.plan(source.name), planned.output!, conf, wholePlan);
  }

  override label(shardId: string): string {
    return `stage 1 ${shardId}`;
  }
}

/**
 * Stage k ≥ 2 on a shard of the internal stream before it (a state partition): its stateful
 * operator(s), then the next hop, or the output mode and the sink.
 */
export class StateStage extends QueryStage {
  readonly kind = 'state';
  readonly reads = 'internal-stream';
  readonly writes: 'sink' | 'internal-stream';
  readonly isStateful = true;
  readonly sourceId = REPARTITION_SOURCE_NAME;
  readonly index: number;
  override readonly inputHop: Hop;
  override readonly outputHop: Hop | null;
  private readonly inputSchema: readonly StructField[];
  private readonly delayMs: number;
  /** The input hop's rows as partial aggregates, when its aggregate takes them (compiled once). */
  private readonly toPartialRows: ((rows: readonly (readonly unknown[])[]) => unknown[][]) | undefined;
  private readonly queryName: string;

  constructor(
    definition: QueryDefinition, planned: PlannedStage, columns: readonly string[], schema: readonly StructField[],
    conf: ReadonlyMap<string, string>,
  ) {
    const out = planned.output;
    // A stage before another hop writes its rows as they come out: append, whatever the query's mode.
    super(planned.plan(REPARTITION_SOURCE_NAME), out ? out.output.map((a) => a.name) : columns,
      out ? out.output.map((a) => ({ name: a.name, type: a.type })) : schema, out ? 'append' : definition.outputMode, conf);
    this.index = planned.index;
    this.queryName = definition.name;
    this.inputHop = planned.input!;
    this.outputHop = out;
    this.writes = out ? 'internal-stream' : 'sink';
    this.inputSchema = this.inputHop.output.map((a) => ({ name: a.name, type: a.type }));
    this.delayMs = this.inputHop.eventTime?.delayMs ?? 0;
    const partial = this.inputHop.partial;
    this.toPartialRows = partial ? compilePartialAggregator(partial, this.inputHop.eventTime?.ordinal ?? null).toPartialRows : undefined;
  }

  /** Stage-2 partitions live beside the source shards' partitions (`state.`, as before stages chained); later ones by number. */
  override checkpointPartition(shardId: string): string {
    return this.index === 1 ? `state.${shardId}` : `stage${this.index + 1}.${shardId}`;
  }

  override label(shardId: string): string {
    return `stage ${this.index + 1} ${shardId}`;
  }

  bind(shardId: string, backends: PartitionBackends): StageBinding {
    const hop = this.inputHop;
    const source = new RepartitionShardSource(REPARTITION_SOURCE_NAME, this.inputSchema, shardId, this.toPartialRows, undefined, (row, partial) => hashKeyOf(
      repartitionRoutingKey(partial ? hop.routingKeyPositions.map((p) => row[1 + p]) : hop.routingOrdinals.map((i) => row[i])),
    ), backends.channelNamespace, this.queryName);
    const { delayMs } = this;
    return {
      source,
      // The senders' watermarks arrive with their rows; batch N runs with what N-1 applied.
      watermarks: {
        combine: async () => source.committedWatermarkMs(delayMs, (await backends.sourcePartitions?.()) ?? []),
        publish: async () => {},
      },
      deadLetters: () => [],
    };
  }
}

/**
 * Stage 2 of a join or of a query over several streams, on a shard of the internal stream: one
 * view of the shard per hop input (each takes its input's records; all share the shard's
 * positions), and the watermark of each watermark operator from the source shards of the inputs
 * below it, combined by Spark's multiple-watermark policy.
 */
export class MultiInputStateStage extends QueryStage {
  readonly kind = 'state';
  readonly reads = 'internal-stream';
  readonly writes: 'sink' | 'internal-stream';
  readonly isStateful = true;
  readonly sourceId: string;
  readonly index = 1;
  /** Every input crosses the same internal stream (hop 1): the first input's view of it. */
  override readonly inputHop: Hop;
  /** Hop 2 when a stateful operator follows (join → aggregate), carrying this stage's watermark. */
  override readonly outputHop: Hop | null;
  private readonly policy: 'min' | 'max';

  constructor(
    private readonly definition: QueryDefinition, private readonly hop: MultiInputHopPlan, columns: readonly string[], schema: readonly StructField[],
    conf: ReadonlyMap<string, string>,
  ) {
    const out = hop.hops[1] ?? null;
    // A stage before another hop writes its rows as they come out: append, whatever the query's mode.
    super(hop.stage2(hopRelationId), out ? out.output.map((a) => a.name) : columns,
      out ? out.output.map((a) => ({ name: a.name, type: a.type })) : schema, out ? 'append' : definition.outputMode, conf);
    this.outputHop = out;
    this.writes = out ? 'internal-stream' : 'sink';
    this.sourceId = hopRelationId(hop.inputs[0]!.sourceId);
    this.inputHop = hopOfInput(hop, hop.inputs[0]!);
    this.policy = parseWatermarkPolicy(conf.get(WATERMARK_POLICY_CONF));
  }

  override checkpointPartition(shardId: string): string {
    return `state.${shardId}`;
  }

  override label(shardId: string): string {
    return `stage 2 ${shardId}`;
  }

  bind(shardId: string, backends: PartitionBackends): StageBinding {
    const views = new Map(this.hop.inputs.map((input) => [input.sourceId, new RepartitionShardSource(
      hopRelationId(input.sourceId), input.cutOutput.map((a) => ({ name: a.name, type: a.type })), shardId, undefined, input.sourceId,
      (row) => hashKeyOf(repartitionRoutingKey(input.routingOrdinals.map((i) => row[i]))), backends.channelNamespace, this.definition.name,
    )]));
    const [first, ...others] = [...views.values()];
    // Shard ids become partition ids (`<source>.<shard>`), a reshard's parents too.
    const knownPartitions = async (sourceName: string): Promise<(string | SourceShard)[]> =>
      ((await backends.sourcePartitions?.(sourceName)) ?? []).map((shard) => (typeof shard === 'string'
        ? sourcePartitionId(this.definition, sourceName, shard)
        : { id: sourcePartitionId(this.definition, sourceName, shard.id), parents: (shard.parents ?? []).map((p) => sourcePartitionId(this.definition, sourceName, p)) }));
    return {
      source: first!,
      otherSources: others,
      // Each source stream's watermarks arrive with its rows; batch N runs with what N-1 applied.
      watermarks: {
        combine: async () => {
          if (this.hop.watermarks.length === 0) return 0;
          const perOperator: number[] = [];
          for (const w of this.hop.watermarks) {
            const progress: Record<string, SourceProgress> = {};
            const known: (string | SourceShard)[] = [];
            for (const input of w.inputs) {
              Object.assign(progress, views.get(input)!.committedSources);
              known.push(...await knownPartitions(input));
            }
            perOperator.push(sourcesWatermarkMs(progress, w.delayMs, known));
          }
          return this.policy === 'min' ? Math.min(...perOperator) : Math.max(...perOperator);
        },
        publish: async () => {},
      },
      deadLetters: () => [],
    };
  }
}

/** Stage 2's source id for a hop input. */
export function hopRelationId(sourceName: string): string {
  return `${REPARTITION_SOURCE_NAME}.${sourceName}`;
}
