import { newAttribute, type Attribute } from '../plan/attribute.js';
import { isStreaming, type LogicalPlan, type StatefulProcessingNode } from '../plan/logical-plan.js';
import type {
  FlatMapGroupsWithStateFunction, GroupStateTimeout, MapGroupsWithStateFunction, OperatorOutputMode, Row,
  StatefulProcessor, TimeMode,
} from '../plan/stateful-processor.js';
import { parseDataType } from '../plan/data-types.js';
import { resolveName } from '../analysis/binder.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import { runBatchQuery } from '../runtime/batch-runner.js';
import { toSchema, type SchemaLike } from './schema.js';

export interface TransformWithStateOptions {
  /** The processor's output rows: `"user string, count long"` or a field list. */
  readonly outputSchema: SchemaLike;
  readonly timeMode?: TimeMode;
  readonly outputMode?: OperatorOutputMode;
  /** A static DataFrame grouped by the same key: one row per key, given to handleInitialState in the first batch. */
  readonly initialState?: KeyValueGroupedDataFrame<unknown>;
}

export interface FlatMapGroupsWithStateOptions {
  readonly outputSchema: SchemaLike;
  readonly outputMode: OperatorOutputMode;
  readonly timeout?: GroupStateTimeout;
  /** The state's type (Spark type string, e.g. 'struct<count:long>'): checked on update and on restart. */
  readonly stateSchema?: string;
}

export type MapGroupsWithStateOptions = Omit<FlatMapGroupsWithStateOptions, 'outputMode'>;

const TIME_MODES: readonly string[] = ['none', 'processingTime', 'eventTime'];

function checkChoice(what: string, value: string, allowed: readonly string[]): void {
  if (!allowed.includes(value)) {
    throw new IllegalArgumentError(`Unknown ${what} '${value}'.`, { code: 'UNKNOWN_OPTION', hint: `use one of ${allowed.join(', ')}.` });
  }
}

/**
 * Spark's KeyValueGroupedDataset over a DataFrame: `df.groupByKey('user')`. The key of each group
 * is the tuple of the key columns' values.
 */
export class KeyValueGroupedDataFrame<D = unknown> {
  readonly keys: readonly Attribute[];

  constructor(
    readonly plan: LogicalPlan,
    keyColumns: readonly string[],
    private readonly wrap: (plan: LogicalPlan) => D,
  ) {
    if (keyColumns.length === 0) {
      throw new IllegalArgumentError('groupByKey needs at least one key column.', { code: 'NO_GROUPING_KEY', hint: "name the key columns, e.g. groupByKey('user')." });
    }
    this.keys = keyColumns.map((c) => resolveName(c, plan.output).attribute);
  }

  /** Spark 4's transformWithState: a processor with state variables and timers, per key. */
  transformWithState(processor: StatefulProcessor | (() => StatefulProcessor), options: TransformWithStateOptions): D {
    const timeMode = options.timeMode ?? 'none';
    checkChoice('time mode', timeMode, TIME_MODES);
    const outputMode = options.outputMode ?? 'append';
    checkChoice('output mode for transformWithState', outputMode, ['append', 'update']);
    const factory = typeof processor === 'function' ? processor : () => processor;
    return this.node({
      api: 'transformWithState', timeMode, operatorOutputMode: outputMode, processor: factory, fn: null, stateType: null,
      initialState: options.initialState ? collectInitialState(options.initialState) : null,
    }, options.outputSchema);
  }

  flatMapGroupsWithState<S>(fn: FlatMapGroupsWithStateFunction<S>, options: FlatMapGroupsWithStateOptions): D {
    const timeout = options.timeout ?? 'none';
    checkChoice('timeout', timeout, TIME_MODES);
    checkChoice('output mode for flatMapGroupsWithState', options.outputMode, ['append', 'update']);
    if (options.stateSchema !== undefined) parseDataType(options.stateSchema);
    return this.node({
      api: 'flatMapGroupsWithState', timeMode: timeout, operatorOutputMode: options.outputMode, processor: null,
      fn: fn as FlatMapGroupsWithStateFunction<unknown>, stateType: options.stateSchema ?? null, initialState: null,
    }, options.outputSchema);
  }

  /** One output row per call (Spark runs it as flatMapGroupsWithState in update mode). */
  mapGroupsWithState<S>(fn: MapGroupsWithStateFunction<S>, options: MapGroupsWithStateOptions): D {
    const timeout = options.timeout ?? 'none';
    checkChoice('timeout', timeout, TIME_MODES);
    if (options.stateSchema !== undefined) parseDataType(options.stateSchema);
    const flat: FlatMapGroupsWithStateFunction<unknown> = (key, rows, state) => [fn(key, rows, state as never)];
    return this.node({
      api: 'mapGroupsWithState', timeMode: timeout, operatorOutputMode: 'update', processor: null, fn: flat,
      stateType: options.stateSchema ?? null, initialState: null,
    }, options.outputSchema);
  }

  private node(fields: Omit<StatefulProcessingNode, 'kind' | 'child' | 'keys' | 'output'>, outputSchema: SchemaLike): D {
    const output = toSchema(outputSchema).map((f) => newAttribute(f.name, f.type));
    const plan: StatefulProcessingNode = { kind: 'StatefulProcessing', child: this.plan, keys: this.keys, output, ...fields };
    return this.wrap(plan);
  }
}

/** Collects a static grouped DataFrame into (key, row) pairs, as Spark reads a batch initial state. */
function collectInitialState(grouped: KeyValueGroupedDataFrame<unknown>): { key: unknown[]; row: Row }[] {
  if (isStreaming(grouped.plan)) {
    throw new IllegalArgumentError(
      'Non-streaming DataFrame/Dataset is not supported as the initial state in transformWithState operation on a streaming DataFrame/Dataset',
      { code: 'STREAMING_INITIAL_STATE', errorClass: '_LEGACY_ERROR_TEMP_3102', hint: 'build the initial state from static data (createDataFrame or a batch read).' },
    );
  }
  const names = grouped.plan.output.map((a) => a.name);
  const keyIndexes = grouped.keys.map((k) => grouped.plan.output.findIndex((a) => a.id === k.id));
  return runBatchQuery(grouped.plan).map((values) => ({
    key: keyIndexes.map((i) => values[i]),
    row: Object.fromEntries(names.map((n, i) => [n, values[i]])),
  }));
}
