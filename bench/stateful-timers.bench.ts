/**
 * A timer-heavy transformWithState query through the real handlers on the emulators, every AWS SDK
 * call traced: 10,000 users, each with a processing-time timer (an "inactive for 10 minutes" alert
 * re-armed by every event), batches of 1,000 events. Reports, per data batch (median over the
 * steady batches): DynamoDB write and read units of the state table and of the checkpoint table,
 * and the invocation's own compute time (wall time with no AWS call in flight); then the same for
 * the scheduled no-data batch that fires every timer, and for a tick with nothing due.
 *
 *   node --conditions=sluice-source --import tsx bench/stateful-timers.bench.ts [--json]
 *
 * Compute time is only meaningful as a ratio between two runs on the same machine (e.g. before and
 * after a change); BENCH_TIMERS_USERS and BENCH_TIMERS_BATCHES size the run.
 */
import { createAwsClients } from '../lib/aws/clients.js';
import { createKinesisTriggerHandler } from '../lib/aws/kinesis-trigger-handler.js';
import { createScheduledTriggerHandler } from '../lib/aws/scheduled-trigger-handler.js';
import { createQuietObservability } from '../lib/aws/observability.js';
import { startEmulators } from '../lib/local/emulators.js';
import { defineQuery } from '../lib/query/query-definition.js';
import type { DataFrame } from '../lib/api/data-frame.js';
import type { GroupingKey, Row, StatefulProcessor, StatefulProcessorHandle, TimerValues, ValueState } from '../lib/plan/stateful-processor.js';
import { AwsCallTrace, localComputeMs, type TracedCall } from './aws-call-trace.js';
import { answerAtTheTip, deploy, toEvent } from './e2e-cost.bench.js';

const INACTIVE_MS = 10 * 60_000;
const BATCH = 1_000;
const SHARD = 'shardId-000000000000';

/** Per user: events seen; one timer INACTIVE_MS after the latest event, which reports the user. */
class InactivityAlert implements StatefulProcessor {
  private events!: ValueState<number>;
  private handle!: StatefulProcessorHandle;

  init(handle: StatefulProcessorHandle): void {
    this.handle = handle;
    this.events = handle.getValueState<number>('events', { schema: 'long' });
  }

  handleInputRows(_key: GroupingKey, rows: readonly Row[], timerValues: TimerValues): Row[] {
    for (const t of this.handle.listTimers()) this.handle.deleteTimer(t);
    this.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + INACTIVE_MS);
    this.events.update((this.events.get() ?? 0) + rows.length);
    return [];
  }

  handleExpiredTimer(key: GroupingKey): Row[] {
    const row = { user: key[0], events: this.events.get() ?? 0 };
    this.events.clear();
    return [row];
  }
}

const transform = (df: DataFrame): DataFrame => df.groupByKey('user_id')
  .transformWithState(() => new InactivityAlert(), { timeMode: 'processingTime', outputMode: 'append', outputSchema: 'user string, events long' });

export interface BatchUnits {
  readonly stateWrite: number;
  readonly stateRead: number;
  readonly checkpointWrite: number;
  readonly checkpointRead: number;
  readonly computeMs: number;
}

export interface StatefulTimerFigures {
  readonly users: number;
  readonly batches: number;
  /** Medians over the steady data batches (after the fill). */
  readonly dataBatch: BatchUnits;
  /** The scheduled no-data batch that fires every user's timer. */
  readonly timerBatch: BatchUnits & { readonly timersFired: number };
  /** A scheduled tick before any timer is due. */
  readonly idleTick: BatchUnits & { readonly batchesRun: number };
}

