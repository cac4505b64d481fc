/**
 * The user-facing contracts of arbitrary stateful processing, as in Spark 4: `transformWithState`
 * (a StatefulProcessor with state variables and timers) and `[flat]mapGroupsWithState` (a function
 * with a GroupState). Types only: the engine's implementations are in lib/execution/stateful/.
 *
 * Rows are plain objects keyed by column name; a grouping key is the tuple of the key columns'
 * values. Times are milliseconds since the epoch (Spark's timer and timeout unit); timestamp column
 * values are microseconds, as everywhere in Sluice. State values must be JSON-like (objects, arrays,
 * strings, numbers, booleans, null, and bigint for a long beyond 2^53), because the deployed store
 * writes them to DynamoDB: a Map, a Set, a Date or a class instance is refused at update().
 */

export type Row = Record<string, unknown>;
export type GroupingKey = readonly unknown[];

/** Spark's TimeMode: which clock timers follow. */
export type TimeMode = 'none' | 'processingTime' | 'eventTime';
/** Spark's GroupStateTimeout. */
export type GroupStateTimeout = 'none' | 'processingTime' | 'eventTime';
/** The operator's own output mode (Spark passes it to the processor and checks it against the query's). */
export type OperatorOutputMode = 'append' | 'update';

export interface TimerValues {
  /** The batch timestamp (processing time), fixed for the batch and kept when it re-runs. */
  getCurrentProcessingTimeInMs(): number;
  /** The watermark for eviction of this batch (0 without a watermark). */
  getCurrentWatermarkInMs(): number;
}

export interface ExpiredTimerInfo {
  getExpiryTimeInMs(): number;
}

/** Options of a state variable: the declared value type (Spark type string) and a time-to-live. */
export interface StateVariableOptions {
  /** e.g. 'long', 'struct<count:long,start:timestamp>': values are checked against it on update. */
  readonly schema?: string;
  /** Time to live after each update, in ms or as an interval ('10 minutes'), measured in processing time. */
  readonly ttl?: number | string;
}

export interface ValueState<T> {
  exists(): boolean;
  /** The value, or undefined when there is none (or it expired). */
  get(): T | undefined;
  update(value: T): void;
  clear(): void;
}

export interface ListState<T> {
  exists(): boolean;
  get(): T[];
  put(values: readonly T[]): void;
  appendValue(value: T): void;
  appendList(values: readonly T[]): void;
  clear(): void;
}

export interface MapState<K, V> {
  exists(): boolean;
  getValue(key: K): V | undefined;
  containsKey(key: K): boolean;
  updateValue(key: K, value: V): void;
  /** Entries in the order of their keys. */
  iterator(): [K, V][];
  keys(): K[];
  values(): V[];
  removeKey(key: K): void;
  clear(): void;
}

export interface QueryInfo {
  readonly batchId: number;
}

/** Spark's StatefulProcessorHandle: state variables are created in init(); timers apply to the current key. */
export interface StatefulProcessorHandle {
  getValueState<T>(name: string, options?: StateVariableOptions): ValueState<T>;
  getListState<T>(name: string, options?: StateVariableOptions): ListState<T>;
  getMapState<K, V>(name: string, options?: StateVariableOptions & { readonly keySchema?: string }): MapState<K, V>;
  registerTimer(expiryTimestampMs: number): void;
  deleteTimer(expiryTimestampMs: number): void;
  /** The current key's timers, ascending (including one firing now). */
  listTimers(): number[];
  /** Removes every value of a state variable, for all keys (Spark drops its column family); call it in init() to retire a variable. */
  deleteIfExists(name: string): void;
  getQueryInfo(): QueryInfo;
}

/**
 * Spark's StatefulProcessor. `init` runs once when the query is analysed (to learn the state
 * variables, whose layout is checked against the checkpoint on restart) and at the start of every
 * batch; `close` at the end of every batch. The same instance may serve several batches: keep the
 * state in the state variables, not in fields.
 */
export interface StatefulProcessor<Out extends Row = Row, Init = Row> {
  init(handle: StatefulProcessorHandle, timeMode: TimeMode, outputMode: OperatorOutputMode): void;
  handleInputRows(key: GroupingKey, rows: readonly Row[], timerValues: TimerValues): Iterable<Out>;
  handleExpiredTimer?(key: GroupingKey, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo): Iterable<Out>;
  /** Called in the first batch for each row of the initial state (one per key). */
  handleInitialState?(key: GroupingKey, initialState: Init, timerValues: TimerValues): void;
  close?(): void;
}

/** Spark's GroupState, for [flat]mapGroupsWithState. */
export interface GroupState<S> {
  exists(): boolean;
  /** Throws when there is no state. */
  get(): S;
  getOption(): S | undefined;
  update(state: S): void;
  remove(): void;
  hasTimedOut(): boolean;
  /** Processing-time timeout: fires once the batch timestamp is past now + duration. */
  setTimeoutDuration(duration: number | string): void;
  /** Event-time timeout: fires once the watermark is past the timestamp (ms) (+ an optional interval). */
  setTimeoutTimestamp(timestampMs: number, additionalDuration?: string): void;
  getCurrentWatermarkMs(): number;
  getCurrentProcessingTimeMs(): number;
}

export type FlatMapGroupsWithStateFunction<S, Out extends Row = Row> =
  (key: GroupingKey, rows: readonly Row[], state: GroupState<S>) => Iterable<Out>;
export type MapGroupsWithStateFunction<S, Out extends Row = Row> =
  (key: GroupingKey, rows: readonly Row[], state: GroupState<S>) => Out;
