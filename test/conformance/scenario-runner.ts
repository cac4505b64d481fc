/**
 * Runs one conformance scenario (Spark StreamTest actions transcribed as JSON) against Sluice.
 * Interprets the format generally: nothing here knows scenario ids.
 */
import type { DataFrame } from '../../lib/api/data-frame.js';
import { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { MemorySink } from '../../lib/sinks/memory-sink.js';
import { ManualClock, systemClock, type Clock } from '../../lib/runtime/clock.js';
import { Trigger } from '../../lib/runtime/trigger.js';
import type { StreamingQuery } from '../../lib/runtime/streaming-query.js';
import type { StreamingQueryProgress } from '../../lib/runtime/progress.js';
import type { DataType } from '../../lib/plan/data-types.js';
import { buildInputs, buildQuery, toEngineValue, UnsupportedScenario, type Json, type ScenarioInputs } from './scenario-query.js';
import { ownTableMode, type StateMode } from './state-modes.js';

export interface ScenarioResult {
  readonly id: string;
  readonly passed: boolean;
  readonly reason?: string;
}

class StepFailure extends Error {}

function canonical(v: unknown): unknown {
  if (typeof v === 'number') return Number.isInteger(v) ? v : Number(v.toPrecision(12));
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, canonical(x)]));
  return v ?? null;
}

function sameRows(actual: unknown[][], expected: unknown[][], sorted: boolean): boolean {
  const a = actual.map((r) => JSON.stringify(canonical(r)));
  const e = expected.map((r) => JSON.stringify(canonical(r)));
  if (!sorted) {
    a.sort();
    e.sort();
  }
  return a.length === e.length && a.every((x, i) => x === e[i]);
}

function errorMatches(error: Error, spec: Json): string | null {
  const alternatives: Json[] = spec.anyOf ? spec.anyOf.map((alt: Json) => ({ ...spec, ...alt, anyOf: undefined })) : [spec];
  const problems: string[] = [];
  for (const alt of alternatives) {
    const target = alt.messageOf === 'cause' && error.cause instanceof Error ? `${error.message}\n${error.cause.message}` : error.message;
    const fold = (s: string): string => (alt.caseInsensitive ? s.toLowerCase() : s);
    const missing = (alt.messageContainsAll ?? []).filter((s: string) => !fold(target).includes(fold(s)));
    const classOk = !alt.errorClass || (error as { errorClass?: string }).errorClass === alt.errorClass || target.includes(alt.errorClass);
    if (missing.length === 0 && classOk) return null;
    problems.push(missing.length > 0 ? `message lacks ${JSON.stringify(missing)}` : `error class ${(error as { errorClass?: string }).errorClass} != ${alt.errorClass}`);
  }
  return `${problems.join(' / ')}; got: ${error.message.split('\n')[0]}`;
}

/** Runs a scenario with its state kept as `mode` keeps it (a fresh mode per scenario). */
export async function runScenario(scenario: Json, mode: StateMode = ownTableMode): Promise<ScenarioResult> {
  try {
    await new ScenarioRun(scenario, mode).run();
    return { id: scenario.id, passed: true };
  } catch (error) {
    const reason = error instanceof UnsupportedScenario ? `unsupported: ${error.message}` : (error as Error).message.split('\n').slice(0, 3).join(' | ');
    return { id: scenario.id, passed: false, reason };
  }
}

class ScenarioRun {
  private inputs!: ScenarioInputs;
  private df: DataFrame | null = null;
  private definitionError: Error | null = null;
  private query: StreamingQuery | null = null;
  private runtimeError: Error | null = null;
  private readonly sink = new MemorySink();
  private readonly checkpoints = new Map<string, MemoryCheckpoint>();
  private clock: Clock = systemClock;
  private manualClock: ManualClock | null = null;
  private lastCheckedBatchId = -1;
  private metricsPointer = 0;
  private outputTypes: DataType[] = [];

  constructor(private readonly scenario: Json, private readonly mode: StateMode) {}

