/**
 * A deployable query compiled once per container: the definition analysed and validated (the
 * analyzer against the output mode, the sink against the mode, the result key, co-partitioning),
 * cut into its stages, each with its plan, output, pruned columns and runtime checks. Every
 * invocation, the scheduled handler and `sluice dev` reuse it and only bind live sources (Spark's
 * MicroBatchExecution analyses once per run, not per batch). The plans name their sources by id
 * and hold no live object, so one compiled query serves any number of invocations.
 */
import type { Hop, StagePlan } from '../analysis/stages.js';
import type { StructField } from '../plan/data-types.js';
import type { LogicalPlan } from '../plan/logical-plan.js';
import { AnalysisError } from '../errors/sluice-error.js';
import type { QueryDefinition } from './query-definition.js';
import { MultiInputStateStage, SingleStage, SourceStage, StateStage, type QueryStage } from './query-stage.js';
import { hopOfInput, type MultiInputHopPlan } from '../analysis/multi-input-stages.js';
import { sourcesOf } from './query-definition.js';
import { validateQuery, type ValidateOptions } from './validate-query.js';

export type CompileOptions = ValidateOptions;

export class CompiledQuery {
  /** What the (first) source stream's shards run: the whole query, or stage 1 of a repartition stage. */
  readonly sourceStage: QueryStage;
  /** What each source stream's shards run, in the definition's order (one entry for a one-stream query). */
  readonly sourceStages: readonly QueryStage[];
  /** Stage 2, on the first internal stream's shards; null when the query runs in one stage. */
  readonly stateStage: QueryStage | null;
  /** Every stage in order: the source stages, then stage k + 1 reading hop k. */
  readonly stages: readonly QueryStage[];
  /** The hops between the stages ([] for one stage); a multi-input hop as its first input's view. */
  readonly hops: readonly Hop[];

  constructor(
    readonly definition: QueryDefinition,
    /** The analysed plan of the whole query (its streams named by id). */
    readonly plan: LogicalPlan,
    readonly conf: ReadonlyMap<string, string>,
    readonly columns: readonly string[],
    readonly schema: readonly StructField[],
    /** Result columns a DynamoDB sink keys items by ([] = append-only rows). */
    readonly keyColumns: readonly string[],
    readonly isStateful: boolean,
    /** The chain of stages of a single-stream query, when its state is not co-partitioned with the stream. */
    readonly repartition: StagePlan | null,
    /** The two stages of a join or a query over several streams, when they need the hop. */
    readonly hop: MultiInputHopPlan | null = null,
  ) {
    const sources = sourcesOf(definition);
    if (repartition) {
      const [first, ...rest] = repartition.stages;
      const stateStages = rest.map((s) => new StateStage(definition, s, columns, schema, conf));
      this.sourceStages = [SourceStage.ofPlannedStage(definition, sources[0]!, first!, conf, plan)];
      this.stages = [...this.sourceStages, ...stateStages];
      this.stateStage = stateStages[0] ?? null;
      this.hops = repartition.hops;
    } else if (hop) {
      this.sourceStages = sources.map((source) => {
        const input = hop.inputs.find((i) => i.sourceId === source.name);
        if (!input) throw unusedSource(definition.name, source.name);
        return new SourceStage(definition, source, input.stage1, hopOfInput(hop, input), conf, plan, input.sourceId);
      });
      const stateStage = new MultiInputStateStage(definition, hop, columns, schema, conf);
      // A chain above the join (join → aggregate): later stages read hops 2, 3, … like a single stream's.
      const later = hop.later.map((s) => new StateStage(definition, s, columns, schema, conf));
      this.stages = [...this.sourceStages, stateStage, ...later];
      this.stateStage = stateStage;
      this.hops = [stateStage.inputHop, ...hop.hops.slice(1)];
    } else {
      this.sourceStages = sources.map((source) => new SingleStage(definition, source, plan, columns, schema, conf, isStateful));
      this.stages = this.sourceStages;
      this.stateStage = null;
      this.hops = [];
    }
    this.sourceStage = this.sourceStages[0]!;
  }

