/**
 * The user code that stateful-processing scenarios name (`"processor": "RunningCount"`), written as
 * Spark's suites write theirs (TransformWithStateSuite's RunningCountStatefulProcessor and friends,
 * FlatMapGroupsWithStateSuite's state functions). Scenario JSON cannot hold code; these can.
 */
import type {
  FlatMapGroupsWithStateFunction, GroupingKey, ListState, MapState, Row, StatefulProcessor, StatefulProcessorHandle,
  TimeMode, TimerValues, ValueState,
} from '../../lib/plan/stateful-processor.js';
import { DIFF_GROUP_FUNCTIONS, DIFF_PROCESSORS } from '../spark-diff/diff-processors.js';

const SECOND = 1000;

/**
 * TransformWithStateSuite's RunningCountStatefulProcessor: one more per call (not per row), emitted as
 * a string; the third call clears the state and emits nothing.
 */
class RunningCount implements StatefulProcessor {
  protected count!: ValueState<number>;
  protected handle!: StatefulProcessorHandle;

  init(handle: StatefulProcessorHandle): void {
    this.handle = handle;
    this.count = handle.getValueState<number>('countState', { schema: 'long' });
  }

  protected next(key: GroupingKey): Row[] {
    const count = (this.count.get() ?? 0) + 1;
    if (count === 3) {
      this.count.clear();
      return [];
    }
    this.count.update(count);
    return [{ key: key[0], countAsString: String(count) }];
  }

  handleInputRows(key: GroupingKey, _rows: readonly Row[], _timerValues: TimerValues): Row[] {
    return this.next(key);
  }
}

/** RunningCountStatefulProcessorWithProcessingTimeTimer: keys a and c arm a timer 5 s ahead on their first call; it emits (key, "-1") and clears. */
class RunningCountWithProcessingTimeTimer extends RunningCount {
  override handleInputRows(key: GroupingKey, _rows: readonly Row[], timerValues: TimerValues): Row[] {
    if ((this.count.get() ?? 0) === 0 && (key[0] === 'a' || key[0] === 'c')) {
      this.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + 5 * SECOND);
    }
    return this.next(key);
  }

  handleExpiredTimer(key: GroupingKey): Row[] {
    this.count.clear();
    return [{ key: key[0], countAsString: '-1' }];
  }
}

/**
 * Session detection on event time (TransformWithStateSuite's MaxEventTimeStatefulProcessor, as a
 * session): a session stays open until the watermark passes its last event + 10 s; it then emits
 * (key, start, end, events).
 */
class EventTimeSessions implements StatefulProcessor {
  private session!: ValueState<{ start: number; end: number; events: number }>;
  private handle!: StatefulProcessorHandle;

  init(handle: StatefulProcessorHandle): void {
    this.handle = handle;
    this.session = handle.getValueState('session', { schema: 'struct<start:long,end:long,events:long>' });
  }

  handleInputRows(key: GroupingKey, rows: readonly Row[]): Row[] {
    const times = rows.map((r) => Math.floor((r.eventTime as number) / 1000));
    const current = this.session.get() ?? { start: Math.min(...times), end: Math.max(...times), events: 0 };
    const next = { start: Math.min(current.start, ...times), end: Math.max(current.end, ...times), events: current.events + rows.length };
    for (const t of this.handle.listTimers()) this.handle.deleteTimer(t);
    this.handle.registerTimer(next.end + 10 * SECOND);
    this.session.update(next);
    return [];
  }

  handleExpiredTimer(key: GroupingKey): Row[] {
    const s = this.session.get()!;
    this.session.clear();
    return [{ key: key[0], start: s.start * 1000, end: s.end * 1000, events: s.events }];
  }
}

/** Session detection on processing time: a session closes 10 s after its last event (the timer moves with each batch); emits (key, events). */
class ProcessingTimeSessions implements StatefulProcessor {
  private events!: ValueState<number>;
  private handle!: StatefulProcessorHandle;

  init(handle: StatefulProcessorHandle): void {
    this.handle = handle;
    this.events = handle.getValueState<number>('events', { schema: 'long' });
  }

  handleInputRows(_key: GroupingKey, rows: readonly Row[], timerValues: TimerValues): Row[] {
    for (const t of this.handle.listTimers()) this.handle.deleteTimer(t);
    this.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + 10 * SECOND);
    this.events.update((this.events.get() ?? 0) + rows.length);
    return [];
  }

  handleExpiredTimer(key: GroupingKey): Row[] {
    const events = this.events.get() ?? 0;
    this.events.clear();
    return [{ key: key[0], events }];
  }
}

/** TransformWithListStateTTLSuite-like: each row's value appended with a TTL; emits the live list. */
class ListWithTtl implements StatefulProcessor {
  private values!: ListState<string>;

  init(handle: StatefulProcessorHandle): void {
    this.values = handle.getListState<string>('values', { schema: 'string', ttl: '1 minute' });
  }

  handleInputRows(key: GroupingKey, rows: readonly Row[]): Row[] {
    const wanted = rows.filter((r) => r.value !== 'get').map((r) => r.value as string);
    if (wanted.length > 0) this.values.appendList(wanted);
    return [{ key: key[0], values: this.values.get() }];
  }
}

/** TransformWithMapStateSuite's TestMapStateProcessor: rows are (key, op, mapKey, mapValue) commands. */
class MapCommands implements StatefulProcessor {
  private map!: MapState<string, string>;

