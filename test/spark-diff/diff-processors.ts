/**
 * The user code spark-diff's stateful cases name, on the Sluice side: the same names and logic as
 * stateful_processors.py runs on PySpark (applyInPandasWithState / transformWithStateInPandas).
 * Timestamps arrive as micros; the functions work in whole seconds, timers and timeouts in ms.
 */
import type {
  FlatMapGroupsWithStateFunction, GroupingKey, Row, StatefulProcessor, StatefulProcessorHandle, ValueState,
} from '../../lib/plan/stateful-processor.js';

const seconds = (rows: readonly Row[]): number[] => rows.map((r) => Math.floor((r.eventTime as number) / 1_000_000));

/** (key, count so far); the state is removed once the count reaches 5 (emitted anyway). */
const runningCount: FlatMapGroupsWithStateFunction<number> = (key, rows, state) => {
  const count = (state.getOption() ?? 0) + rows.length;
  if (count >= 5) state.remove();
  else state.update(count);
  return [{ key: key[0], count }];
};

interface Session { events: number; last: number }

/** An event-time session: closes 5 s of event time after its last event; emits (key, events, lastSec, closed). */
const sessionTimeout: FlatMapGroupsWithStateFunction<Session> = (key, rows, state) => {
  if (state.hasTimedOut()) {
    const { events, last } = state.get();
    state.remove();
    return [{ key: key[0], events, lastSec: last, closed: true }];
  }
  const before = state.getOption() ?? { events: 0, last: 0 };
  const next = { events: before.events + rows.length, last: Math.max(before.last, ...seconds(rows)) };
  state.update(next);
  state.setTimeoutTimestamp((next.last + 5) * 1000);
  return [{ key: key[0], events: next.events, lastSec: next.last, closed: false }];
};

class RunningCount implements StatefulProcessor {
  private count!: ValueState<number>;

  init(handle: StatefulProcessorHandle): void {
    this.count = handle.getValueState<number>('count', { schema: 'long' });
  }

  handleInputRows(key: GroupingKey, rows: readonly Row[]): Row[] {
    const count = (this.count.get() ?? 0) + rows.length;
    if (count >= 5) this.count.clear();
    else this.count.update(count);
    return [{ key: key[0], count }];
  }
}

class SessionTimer implements StatefulProcessor {
  private session!: ValueState<Session>;
  private handle!: StatefulProcessorHandle;

  init(handle: StatefulProcessorHandle): void {
    this.handle = handle;
    this.session = handle.getValueState<Session>('session', { schema: 'struct<events:long,last:long>' });
  }

  handleInputRows(key: GroupingKey, rows: readonly Row[]): Row[] {
    const before = this.session.get() ?? { events: 0, last: 0 };
    const next = { events: before.events + rows.length, last: Math.max(before.last, ...seconds(rows)) };
    for (const t of this.handle.listTimers()) this.handle.deleteTimer(t);
    this.handle.registerTimer((next.last + 5) * 1000);
    this.session.update(next);
    return [{ key: key[0], events: next.events, lastSec: next.last, closed: false }];
  }

  handleExpiredTimer(key: GroupingKey): Row[] {
    const { events, last } = this.session.get()!;
    this.session.clear();
    return [{ key: key[0], events, lastSec: last, closed: true }];
  }
}

export const DIFF_GROUP_FUNCTIONS: Record<string, FlatMapGroupsWithStateFunction<number>> = {
  'running-count': runningCount,
  'session-timeout': sessionTimeout as unknown as FlatMapGroupsWithStateFunction<number>,
};

export const DIFF_PROCESSORS: Record<string, () => StatefulProcessor> = {
  'running-count': () => new RunningCount(),
  'session-timeout': () => new SessionTimer(),
};
