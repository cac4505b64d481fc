import { intervalToDelayMs, parseInterval } from '../../plan/intervals.js';
import { parseDataType, typeToString, type DataType } from '../../plan/data-types.js';
import type {
  ListState, MapState, QueryInfo, StatefulProcessorHandle, StateVariableOptions, TimeMode, ValueState,
} from '../../plan/stateful-processor.js';
import { IllegalArgumentError } from '../../errors/sluice-error.js';
import { compareValues, encodeKey } from '../values.js';
import { isExpired, stateKeys, type KeyedState, type StoredList, type StoredMapEntry, type StoredValue } from './keyed-state.js';
import { readableValue, storableValue } from './state-values.js';

/** Spark's StatefulProcessorHandleState. */
export type HandleState = 'PRE_INIT' | 'INITIALIZED' | 'DATA_PROCESSED' | 'TIMER_PROCESSED' | 'CLOSED';

export interface StateVariableSpec {
  readonly name: string;
  readonly kind: 'value' | 'list' | 'map';
  readonly type: DataType | null;
  readonly keyType: DataType | null;
  readonly ttlMs: number | null;
}

/** `count:value<long>`, `events:list<string,ttl=60000>`: the layout checked against the checkpoint. */
export function describeVariable(v: StateVariableSpec): string {
  const types = [v.keyType, v.type].filter((t) => t !== null).map((t) => typeToString(t!));
  return `${v.name}:${v.kind}<${[...(types.length ? types : ['any']), ...(v.ttlMs !== null ? [`ttl=${v.ttlMs}`] : [])].join(';')}>`;
}

function handleError(errorClass: string, message: string, hint: string): IllegalArgumentError {
  return new IllegalArgumentError(`[${errorClass}] ${message}`, { code: errorClass, errorClass, hint });
}

function ttlMsOf(options: StateVariableOptions | undefined, name: string, operation: string): number | null {
  if (options?.ttl === undefined) return null;
  const ms = typeof options.ttl === 'number' ? options.ttl : intervalToDelayMs(parseInterval(options.ttl));
  if (!(ms > 0)) {
    throw handleError('STATEFUL_PROCESSOR_TTL_DURATION_MUST_BE_POSITIVE',
      `TTL duration must be greater than zero for State store operation=${operation} on state=${name}.`, 'give a positive ttl, e.g. "10 minutes".');
  }
  return ms;
}

/**
 * Spark's StatefulProcessorHandleImpl: creates the state variables (in init), and scopes them and
 * the timers to the grouping key whose rows or timer are being handled. Without a KeyedState it
 * only records the variables (the analysis-time pass that learns the state layout).
 */
export class ProcessorHandle implements StatefulProcessorHandle {
  phase: HandleState = 'PRE_INIT';
  readonly variables: StateVariableSpec[] = [];
  private current: { key: string; keyValues: readonly unknown[] } | null = null;
  readonly metrics = { numRegisteredTimers: 0, numDeletedTimers: 0, numValuesRemovedDueToTTLExpiry: 0 };

  constructor(readonly timeMode: TimeMode, readonly batchId: number, readonly state: KeyedState | null) {}

  setKey(key: string, keyValues: readonly unknown[]): void {
    this.current = { key, keyValues };
  }

  clearKey(): void {
    this.current = null;
  }

  /** The grouping key being handled; state and timer operations need one. */
  requireKey(operation: string): { key: string; keyValues: readonly unknown[]; state: KeyedState } {
    if (!this.current || !this.state) {
      throw handleError('STATEFUL_PROCESSOR_CANNOT_PERFORM_OPERATION_WITH_INVALID_HANDLE_STATE',
        `Failed to perform stateful processor operation=${operation} with invalid handle state=${this.phase}.`,
        'use state variables and timers inside handleInputRows, handleExpiredTimer or handleInitialState, not in init or close.');
    }
    return { ...this.current, state: this.state };
  }

  get batchTimestampMs(): number {
    return this.state?.batchTimestampMs ?? 0;
  }

  private declare(kind: StateVariableSpec['kind'], name: string, options: (StateVariableOptions & { keySchema?: string }) | undefined): StateVariableSpec {
    const operation = `get_${kind}_state`;
    if (this.phase !== 'PRE_INIT' && this.phase !== 'INITIALIZED') {
      throw handleError('STATEFUL_PROCESSOR_CANNOT_PERFORM_OPERATION_WITH_INVALID_HANDLE_STATE',
        `Failed to perform stateful processor operation=${operation} with invalid handle state=${this.phase}.`, 'create state variables in init().');
    }
    if (!/^[A-Za-z0-9_.-]+$/.test(name)) {
      throw new IllegalArgumentError(`Invalid state variable name '${name}'.`, { code: 'INVALID_STATE_NAME', hint: 'use letters, digits, _ . and -.' });
    }
    if (this.variables.some((v) => v.name === name)) {
      throw handleError('STATEFUL_PROCESSOR_DUPLICATE_STATE_VARIABLE_DEFINED',
        `State variable with name ${name} has already been defined in the StatefulProcessor.`, 'give each state variable its own name.');
    }
    const spec: StateVariableSpec = {
      name, kind,
      type: options?.schema !== undefined ? parseDataType(options.schema) : null,
      keyType: options?.keySchema !== undefined ? parseDataType(options.keySchema) : null,
      ttlMs: ttlMsOf(options, name, operation),
    };
    this.variables.push(spec);
    return spec;
  }