  async run(): Promise<void> {
    const conf: Record<string, string> = { ...(this.scenario.conf ?? {}) };
    this.inputs = buildInputs(this.scenario, conf);
    try {
      this.df = buildQuery(this.scenario.query, this.inputs);
      this.outputTypes = this.df.plan.output.map((a) => a.type);
    } catch (error) {
      if (error instanceof UnsupportedScenario) throw error;
      this.definitionError = error as Error;
    }
    if (this.scenario.execution === 'batch') return this.runBatch();
    for (const [i, step] of (this.scenario.steps as Json[]).entries()) {
      const [name, arg] = Object.entries(step)[0]!;
      try {
        await this.step(name, arg);
      } catch (error) {
        if (error instanceof UnsupportedScenario) throw error;
        throw new StepFailure(`step ${i} ${name}: ${(error as Error).message}`);
      }
    }
    if (this.definitionError && !(this.scenario.steps as Json[]).some((s) => s.expectFailure)) {
      throw new StepFailure(`query definition failed: ${this.definitionError.message}`);
    }
    await this.query?.stop();
  }

  private runBatch(): void {
    if (this.definitionError) throw this.definitionError;
    const rows = this.df!.collect();
    for (const step of this.scenario.steps as Json[]) {
      const spec = step.checkAnswer ?? step.checkLastBatch;
      if (!spec) throw new UnsupportedScenario(`batch step ${Object.keys(step)[0]}`);
      this.compare(rows, spec.rows, Boolean(spec.sorted));
    }
  }

  private requireQuery(): StreamingQuery {
    if (this.runtimeError) throw new StepFailure(`query failed: ${this.runtimeError.message}`);
    if (!this.query) throw new StepFailure('no running query');
    return this.query;
  }

  private expected(rows: Json[][]): unknown[][] {
    return rows.map((r) => r.map((v, i) => toEngineValue(v, this.outputTypes[i] ?? 'long')));
  }

  private compare(actual: unknown[][], expectedRows: Json[][], sorted: boolean): void {
    const expected = this.expected(expectedRows);
    if (!sameRows(actual, expected, sorted)) {
      throw new StepFailure(`rows differ.\n  expected: ${JSON.stringify(canonical(expected))}\n  actual:   ${JSON.stringify(canonical(actual))}`);
    }
  }

  /** Spark's checks first wait for all data and resulting no-data batches (not under a manual clock). */
  private async settle(): Promise<void> {
    const q = this.requireQuery();
    if (this.manualClock) return;
    try {
      await q.processAllAvailable();
    } catch (error) {
      this.runtimeError = error as Error;
      throw new StepFailure(`query failed: ${(error as Error).message}`);
    }
  }

  private progresses(): readonly StreamingQueryProgress[] {
    return this.query?.recentProgress ?? [];
  }

  private async step(name: string, arg: Json): Promise<void> {
    switch (name) {
      case 'startStream':
        return this.startStream(arg ?? {});
      case 'stopStream':
        await this.query?.stop();
        this.query = null;
        return;
      case 'addData':
        this.addData(arg.input, arg.rows);
        return;
      case 'multiAddData':
        for (const a of arg as Json[]) this.addData(a.input, a.rows);
        return;
      case 'checkAnswer':
      case 'checkNewAnswer':
      case 'checkLastBatch': {
        await this.settle();
        const rows = name === 'checkAnswer'
          ? this.sink.allRows()
          : name === 'checkNewAnswer'
            ? this.sink.rowsAfter(this.lastCheckedBatchId)
            : (this.sink.lastBatch()?.rows.map((r) => [...r]) ?? []);
        this.lastCheckedBatchId = this.sink.latestBatchId;
        this.compare(rows, arg.rows, Boolean(arg.sorted));
        return;
      }
      case 'processAllAvailable':
        return this.settle();
      case 'awaitTermination':
        await this.settle();
        return;
      case 'advanceClock': {
        if (!this.manualClock) throw new UnsupportedScenario('advanceClock without a manual clock');
        this.manualClock.advance(arg.ms);
        const q = this.requireQuery();
        try {
          await q.runDueTriggers();
        } catch (error) {
          this.runtimeError = error as Error;
        }
        return;
      }
      case 'advanceClockWhileStopped':
        if (!this.manualClock) throw new UnsupportedScenario('advanceClockWhileStopped without a manual clock');
        this.manualClock.advance(arg.ms);
        return;
      case 'clearSink':
        this.sink.clear();
        return;
      case 'purgeCommitLog': {
        const cp = this.checkpoint(undefined);
        const latest = await cp.commitLog.getLatest();
        const before = arg.beforeBatchId === 'latest' ? (latest?.[0] ?? 0) : arg.beforeBatchId;
        await cp.commitLog.purge(before);
        return;
      }
      case 'expectFailure':
        return this.expectFailure(arg);
      case 'expectSupported':
        return this.expectSupported();
      default:
        return this.assertMetrics(name, arg);
    }
  }

