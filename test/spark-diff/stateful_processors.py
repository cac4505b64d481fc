"""The user code that spark-diff's stateful cases name, on the PySpark side.

A case says `"function": "running-count"` (applyInPandasWithState, the Python flatMapGroupsWithState)
or `"processor": "running-count"` (transformWithStateInPandas); the same names are registered in
TypeScript in diff-processors.ts, with the same logic, so the harness runs one algorithm on both.
Timestamps arrive as pandas datetimes; the functions work in whole seconds.

No processing-time case: PySpark has no way to set a query's trigger clock (Spark's ManualClock is
reached only through the Scala-internal StreamingQueryManager.startQuery that StreamTest uses), so
in local mode the batch timestamp is the wall clock and whether a processing-time timeout fires in
a given batch depends on how long the batches took: Spark's answer would not be deterministic.
transformWithStateInPandas needs the RocksDB state store provider (the cases set it in `conf`).
"""
import pandas as pd
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

EPOCH = pd.Timestamp(0)


def seconds(series):
    return [int((t - EPOCH).total_seconds()) for t in series]


def running_count(key, pdfs, state):
    """(key, count so far); the state is removed once the count reaches 5 (emitted anyway)."""
    rows = sum(len(p) for p in pdfs)
    count = (state.get[0] if state.exists else 0) + rows
    if count >= 5:
        state.remove()
    else:
        state.update((count,))
    yield pd.DataFrame({"key": [key[0]], "count": [count]})


def session_timeout(key, pdfs, state):
    """An event-time session: closes 5 s of event time after its last event; emits (key, events, lastSec, closed)."""
    if state.hasTimedOut:
        events, last = state.get
        state.remove()
        yield pd.DataFrame({"key": [key[0]], "events": [events], "lastSec": [last], "closed": [True]})
        return
    times = [t for p in pdfs for t in seconds(p["eventTime"])]
    events, last = state.get if state.exists else (0, 0)
    events, last = events + len(times), max([last, *times])
    state.update((events, last))
    state.setTimeoutTimestamp((last + 5) * 1000)
    yield pd.DataFrame({"key": [key[0]], "events": [events], "lastSec": [last], "closed": [False]})


APPLY_IN_PANDAS = {
    "running-count": (running_count, "count long"),
    "session-timeout": (session_timeout, "events long, last long"),
}

TIMEOUTS = {"none": GroupStateTimeout.NoTimeout, "eventTime": GroupStateTimeout.EventTimeTimeout,
            "processingTime": GroupStateTimeout.ProcessingTimeTimeout}


class RunningCount(StatefulProcessor):
    """transformWithState's form of running-count: a value state, cleared once the count reaches 5."""

    def init(self, handle):
        self.count = handle.getValueState("count", "count long")

    def handleInputRows(self, key, rows, timerValues):
        n = sum(len(p) for p in rows)
        count = (self.count.get()[0] if self.count.exists() else 0) + n
        if count >= 5:
            self.count.clear()
        else:
            self.count.update((count,))
        yield pd.DataFrame({"key": [key[0]], "count": [count]})

    def close(self):
        pass


class SessionTimer(StatefulProcessor):
    """transformWithState's session-timeout: an event-time timer at last event + 5 s emits the closed session."""

    def init(self, handle):
        self.handle = handle
        self.session = handle.getValueState("session", "events long, last long")

    def handleInputRows(self, key, rows, timerValues):
        times = [t for p in rows for t in seconds(p["eventTime"])]
        events, last = self.session.get() if self.session.exists() else (0, 0)
        events, last = events + len(times), max([last, *times])
        for t in list(self.handle.listTimers()):
            self.handle.deleteTimer(t)
        self.handle.registerTimer((last + 5) * 1000)
        self.session.update((events, last))
        yield pd.DataFrame({"key": [key[0]], "events": [events], "lastSec": [last], "closed": [False]})

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        events, last = self.session.get()
        self.session.clear()
        yield pd.DataFrame({"key": [key[0]], "events": [events], "lastSec": [last], "closed": [True]})

    def close(self):
        pass


PROCESSORS = {"running-count": RunningCount, "session-timeout": SessionTimer}
