/**
 * Everything that can be checked about a deployable query without running it: the query shape
 * against its output mode (Spark's analyzer), the sink against the output mode, the result key a
 * DynamoDB sink upserts by, and whether its state is co-partitioned with the Kinesis stream. The
 * Lambda handlers run this before touching a checkpoint, and `cdk synth` runs it so that nothing
 * unsupported is deployed.
 */
import { deployedTrigger } from './deployed-trigger.js';
/** The construct maps the query's trigger onto its event source mapping and schedule from here. */
export { deployedTrigger, MAX_BATCHING_WINDOW_SECONDS, type DeployedTrigger } from './deployed-trigger.js';
import { checkStreamingQuery } from '../analysis/unsupported-operation-checker.js';
import { statefulKeyReport } from '../analysis/partitioning.js';
import { isStatefulOperator } from '../analysis/stateful-operators.js';
import { planStages, type Hop, type PlannedStage, type StagePlan } from '../analysis/stages.js';
import { planMultiInputHop, type MultiInputHopPlan } from '../analysis/multi-input-stages.js';
import type { StructField } from '../plan/data-types.js';
import { collectNodes, type AggregateNode, type DeduplicateNode, type LogicalPlan, type StatefulProcessingNode } from '../plan/logical-plan.js';
import { AnalysisError } from '../errors/sluice-error.js';
import { renderTree } from '../analysis/explain.js';
import type { DataFrame } from '../api/data-frame.js';
import { SluiceSession, toSchema } from '../api/session.js';
import { checkSinkOutputMode } from '../sinks/sink-output-modes.js';
import { checkFilesSink, explainLakeTable, lakeTableShapeOf, type LakeTableShape } from './files-sink-check.js';

export type { LakeColumn, LakeTableShape } from './files-sink-check.js';
import {
  checkQueryDefinition, isMultiSource, SINGLE_SOURCE_NAME, sourcesOf, type KinesisSourceSpec, type QueryDefinition,
} from './query-definition.js';

/** The source id of the Kinesis stream in a deployed single-stream query's plan (and its offsets). */
export const KINESIS_SOURCE_NAME = SINGLE_SOURCE_NAME;

export function sourceSchemaOf(spec: KinesisSourceSpec): StructField[] {
  return spec.format === 'raw' ? [{ name: 'value', type: 'string' }] : toSchema(spec.schema);
}

export interface ValidatedQuery {
  readonly definition: QueryDefinition;
  readonly session: SluiceSession;
  readonly df: DataFrame;
  readonly columns: readonly string[];
  readonly schema: readonly StructField[];
  /** Result columns a DynamoDB sink keys items by ([] = append-only rows, keyed by batch and position). */
  readonly keyColumns: readonly string[];
  readonly isStateful: boolean;
  /** State keys are not co-partitioned with the stream: the query runs in two stages. */
  readonly needsRepartition: boolean;
  /** The chain of stages of a single-stream query, when `needsRepartition` (and it is not multi-input). */
  readonly repartition: StagePlan | null;
  /** The two stages of a join or of a query over several streams, when `needsRepartition`. */
  readonly hop: MultiInputHopPlan | null;
  /** The files sink's output as a catalog table (columns, partition keys), or null for other sinks. */
  readonly lakeTable: LakeTableShape | null;
}

/**
 * `'false'` ships every row over the first hop instead of one partial aggregate per group and
 * batch (for comparison; Spark always aggregates partially before a shuffle).
 */
export const PARTIAL_AGGREGATION_CONF = 'sluice.repartition.partialAggregation';

export interface ValidateOptions {
  /** Shards of the source stream when known; 1 lets a stateful query run without a partition key. */
  readonly expectedShardCount?: number;
  /**
   * The deployment has a repartition stage (an internal stream): a query whose state is not
   * co-partitioned with the stream runs in two stages instead of being refused.
   */
  readonly allowRepartition?: boolean;
}