  init(handle: StatefulProcessorHandle): void {
    this.map = handle.getMapState<string, string>('sessionState', { keySchema: 'string', schema: 'string' });
  }

  handleInputRows(key: GroupingKey, rows: readonly Row[]): Row[] {
    const out: Row[] = [];
    for (const r of rows) {
      const mapKey = r.mapKey as string;
      switch (r.op) {
        case 'update': this.map.updateValue(mapKey, r.mapValue as string); break;
        case 'get': out.push({ key: key[0], mapKey, mapValue: this.map.getValue(mapKey) ?? null }); break;
        case 'exists': out.push({ key: key[0], mapKey: 'exists', mapValue: String(this.map.exists()) }); break;
        case 'contains': out.push({ key: key[0], mapKey, mapValue: String(this.map.containsKey(mapKey)) }); break;
        case 'iterator': for (const [k, v] of this.map.iterator()) out.push({ key: key[0], mapKey: k, mapValue: v }); break;
        case 'remove': this.map.removeKey(mapKey); break;
        case 'clear': this.map.clear(); break;
        default: throw new Error(`unknown op ${String(r.op)}`);
      }
    }
    return out;
  }
}

/** StatefulProcessorWithInitialState-like: the initial state row seeds the count. */
class RunningCountWithInitialState extends RunningCount {
  handleInitialState(_key: GroupingKey, initial: Row): void {
    this.count.update(Number(initial.initialCount));
  }
}

/** Registers a timer at 2× TTL of a value state with TTL, to check the value is gone when it fires. */
class ValueWithTtlAndTimer implements StatefulProcessor {
  private last!: ValueState<string>;
  private handle!: StatefulProcessorHandle;
  private timeMode: TimeMode = 'none';

  init(handle: StatefulProcessorHandle, timeMode: TimeMode): void {
    this.handle = handle;
    this.timeMode = timeMode;
    this.last = handle.getValueState<string>('last', { schema: 'string', ttl: 10 * SECOND });
  }

  handleInputRows(key: GroupingKey, rows: readonly Row[], timerValues: TimerValues): Row[] {
    const previous = this.last.get() ?? null;
    this.last.update(rows[rows.length - 1]!.value as string);
    if (this.timeMode === 'processingTime') this.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + 20 * SECOND);
    return [{ key: key[0], value: previous }];
  }

  handleExpiredTimer(key: GroupingKey): Row[] {
    return [{ key: key[0], value: this.last.get() ?? 'expired' }];
  }
}

/** FlatMapGroupsWithStateSuite's stateFunc with a processing-time timeout of 10 s: (key, count) or (key, -1) on timeout. */
const countWithProcessingTimeTimeout: FlatMapGroupsWithStateFunction<number> = (key, rows, state) => {
  if (state.hasTimedOut()) {
    state.remove();
    return [{ key: key[0], count: -1 }];
  }
  const count = (state.getOption() ?? 0) + rows.length;
  state.update(count);
  state.setTimeoutDuration('10 seconds');
  return [{ key: key[0], count }];
};

/**
 * FlatMapGroupsWithStateSuite's event-time timeout function: emits the key's max event time (s) and
 * times out 5 s after it; emits (key, -1) on timeout.
 */
const maxEventTimeWithTimeout: FlatMapGroupsWithStateFunction<number> = (key, rows, state) => {
  if (state.hasTimedOut()) {
    state.remove();
    return [{ key: key[0], maxEventTimeSec: -1 }];
  }
  const maxSec = Math.max(state.getOption() ?? 0, ...rows.map((r) => Math.floor((r.eventTime as number) / 1_000_000)));
  state.update(maxSec);
  state.setTimeoutTimestamp((maxSec + 5) * 1000);
  return [{ key: key[0], maxEventTimeSec: maxSec }];
};

/** mapGroupsWithState running count ("mapGroupsWithState - streaming"): a count of 3 removes the state and emits -1. */
const mapRunningCount: FlatMapGroupsWithStateFunction<number> = (key, rows, state) => {
  const count = (state.getOption() ?? 0) + rows.length;
  if (count === 3) {
    state.remove();
    return [{ key: key[0], count: '-1' }];
  }
  state.update(count);
  return [{ key: key[0], count: String(count) }];
};

export const PROCESSORS: Record<string, () => StatefulProcessor> = {
  RunningCount: () => new RunningCount(),
  RunningCountWithProcessingTimeTimer: () => new RunningCountWithProcessingTimeTimer(),
  EventTimeSessions: () => new EventTimeSessions(),
  ProcessingTimeSessions: () => new ProcessingTimeSessions(),
  ListWithTtl: () => new ListWithTtl(),
  MapCommands: () => new MapCommands(),
  RunningCountWithInitialState: () => new RunningCountWithInitialState(),
  ValueWithTtlAndTimer: () => new ValueWithTtlAndTimer(),
  ...DIFF_PROCESSORS, // spark-diff's stateful cases (kebab-case names, also in stateful_processors.py)
};

export const GROUP_FUNCTIONS: Record<string, FlatMapGroupsWithStateFunction<number>> = {
  countWithProcessingTimeTimeout,
  maxEventTimeWithTimeout,
  mapRunningCount,
  ...DIFF_GROUP_FUNCTIONS,
};