  /** The stage that reads hop `index`. */
  stageReadingHop(index: number): QueryStage {
    const stage = this.stages.find((s) => s.inputHop?.index === index);
    if (stage) return stage;
    throw new AnalysisError(`Query '${this.name}' has no stage reading internal stream ${index + 1}: it has ${this.hops.length}.`, {
      code: 'NO_REPARTITION_STAGE', hint: 'deploy the query again: the internal streams and the query\'s plan of stages disagree.',
    });
  }

  /** The stage a source stream's shards run (by its name in the definition). */
  sourceStageOf(sourceName: string): QueryStage {
    const stage = this.sourceStages.find((s) => s.sourceName === sourceName);
    if (stage) return stage;
    throw new AnalysisError(`Query '${this.name}' has no source named '${sourceName}' (its sources: ${this.sourceStages.map((s) => s.sourceName).join(', ')}).`, {
      code: 'UNKNOWN_SOURCE', hint: 'map each deployed stream to a source name of the definition (SLUICE_SOURCE_STREAMS).',
    });
  }

  get name(): string {
    return this.definition.name;
  }

  get needsRepartition(): boolean {
    return this.repartition !== null || this.hop !== null;
  }

  /** Stage 2, or a clear refusal for a query that has none. */
  requireStateStage(): QueryStage {
    if (this.stateStage) return this.stateStage;
    throw new AnalysisError(`Query '${this.name}' has no repartition stage: its state is co-partitioned with the stream.`, {
      code: 'NO_REPARTITION_STAGE', hint: 'the source stream\'s shards run the whole query: remove the repartition function, or check the query\'s source.partitionKey.',
    });
  }
}

/** The query as given to a handler factory: a definition (compiled at cold start), or already compiled. */
export type DeployableQuery = QueryDefinition | CompiledQuery;

/**
 * Compiles a handler's query at cold start with what the deployment allows: a repartition stage
 * exactly when it has the internal stream. An already compiled query is reused as it is.
 */
export function compileForDeployment(
  query: DeployableQuery,
  deployment: { readonly expectedShardCount?: number; readonly repartitionStreamName?: string; readonly repartitionStreamNames?: readonly string[] },
): CompiledQuery {
  if (query instanceof CompiledQuery) return query;
  const compiled = compileQuery(query, { expectedShardCount: deployment.expectedShardCount, allowRepartition: deployment.repartitionStreamName !== undefined });
  const streams = internalStreamNames(deployment);
  if (compiled.hops.length > streams.length) {
    const blocking = compiled.hops[streams.length]!.operator;
    throw new AnalysisError(
      `Query '${compiled.name}' needs ${compiled.hops.length} internal streams (one before each stateful operator not co-partitioned with its input), `
      + `but the deployment has ${streams.length}: ${blocking.kind} by [${blocking.keys.join(', ')}] has no stream to read.`,
      { code: 'REPARTITION_STREAMS_MISSING', hint: 'deploy with the SluiceQuery construct, which creates one internal stream per hop (SLUICE_REPARTITION_STREAMS lists them).' },
    );
  }
  return compiled;
}

/** The deployment's internal streams, hop 1 first. */
export function internalStreamNames(deployment: { readonly repartitionStreamName?: string; readonly repartitionStreamNames?: readonly string[] }): readonly string[] {
  if (deployment.repartitionStreamNames && deployment.repartitionStreamNames.length > 0) return deployment.repartitionStreamNames;
  return deployment.repartitionStreamName ? [deployment.repartitionStreamName] : [];
}

/**
 * Analyses and validates `definition` once (nothing is read or written if it is refused) and
 * returns what every invocation reuses.
 */
export function compileQuery(definition: QueryDefinition, options: CompileOptions = {}): CompiledQuery {
  const v = validateQuery(definition, options);
  return new CompiledQuery(definition, v.df.plan, v.session.conf, v.columns, v.schema, v.keyColumns, v.isStateful, v.repartition, v.hop);
}

function unusedSource(query: string, source: string): AnalysisError {
  return new AnalysisError(`Source '${source}' of query '${query}' is declared but its stream is not read by the transform.`, {
    code: 'UNUSED_SOURCE', hint: 'remove the source from definition.sources, or use it in the transform.',
  });
}