export function validateQuery(definition: QueryDefinition, options: ValidateOptions = {}): ValidatedQuery {
  checkQueryDefinition(definition);
  const session = new SluiceSession({ ...(definition.conf ?? {}) });
  // The plan names each stream by id only: each run binds it to a live source.
  const df = isMultiSource(definition)
    ? definition.transform(Object.fromEntries(sourcesOf(definition).map((s) => [s.name, session.streamingRelation(s.name, sourceSchemaOf(s.spec))])), session)
    : definition.transform(session.streamingRelation(KINESIS_SOURCE_NAME, sourceSchemaOf(definition.source)), session);
  if (!df || typeof df !== 'object' || !('plan' in df)) {
    throw new AnalysisError(`The transform of query '${definition.name}' did not return a DataFrame.`, {
      code: 'TRANSFORM_NOT_DATAFRAME', hint: 'return the result DataFrame from transform(events, session).',
    });
  }
  checkStreamingQuery(df.plan, definition.outputMode, session.conf);
  checkSinkOutputMode(definition.sink.kind, definition.outputMode);
  const schema = df.plan.output.map((a) => ({ name: a.name, type: a.type }));
  checkFilesSink(definition, schema);
  const { isStateful, coPartitioned } = checkCoPartitioning(definition, df.plan, options.expectedShardCount, options.allowRepartition === true);
  // Joins and queries over several streams cross one hop with several inputs (multi-input-stages.ts);
  // single-stream queries of aggregations, deduplications and state processors chain (stages.ts).
  const multiInput = isMultiSource(definition) || collectNodes(df.plan, (n): n is LogicalPlan => n.kind === 'Join' && isStatefulOperator(n)).length > 0;
  const hop = coPartitioned || !multiInput ? null : planMultiInputHop(df.plan);
  const repartition = coPartitioned || multiInput ? null : planStages(df.plan, {
    partialAggregation: session.conf.get(PARTIAL_AGGREGATION_CONF)?.toLowerCase() !== 'false',
  });
  return {
    definition,
    session,
    df,
    columns: df.columns,
    schema,
    keyColumns: resultKeyColumns(definition, df),
    isStateful,
    needsRepartition: repartition !== null || hop !== null,
    repartition,
    hop,
    lakeTable: lakeTableShapeOf(definition, schema),
  };
}

function checkCoPartitioning(
  definition: QueryDefinition, plan: LogicalPlan, expectedShardCount: number | undefined, allowRepartition: boolean,
): { isStateful: boolean; coPartitioned: boolean } {
  for (const { name, spec } of sourcesOf(definition)) {
    const key = spec.partitionKey;
    if (key !== undefined && !sourceSchemaOf(spec).some((f) => f.name.toLowerCase() === key.toLowerCase())) {
      const where = isMultiSource(definition) ? `source '${name}'` : 'the source';
      throw new AnalysisError(`The declared partition key '${key}' is not a column of the schema of ${where}.`, {
        code: 'UNKNOWN_PARTITION_KEY', hint: 'set partitionKey to the source column the producer uses as the Kinesis partition key.',
      });
    }
  }
  if (isMultiSource(definition)) {
    const operators = statefulKeyReport(plan, undefined);
    if (operators.length === 0) return { isStateful: false, coPartitioned: true };
    if (allowRepartition) return { isStateful: true, coPartitioned: false };
    // Two streams' shards are separate triggers: state shared between them lives on the hop's side.
    throw new AnalysisError(
      `Stateful operator ${operators[0]!.operator} reads several source streams (${sourcesOf(definition).map((s) => s.name).join(', ')}), `
      + 'whose shards run as separate triggers: its state must be shared behind a repartition stage.',
      {
        code: 'STATE_NOT_CO_PARTITIONED',
        hint: 'deploy with a repartition stage (the SluiceQuery construct adds the internal stream by default; `sluice explain` with allowRepartition).',
        context: { operator: operators[0]!.operator, keys: operators[0]!.keys },
      },
    );
  }
  const partitionKey = definition.source.partitionKey;
  const reports = statefulKeyReport(plan, partitionKey);
  if (expectedShardCount === 1) return { isStateful: reports.length > 0, coPartitioned: true };
  const offending = reports.find((r) => !r.coPartitioned);
  if (offending && allowRepartition) return { isStateful: true, coPartitioned: false };
  if (offending) {
    const keys = offending.keys.length > 0 ? `[${offending.keys.join(', ')}]` : 'no key (a global aggregate)';
    const declared = partitionKey === undefined
      ? 'the stream\'s partition key is not declared'
      : `the stream is partitioned by '${partitionKey}', which is not among these keys`;
    throw new AnalysisError(
      `Stateful operator ${offending.operator} keys its state by ${keys}, but ${declared}. On a stream with several shards, `
      + 'rows of one key can arrive on different shards, and each shard would keep a partial result: the answer would be wrong.',
      {
        code: 'STATE_NOT_CO_PARTITIONED',
        hint: 'have the producer use one of the key columns as the Kinesis partition key and declare it with '
          + "source: { partitionKey: '<column>' }; or run on a one-shard stream (expectedShardCount: 1); "
          + 'or deploy with a repartition stage (an internal stream that routes rows by the state key; the SluiceQuery construct adds it by default).',
        context: { operator: offending.operator, keys: offending.keys },
      },
    );
  }
  return { isStateful: reports.length > 0, coPartitioned: true };
}