  private checkpoint(name: string | undefined): MemoryCheckpoint {
    const key = name ?? 'default';
    let cp = this.checkpoints.get(key);
    if (!cp) this.checkpoints.set(key, (cp = new MemoryCheckpoint(key)));
    return cp;
  }

  private addData(input: string, rows: Json[][]): void {
    const stream = this.inputs.streams.get(input);
    if (!stream) throw new UnsupportedScenario(`unknown stream input ${input}`);
    const types = this.inputs.types.get(input)!;
    stream.addData(rows.map((r) => r.map((v, i) => toEngineValue(v, types[i]!))));
  }

  private trigger(spec: Json): Trigger {
    if (!spec) return Trigger.ProcessingTime(0);
    if (spec.type === 'once') return Trigger.Once();
    if (spec.type === 'availableNow') return Trigger.AvailableNow();
    return Trigger.ProcessingTime(spec.interval ?? 0);
  }

  private async startStream(arg: Json): Promise<void> {
    if (this.definitionError) throw new StepFailure(`query definition failed: ${this.definitionError.message}`);
    if (this.query) await this.query.stop();
    if (arg.manualClock) {
      this.manualClock ??= new ManualClock();
      this.clock = this.manualClock;
    }
    const writer = this.df!.writeStream
      .outputMode(this.scenario.outputMode ?? 'append')
      .sink(this.sink)
      .trigger(this.trigger(arg.trigger))
      .checkpoint(this.mode.checkpointFor(this.checkpoint(arg.checkpoint)))
      .clock(this.clock);
    for (const [k, v] of Object.entries(arg.conf ?? {})) writer.option(k, String(v));
    this.query = await writer.start();
    this.runtimeError = null;
    this.metricsPointer = 0;
    if (this.manualClock) {
      try {
        await this.query.runDueTriggers();
      } catch (error) {
        this.runtimeError = error as Error;
      }
    }
  }

  private async expectFailure(spec: Json): Promise<void> {
    let error: Error | null = null;
    if (spec.phase === 'definition') {
      error = this.definitionError;
      if (!error) throw new StepFailure('expected the query definition to fail, but it succeeded');
    } else if (spec.phase === 'analysis') {
      if (this.definitionError) throw new StepFailure(`failed at definition instead of analysis: ${this.definitionError.message}`);
      try {
        await this.startStream({});
      } catch (e) {
        error = e as Error;
      }
      if (!error) throw new StepFailure('expected start() to refuse the query, but it started');
    } else {
      if (this.definitionError) throw new StepFailure(`failed at definition instead of runtime: ${this.definitionError.message}`);
      if (!this.query && !this.runtimeError) {
        try {
          await this.startStream({});
        } catch (e) {
          error = e as Error;
        }
      }
      if (!error && this.query) {
        try {
          await this.query.processAllAvailable();
          // A runtime failure may need data: Spark's tests add it before; try one more trigger.
        } catch (e) {
          error = e as Error;
        }
      }
      error ??= this.runtimeError;
      if (!error) throw new StepFailure('expected the running query to fail, but it did not');
      this.query = null;
    }
    const problem = errorMatches(error, spec);
    if (problem) throw new StepFailure(`wrong error: ${problem}`);
  }

  private async expectSupported(): Promise<void> {
    if (this.definitionError) throw new StepFailure(`query definition failed: ${this.definitionError.message}`);
    await this.startStream({});
  }

  private pointerSlice(): readonly StreamingQueryProgress[] {
    const all = this.progresses();
    const slice = all.slice(this.metricsPointer);
    this.metricsPointer = all.length;
    return slice;
  }