function* eventBatches(users: number, batches: number): Generator<{ data: string; partitionKey: string }[]> {
  let seed = 7;
  const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  let n = 0;
  const fill = Math.ceil(users / BATCH);
  for (let b = 0; b < fill + batches; b++) {
    const out: { data: string; partitionKey: string }[] = [];
    for (let i = 0; i < BATCH; i++, n++) {
      const user = `user-${b < fill ? n % users : Math.floor(random() * users)}`;
      out.push({ data: JSON.stringify({ user_id: user, amount: 1, event_time: Date.parse('2024-05-01T00:00:00Z') / 1000 + n }), partitionKey: user });
    }
    yield out;
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s[Math.floor((s.length - 1) / 2)]!;
};
const round = (n: number): number => Math.round(n * 10) / 10;

export async function measureStatefulTimers(options: { users?: number; batches?: number } = {}): Promise<StatefulTimerFigures> {
  const users = options.users ?? Number(process.env.BENCH_TIMERS_USERS ?? 10_000);
  const batches = options.batches ?? Number(process.env.BENCH_TIMERS_BATCHES ?? 20);
  const emulators = await startEmulators();
  const setup = createAwsClients(emulators.clientOptions);
  const trace = new AwsCallTrace();
  const traced = trace.attach(createAwsClients(emulators.clientOptions));
  const tickClients = trace.attach(answerAtTheTip(createAwsClients(emulators.clientOptions)));
  try {
    const config = await deploy(setup, 'stateful-timers');
    const definition = defineQuery({
      name: 'bench-stateful-timers', source: { schema: 'user_id string, amount double, event_time timestamp', partitionKey: 'user_id' },
      transform, outputMode: 'append', sink: { kind: 's3-files' },
    });
    const observability = createQuietObservability(definition.name);
    const progress: { numInputRows: number; timersFired: number }[] = [];
    const onInvocation = (_shard: string, result: { progress: readonly { numInputRows: number; stateOperators: readonly { customMetrics?: Record<string, number> }[] }[] }): void => {
      for (const p of result.progress) progress.push({ numInputRows: p.numInputRows, timersFired: p.stateOperators[0]?.customMetrics?.numExpiredTimers ?? 0 });
    };
    const handler = createKinesisTriggerHandler(definition, { config, clients: traced, observability, onInvocation });
    let nowMs = Date.now();
    const tick = createScheduledTriggerHandler(definition, { config, clients: tickClients, observability, now: () => nowMs, onInvocation });
    const unitsOf = (calls: readonly TracedCall[], started: number, ended: number): BatchUnits => {
      const sum = (kind: 'writeUnits' | 'readUnits', table: string): number => calls.reduce((a, c) => a + (c[kind].get(table) ?? 0), 0);
      return {
        stateWrite: sum('writeUnits', config.stateTable), stateRead: sum('readUnits', config.stateTable),
        checkpointWrite: sum('writeUnits', config.checkpointTable), checkpointRead: sum('readUnits', config.checkpointTable),
        computeMs: localComputeMs(calls, started, ended),
      };
    };
    const fill = Math.ceil(users / BATCH);
    const steady: BatchUnits[] = [];
    let sequence = 0;
    let b = 0;
    for (const records of eventBatches(users, batches)) {
      const placed = records.map(() => ({ shardId: SHARD, sequenceNumber: `4968${String(++sequence).padStart(52, '0')}` }));
      const first = trace.calls.length;
      const started = performance.now();
      const answer = await handler(toEvent(records, placed, Date.now() / 1000));
      const units = unitsOf(trace.since(first), started, performance.now());
      if (answer.batchItemFailures.length > 0) throw new Error(`batch ${b} failed: ${JSON.stringify(answer.batchItemFailures)}`);
      if (b >= fill + 2) steady.push(units);
      if (process.env.BENCH_VERBOSE) console.error(`batch ${b}: ${JSON.stringify(units)}`);
      b++;
    }
    const runTick = async (atMs: number): Promise<BatchUnits & { batchesRun: number; timersFired: number }> => {
      nowMs = atMs;
      const before = progress.length;
      const first = trace.calls.length;
      const started = performance.now();
      await tick({ mode: 'tick' });
      const ran = progress.slice(before);
      return { ...unitsOf(trace.since(first), started, performance.now()), batchesRun: ran.length, timersFired: ran.reduce((a, p) => a + p.timersFired, 0) };
    };
    const idle = await runTick(Date.now() + 1_000);
    const fired = await runTick(Date.now() + INACTIVE_MS + 60_000);
    if (fired.timersFired !== users) throw new Error(`expected ${users} timers to fire, ${fired.timersFired} did`);
    const med = (pick: (u: BatchUnits) => number): number => round(median(steady.map(pick)));
    return {
      users, batches,
      dataBatch: {
        stateWrite: med((u) => u.stateWrite), stateRead: med((u) => u.stateRead), checkpointWrite: med((u) => u.checkpointWrite),
        checkpointRead: med((u) => u.checkpointRead), computeMs: med((u) => u.computeMs),
      },
      timerBatch: { ...roundUnits(fired), timersFired: fired.timersFired },
      idleTick: { ...roundUnits(idle), batchesRun: idle.batchesRun },
    };
  } finally {
    setup.destroy();
    traced.destroy();
    tickClients.destroy();
    await emulators.stop();
  }
}

function roundUnits(u: BatchUnits): BatchUnits {
  return { stateWrite: round(u.stateWrite), stateRead: round(u.stateRead), checkpointWrite: round(u.checkpointWrite), checkpointRead: round(u.checkpointRead), computeMs: round(u.computeMs) };
}

export function printStatefulTimers(f: StatefulTimerFigures): void {
  console.log(`Timer-heavy transformWithState (${f.users.toLocaleString('en')} users, a processing-time timer each, batches of ${BATCH}, one shard, warm container):`);
  console.log('  batch | state WCU | state RCU | checkpoint WCU | checkpoint RCU | compute ms');
  const line = (name: string, u: BatchUnits): void => console.log(`  ${[name, u.stateWrite, u.stateRead, u.checkpointWrite, u.checkpointRead, u.computeMs].join(' | ')}`);
  line(`data batch (median of ${f.batches - 2})`, f.dataBatch);
  line(`no-data batch firing ${f.timerBatch.timersFired} timers`, f.timerBatch);
  line(`tick with nothing due (${f.idleTick.batchesRun} batches)`, f.idleTick);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const figures = await measureStatefulTimers();
  if (process.argv.includes('--json')) console.log(JSON.stringify(figures));
  else printStatefulTimers(figures);
}
