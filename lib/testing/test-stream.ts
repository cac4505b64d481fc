/**
 * Spark's StreamTest DSL: `await testStream(df, 'update')(addData(s, rows), checkNewAnswer(rows),
 * stopStream(), startStream(), ...)`. On failure it prints the action list with a cursor, the sink
 * contents and the plan, as Spark does.
 */
import { stringifyWithLongs } from '../core/long.js';
import type { DataFrame } from '../api/data-frame.js';
import { MemoryCheckpoint } from '../checkpoint/memory-checkpoint.js';
import type { OutputMode } from '../core/output-mode.js';
import { MemorySink } from '../sinks/memory-sink.js';
import type { MemoryStream } from '../sources/memory-stream.js';
import type { StreamingQuery } from '../runtime/streaming-query.js';
import type { StateOperatorProgress } from '../execution/physical.js';

interface StreamState {
  readonly df: DataFrame;
  readonly mode: OutputMode;
  readonly sink: MemorySink;
  readonly checkpoint: MemoryCheckpoint;
  query: StreamingQuery | null;
  lastChecked: number;
}

export interface StreamAction {
  readonly describe: string;
  run(state: StreamState): Promise<void>;
}

const key = (r: readonly unknown[]): string => stringifyWithLongs(r);
function sameMultiset(actual: readonly (readonly unknown[])[], expected: readonly (readonly unknown[])[]): boolean {
  const a = actual.map(key).sort();
  const e = expected.map(key).sort();
  return a.length === e.length && a.every((x, i) => x === e[i]);
}

async function running(state: StreamState): Promise<StreamingQuery> {
  if (!state.query) throw new Error('the stream is not running');
  await state.query.processAllAvailable();
  return state.query;
}

export const startStream = (): StreamAction => ({
  describe: 'StartStream()',
  async run(state) {
    state.query = await state.df.writeStream.outputMode(state.mode).sink(state.sink).checkpoint(state.checkpoint).start();
  },
});

export const stopStream = (): StreamAction => ({
  describe: 'StopStream',
  async run(state) {
    await state.query?.stop();
    state.query = null;
  },
});

export const addData = (stream: MemoryStream, ...rows: unknown[][]): StreamAction => ({
  describe: `AddData(${stream.name}, ${stringifyWithLongs(rows)})`,
  async run() {
    stream.addData(rows);
  },
});

function check(name: string, expected: unknown[][], pick: (s: StreamState) => unknown[][]): StreamAction {
  return {
    describe: `${name}(${stringifyWithLongs(expected)})`,
    async run(state) {
      await running(state);
      const actual = pick(state);
      state.lastChecked = state.sink.latestBatchId;
      if (!sameMultiset(actual, expected)) {
        throw new Error(`${name} failed\n  expected: ${stringifyWithLongs(expected)}\n  actual:   ${stringifyWithLongs(actual)}`);
      }
    },
  };
}

export const checkAnswer = (...rows: unknown[][]): StreamAction => check('CheckAnswer', rows, (s) => s.sink.allRows());
export const checkNewAnswer = (...rows: unknown[][]): StreamAction => check('CheckNewAnswer', rows, (s) => s.sink.rowsAfter(s.lastChecked));
export const checkLastBatch = (...rows: unknown[][]): StreamAction =>
  check('CheckLastBatch', rows, (s) => s.sink.lastBatch()?.rows.map((r) => [...r]) ?? []);

/** Asserts on the last progress's state operators (top-most first). */
export const assertStateOperators = (assertion: (ops: readonly StateOperatorProgress[]) => void): StreamAction => ({
  describe: 'AssertOnQuery(stateOperators)',
  async run(state) {
    const q = await running(state);
    assertion(q.lastProgress?.stateOperators ?? []);
  },
});

export const assertOnQuery = (assertion: (q: StreamingQuery) => void, describe = 'AssertOnQuery'): StreamAction => ({
  describe,
  async run(state) {
    assertion(await running(state));
  },
});

export function testStream(df: DataFrame, mode: OutputMode = 'append') {
  return async (...actions: StreamAction[]): Promise<void> => {
    const state: StreamState = { df, mode, sink: new MemorySink(), checkpoint: new MemoryCheckpoint(), query: null, lastChecked: -1 };
    const all = actions[0]?.describe.startsWith('StartStream') ? actions : [startStream(), ...actions];
    for (const [i, action] of all.entries()) {
      try {
        await action.run(state);
      } catch (error) {
        // A failed check stops the query (as Spark's testStream does), so no trigger outlives the test.
        await state.query?.stop().catch(() => undefined);
        const listing = all.map((a, j) => `${j === i ? '=> ' : '   '}${a.describe}`).join('\n');
        const sink = stringifyWithLongs(state.sink.allRows());
        throw new Error(`${(error as Error).message}\n\n== Actions ==\n${listing}\n\n== Sink ==\n${sink}\n\n== Plan ==\n${df.explain(mode)}`, { cause: error });
      }
    }
    await state.query?.stop();
  };
}