  private async assertMetrics(name: string, arg: Json): Promise<void> {
    const q = this.requireQuery();
    if (name !== 'assertLastBatchId' && !this.manualClock) await this.settle();
    const last = q.lastProgress;
    const need = (cond: boolean, what: string): void => {
      if (!cond) throw new StepFailure(what);
    };
    switch (name) {
      case 'assertStateMetrics': {
        const since = this.pointerSlice();
        need(last !== undefined, 'no progress yet');
        const ops = last!.stateOperators;
        const sum = (field: 'numRowsUpdated' | 'numRowsDroppedByWatermark' | 'numRowsRemoved'): number[] =>
          ops.map((_, i) => since.reduce((acc, p) => acc + (p.stateOperators[i]?.[field] ?? 0), 0));
        const actual = {
          total: ops.map((o) => o.numRowsTotal),
          updated: sum('numRowsUpdated'),
          droppedByWatermark: sum('numRowsDroppedByWatermark'),
          removed: sum('numRowsRemoved'),
        };
        for (const key of ['total', 'updated', 'droppedByWatermark', 'removed'] as const) {
          if (arg[key] === undefined) continue;
          need(JSON.stringify(arg[key]) === JSON.stringify(actual[key]), `state metric ${key}: expected ${JSON.stringify(arg[key])}, got ${JSON.stringify(actual[key])}`);
        }
        return;
      }
      case 'assertStateOperatorInfo':
        this.pointerSlice();
        need(last !== undefined && last.stateOperators.some((o) => o.operatorName === arg.operatorName), `no state operator named ${arg.operatorName} (have ${last?.stateOperators.map((o) => o.operatorName).join(', ')})`);
        return;
      case 'assertCustomMetric': {
        const since = this.pointerSlice();
        const index = arg.operatorIndex ?? 0;
        const value = since.reduce((acc, p) => acc + (p.stateOperators[index]?.customMetrics[arg.name] ?? 0), 0);
        need(value === arg.value, `custom metric ${arg.name}: expected ${arg.value}, got ${value}`);
        return;
      }
      case 'assertStateRowsTotal': {
        const actual = last?.stateOperators.map((o) => o.numRowsTotal);
        need(JSON.stringify(actual) === JSON.stringify(arg), `numRowsTotal: expected ${JSON.stringify(arg)}, got ${JSON.stringify(actual)}`);
        return;
      }
      case 'assertRowsDroppedByWatermark': {
        const withInput = [...this.progresses()].reverse().find((p) => p.numInputRows > 0);
        const actual = withInput?.stateOperators.map((o) => o.numRowsDroppedByWatermark);
        need(JSON.stringify(actual) === JSON.stringify(arg), `numRowsDroppedByWatermark: expected ${JSON.stringify(arg)}, got ${JSON.stringify(actual)}`);
        return;
      }
      case 'assertEventTimeStats': {
        const withInput = [...this.progresses()].reverse().find((p) => p.numInputRows > 0);
        if (arg === null) {
          need(withInput !== undefined && Object.keys(withInput.eventTime).length === 0, `expected no event-time stats, got ${JSON.stringify(withInput?.eventTime)}`);
          return;
        }
        for (const key of ['min', 'max', 'avg', 'watermark']) {
          if (arg[key] === undefined) continue;
          need(withInput?.eventTime[key] === arg[key], `eventTime.${key}: expected ${arg[key]}, got ${withInput?.eventTime[key]}`);
        }
        return;
      }
      case 'assertBatchWatermarkMs':
        need(last?.batchWatermarkMs === arg, `batch watermark: expected ${arg}, got ${last?.batchWatermarkMs}`);
        return;
      case 'assertProgressWatermark':
        need(last?.eventTime.watermark === arg, `progress watermark: expected ${arg}, got ${last?.eventTime.watermark}`);
        return;
      case 'assertLastBatchId':
        if (!this.manualClock) await this.settle();
        need(q.lastProgress?.batchId === arg, `last batch id: expected ${arg}, got ${q.lastProgress?.batchId}`);
        return;
      case 'assertLastExecutedBatch': {
        const op = last?.stateOperators[0];
        const actual: Record<string, number | undefined> = {
          stateRowsUpdated: op?.numRowsUpdated,
          stateRowsTotal: op?.numRowsTotal,
          operatorNumOutputRows: op?.numOutputRows,
          sinkOutputRows: last?.sink.numOutputRows,
        };
        for (const [k, v] of Object.entries(arg)) need(actual[k] === v, `${k}: expected ${v}, got ${actual[k]}`);
        return;
      }
      case 'assertOperatorWatermarks': {
        const actual = (last as unknown as { operatorWatermarks?: Json[] })?.operatorWatermarks;
        const expected = (arg as Json[]).map((w) => ({ lateEventsMs: toMs(w.lateEventsMs), evictionMs: toMs(w.evictionMs) }));
        need(actual !== undefined, 'no operator watermarks in progress');
        const got = actual!.map((w) => ({ lateEventsMs: w.lateEventsMs, evictionMs: w.evictionMs }));
        need(JSON.stringify(got) === JSON.stringify(expected), `operator watermarks: expected ${JSON.stringify(expected)}, got ${JSON.stringify(got)}`);
        return;
      }
      default:
        throw new UnsupportedScenario(`step '${name}'`);
    }
  }
}

function toMs(v: Json): number {
  if (typeof v === 'number') return v;
  const micros = toEngineValue(v, 'timestamp') as number;
  return Math.floor(micros / 1000);
}