/** The DynamoDB sink's item key: declared, else the grouping (or dedup) columns that reach the output. */
function resultKeyColumns(definition: QueryDefinition, df: DataFrame): string[] {
  if (definition.sink.kind !== 'dynamodb') return [];
  const output = df.plan.output;
  if (definition.sink.keyColumns) {
    const missing = definition.sink.keyColumns.filter((k) => !output.some((a) => a.name === k));
    if (missing.length > 0) {
      throw new AnalysisError(`Key column(s) ${missing.join(', ')} of the DynamoDB sink are not columns of the result [${df.columns.join(', ')}].`, {
        code: 'UNKNOWN_SINK_KEY', hint: 'list result column names in sink.keyColumns.',
      });
    }
    return [...definition.sink.keyColumns];
  }
  const keyed = collectNodes(df.plan, (n): n is AggregateNode | DeduplicateNode => n.kind === 'Aggregate' || n.kind === 'Deduplicate')[0];
  if (keyed) {
    const keyAttributes = keyed.kind === 'Aggregate' ? keyed.output.slice(0, keyed.groupingExprs.length) : keyed.keys;
    const inOutput = output.filter((a) => keyAttributes.some((k) => k.id === a.id));
    if (inOutput.length === keyAttributes.length) return inOutput.map((a) => a.name);
  }
  if (definition.outputMode === 'append') return [];
  throw new AnalysisError(`Cannot tell which result columns identify a row of query '${definition.name}' for the DynamoDB sink.`, {
    code: 'SINK_KEY_REQUIRED', hint: 'set sink.keyColumns to the result columns that identify a row (the grouping columns, window included).',
  });
}


/**
 * `explain()` for a deployable query: the plan, the incremental plan, and where the query is cut
 * into a repartition stage (what runs on the source shards, how rows are routed, what runs on the
 * state partitions).
 */
export function explainQuery(definition: QueryDefinition, options: ValidateOptions = {}): string {
  const validated = validateQuery(definition, options);
  const lines = [validated.df.explain(definition.outputMode)];
  if (validated.lakeTable) lines.push(...explainLakeTable(definition, validated.lakeTable));
  lines.push('== Trigger ==', deployedTrigger(definition.trigger).description);
  if (validated.hop) {
    lines.push(...explainHop(definition, validated.hop, validated.session.conf));
    return lines.join('\n');
  }
  const split = validated.repartition;
  if (!split) {
    lines.push('== Stages ==', 'one stage: the state is co-partitioned with the stream (or the query is stateless); no repartition hop.');
    return lines.join('\n');
  }
  lines.push('== Stages ==');
  for (const stage of split.stages) lines.push(...explainStage(definition, stage));
  return lines.join('\n');
}

function routingText(hop: Hop): string {
  return hop.routingColumns.length > 0 ? `[${hop.routingColumns.join(', ')}]` : 'nothing (every row to one partition)';
}