  getValueState<T>(name: string, options?: StateVariableOptions): ValueState<T> {
    return new ValueStateImpl<T>(this, this.declare('value', name, options));
  }

  getListState<T>(name: string, options?: StateVariableOptions): ListState<T> {
    return new ListStateImpl<T>(this, this.declare('list', name, options));
  }

  getMapState<K, V>(name: string, options?: StateVariableOptions & { readonly keySchema?: string }): MapState<K, V> {
    return new MapStateImpl<K, V>(this, this.declare('map', name, options));
  }

  private checkTimeMode(operation: string): void {
    if (this.timeMode === 'none') {
      throw handleError('STATEFUL_PROCESSOR_CANNOT_PERFORM_OPERATION_WITH_INVALID_TIME_MODE',
        `Failed to perform stateful processor operation=${operation} with invalid timeMode=NoTime`,
        "timers need timeMode 'processingTime' or 'eventTime' in transformWithState's options.");
    }
  }

  registerTimer(expiryTimestampMs: number): void {
    this.checkTimeMode('register_timer');
    const { key, keyValues, state } = this.requireKey('register_timer');
    if (!Number.isSafeInteger(expiryTimestampMs)) {
      throw new IllegalArgumentError(`Timer timestamp ${expiryTimestampMs} is not a whole number of milliseconds.`, { code: 'INVALID_TIMER', hint: 'pass epoch milliseconds.' });
    }
    if (state.registerTimer(key, keyValues, expiryTimestampMs)) this.metrics.numRegisteredTimers++;
  }

  deleteTimer(expiryTimestampMs: number): void {
    this.checkTimeMode('delete_timer');
    const { key, state } = this.requireKey('delete_timer');
    if (state.deleteTimer(key, expiryTimestampMs)) this.metrics.numDeletedTimers++;
  }

  listTimers(): number[] {
    this.checkTimeMode('list_timers');
    const { key, state } = this.requireKey('list_timers');
    return state.listTimers(key);
  }

  /** Removes every value of the variable `name`, for all keys (Spark drops the column family). */
  deleteIfExists(name: string): void {
    if (!this.state) return;
    const prefixes = [`v|${name}|`, `l|${name}|`, `m|${name}|`];
    const doomed: string[] = [];
    for (const [storeKey] of this.state.store.entries()) if (prefixes.some((p) => storeKey.startsWith(p))) doomed.push(storeKey);
    for (const storeKey of doomed) this.state.remove(storeKey);
  }

  getQueryInfo(): QueryInfo {
    return { batchId: this.batchId };
  }

  expiresAt(spec: StateVariableSpec): number | null {
    return spec.ttlMs === null ? null : this.batchTimestampMs + spec.ttlMs;
  }
}

class ValueStateImpl<T> implements ValueState<T> {
  constructor(private readonly handle: ProcessorHandle, private readonly spec: StateVariableSpec) {}

  private storeKey(operation: string): { storeKey: string; keyValues: readonly unknown[]; state: KeyedState } {
    const { key, keyValues, state } = this.handle.requireKey(operation);
    return { storeKey: stateKeys.value(this.spec.name, key), keyValues, state };
  }

  exists(): boolean {
    return this.get() !== undefined;
  }

  get(): T | undefined {
    const { storeKey, state } = this.storeKey('value_get');
    const stored = state.get(storeKey) as StoredValue | undefined;
    if (!stored || isExpired(stored[2], state.batchTimestampMs)) return undefined;
    return readableValue(stored[1] as T);
  }

  update(value: T): void {
    const { storeKey, keyValues, state } = this.storeKey('value_update');
    state.put(storeKey, [keyValues, storableValue(value, this.spec.name, this.spec.type), this.handle.expiresAt(this.spec)] satisfies StoredValue);
  }

  clear(): void {
    const { storeKey, state } = this.storeKey('value_clear');
    state.remove(storeKey);
  }
}

class ListStateImpl<T> implements ListState<T> {
  constructor(private readonly handle: ProcessorHandle, private readonly spec: StateVariableSpec) {}