/** One stage of a chain (and the hop it writes): where it runs, its operators, where its rows go. */
function explainStage(definition: QueryDefinition, stage: PlannedStage): string[] {
  const lines: string[] = [];
  const hop = stage.output;
  const ops = stage.operators.map((o) => `${o.kind} by [${o.keys.join(', ')}]`).join(', then ');
  const where = stage.index === 0 ? 'each source shard' : `each shard of internal stream ${stage.index} = a state partition`;
  const what = stage.index === 0 ? 'decode, then the stateless part' : ops;
  const to = hop ? `rows routed by ${routingText(hop)} to internal stream ${hop.index + 1}` : `output mode ${definition.outputMode}, sink ${definition.sink.kind}`;
  lines.push(`Stage ${stage.index + 1} (${where}): ${what}${stage.index === 0 ? ';' : ','} ${to}.`);
  if (stage.index === 0) lines.push(...renderTree(stage.plan(KINESIS_SOURCE_NAME)).map((l) => `  ${l}`));
  if (hop) lines.push(hopBoundary(stage.index, hop));
  return lines;
}

function hopBoundary(senderIndex: number, hop: Hop): string {
  const carried = hop.carries === 'max-event-time'
    ? `source watermarks travel with the rows${hop.eventTime ? ` (event time ${hop.output[hop.eventTime.ordinal]!.name}, delay ${hop.eventTime.delayMs} ms)` : ''}`
    : `stage ${senderIndex + 1}'s output watermark travels with its rows: stage ${senderIndex + 2} evicts with the minimum over its senders and drops rows behind the previous batch's (Spark's chained-operator watermark)`;
  return `---- repartition boundary ${hop.index + 1}: internal Kinesis stream, one record per partition per batch; ${carried} ----`;
}

/** Which of an input's own columns route it. */
function inputRouting(input: MultiInputHopPlan['inputs'][number]): string {
  const columns = input.routingOrdinals.map((o) => input.cutOutput[o]!.name);
  const own = columns.length > 0 ? ` (its ${columns.join(', ')})` : ' (one partition)';
  return own;
}

function explainHop(definition: QueryDefinition, hop: MultiInputHopPlan, conf: ReadonlyMap<string, string>): string[] {
  const routing = hop.routingColumns.length > 0 ? `[${hop.routingColumns.join(', ')}]` : 'nothing (every row to one state partition)';
  const policy = conf.get('spark.sql.streaming.multipleWatermarkPolicy') ?? 'min';
  const next = hop.hops[1] ?? null;
  return [
    '== Stages ==',
    ...hop.inputs.flatMap((input) => [
      `Stage 1 (each shard of ${input.sourceId}): decode, then the stateless part; rows routed by ${routing}${inputRouting(input)} to the internal stream, tagged '${input.sourceId}'`
      + `${input.eventTimeOrdinal !== null ? `, max event time of ${input.cutOutput[input.eventTimeOrdinal]!.name} with them` : ''}`
      + `${input.forwarded ? '; stage 2 forwards them unchanged to the join behind internal stream 2' : ''}.`,
      ...renderTree(input.stage1).map((l) => `  ${l}`),
    ]),
    '---- repartition boundary: internal Kinesis stream, one record per input, state partition and batch; each stream\'s shard watermarks travel with its rows ----',
    `Stage 2 (each internal shard = a state partition): ${hop.stage2Operators.map((o) => `${o.kind} by [${o.keys.join(', ')}]`).join(', then ')}, `
    + `${next ? `rows routed by ${routingText(next)} to internal stream 2` : `output mode ${definition.outputMode}, sink ${definition.sink.kind}`}.`,
    ...(hop.watermarks.length > 0
      ? [`  watermark: ${hop.watermarks.map((w) => `min over the shards of [${w.inputs.join(', ')}] minus ${w.delayMs} ms`).join('; ')}; combined by the ${policy} policy (spark.sql.streaming.multipleWatermarkPolicy).`]
      : []),
    ...(next ? [hopBoundary(1, next)] : []),
    ...hop.later.flatMap((stage) => explainStage(definition, stage)),
  ];
}