  private live(operation: string): { storeKey: string; keyValues: readonly unknown[]; state: KeyedState; elements: (readonly [unknown, number | null])[] } {
    const { key, keyValues, state } = this.handle.requireKey(operation);
    const storeKey = stateKeys.list(this.spec.name, key);
    const stored = state.get(storeKey) as StoredList | undefined;
    const elements = (stored?.[1] ?? []).filter(([, e]) => !isExpired(e, state.batchTimestampMs));
    return { storeKey, keyValues, state, elements };
  }

  private write(operation: string, replace: boolean, values: readonly T[]): void {
    if (values.length === 0) {
      throw handleError('ILLEGAL_STATE_STORE_VALUE.EMPTY_LIST_VALUE',
        `Cannot write empty list values to State Store for StateName ${this.spec.name}.`, 'clear() the list instead of writing an empty one.');
    }
    const { storeKey, keyValues, state, elements } = this.live(operation);
    const expiresAt = this.handle.expiresAt(this.spec);
    const added = values.map((v) => [storableValue(v, this.spec.name, this.spec.type), expiresAt] as const);
    state.put(storeKey, [keyValues, replace ? added : [...elements, ...added]] satisfies StoredList);
  }

  exists(): boolean {
    return this.live('list_exists').elements.length > 0;
  }

  get(): T[] {
    return this.live('list_get').elements.map(([v]) => readableValue(v as T));
  }

  put(values: readonly T[]): void {
    this.write('list_put', true, values);
  }

  appendValue(value: T): void {
    this.write('list_append_value', false, [value]);
  }

  appendList(values: readonly T[]): void {
    this.write('list_append_list', false, values);
  }

  clear(): void {
    const { storeKey, state } = this.live('list_clear');
    state.remove(storeKey);
  }
}

class MapStateImpl<K, V> implements MapState<K, V> {
  constructor(private readonly handle: ProcessorHandle, private readonly spec: StateVariableSpec) {}

  private scope(operation: string): { key: string; keyValues: readonly unknown[]; state: KeyedState; index: Map<string, string> } {
    const scoped = this.handle.requireKey(operation);
    return { ...scoped, index: scoped.state.mapIndex(this.spec.name, scoped.key) };
  }

  private liveEntries(operation: string): StoredMapEntry[] {
    const { state, index } = this.scope(operation);
    const out: StoredMapEntry[] = [];
    for (const storeKey of index.values()) {
      const entry = state.get(storeKey) as StoredMapEntry | undefined;
      if (entry && !isExpired(entry[3], state.batchTimestampMs)) out.push(entry);
    }
    return out.sort((a, b) => compareValues(a[1], b[1]));
  }

  private entry(operation: string, mapKey: K): StoredMapEntry | undefined {
    const { state, index } = this.scope(operation);
    const storeKey = index.get(encodeKey([mapKey]));
    const entry = storeKey === undefined ? undefined : (state.get(storeKey) as StoredMapEntry | undefined);
    return entry && !isExpired(entry[3], state.batchTimestampMs) ? entry : undefined;
  }

  exists(): boolean {
    return this.liveEntries('map_exists').length > 0;
  }

  getValue(mapKey: K): V | undefined {
    const entry = this.entry('map_get_value', mapKey);
    return entry ? readableValue(entry[2] as V) : undefined;
  }

  containsKey(mapKey: K): boolean {
    return this.entry('map_contains_key', mapKey) !== undefined;
  }

  updateValue(mapKey: K, value: V): void {
    const { key, keyValues, state, index } = this.scope('map_update_value');
    const storedKey = storableValue(mapKey, `${this.spec.name} (map key)`, this.spec.keyType);
    const encoded = encodeKey([storedKey]);
    const storeKey = stateKeys.mapEntry(this.spec.name, key, encoded);
    index.set(encoded, storeKey);
    state.put(storeKey, [keyValues, storedKey, storableValue(value, this.spec.name, this.spec.type), this.handle.expiresAt(this.spec)] satisfies StoredMapEntry);
  }

  iterator(): [K, V][] {
    return this.liveEntries('map_iterator').map((e) => [readableValue(e[1] as K), readableValue(e[2] as V)]);
  }

  keys(): K[] {
    return this.liveEntries('map_keys').map((e) => readableValue(e[1] as K));
  }

  values(): V[] {
    return this.liveEntries('map_values').map((e) => readableValue(e[2] as V));
  }

  removeKey(mapKey: K): void {
    const { state, index } = this.scope('map_remove_key');
    const encoded = encodeKey([mapKey]);
    const storeKey = index.get(encoded);
    if (storeKey === undefined) return;
    index.delete(encoded);
    state.remove(storeKey);
  }

  clear(): void {
    const { state, index } = this.scope('map_clear');
    for (const storeKey of index.values()) state.remove(storeKey);
    index.clear();
  }
}
