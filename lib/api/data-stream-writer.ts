import type { LogicalPlan } from '../plan/logical-plan.js';
import type { SourceRegistry } from '../sources/source.js';
import type { OutputMode } from '../core/output-mode.js';
import type { Checkpoint } from '../checkpoint/checkpoint.js';
import { MemoryCheckpoint } from '../checkpoint/memory-checkpoint.js';
import { checkStreamingQuery } from '../analysis/unsupported-operation-checker.js';
import { AnalysisError, IllegalArgumentError } from '../errors/sluice-error.js';
import { ConsoleSink } from '../sinks/console-sink.js';
import { ForeachBatchSink } from '../sinks/foreach-batch-sink.js';
import { MemorySink } from '../sinks/memory-sink.js';
import type { Sink, SinkBatch } from '../sinks/sink.js';
import { checkSinkOutputMode } from '../sinks/sink-output-modes.js';
import { systemClock, type Clock } from '../runtime/clock.js';
import { StreamExecution } from '../runtime/stream-execution.js';
import { StreamingQuery } from '../runtime/streaming-query.js';
import { Trigger } from '../runtime/trigger.js';

const OUTPUT_MODES: readonly OutputMode[] = ['append', 'update', 'complete'];

/** Queries started with the memory sink, by query name (Spark registers them as temp views). */
export const memorySinks = new Map<string, MemorySink>();

/** What a writer needs of the DataFrame it writes (the DataFrame creates its writer). */
export interface WritableFrame {
  readonly plan: LogicalPlan;
  readonly sources: SourceRegistry;
  readonly columns: readonly string[];
  readonly session: { readonly conf: ReadonlyMap<string, string> };
}

/** Spark's foreachBatch function: each micro-batch's output as a static DataFrame, and its batch id. */
export type ForeachBatchFrameFunction<F> = (batch: F, batchId: number) => void | Promise<void>;

/**
 * `df.writeStream`: an immutable-by-convention builder; `start()` validates everything first.
 * `F` is the static DataFrame type foreachBatch hands out (built by `toFrame`; the DataFrame
 * creates its writer, so this module does not import it).
 */
export class DataStreamWriter<F = unknown> {
  private mode: OutputMode = 'append';
  private sinkChoice: Sink | null = null;
  private formatName: string | null = null;
  private triggerChoice: Trigger = Trigger.ProcessingTime(0);
  private name: string | null = null;
  private checkpointChoice: Checkpoint | null = null;
  private clockChoice: Clock = systemClock;
  private readonly extraConf = new Map<string, string>();

  constructor(private readonly df: WritableFrame, private readonly toFrame: (batch: SinkBatch) => F = () => { throw new Error('foreachBatch needs a DataFrame factory'); }) {}

  outputMode(mode: OutputMode | string): this {
    const m = mode.toLowerCase() as OutputMode;
    if (!OUTPUT_MODES.includes(m)) {
      throw new IllegalArgumentError(`Unknown output mode ${mode}. Accepted output modes are 'append', 'complete', 'update'`, {
        code: 'UNKNOWN_OUTPUT_MODE', hint: "use 'append', 'update' or 'complete'.",
      });
    }
    this.mode = m;
    return this;
  }

  /** `memory` or `console`; other sinks are passed with `sink()`. */
  format(name: 'memory' | 'console' | string): this {
    if (name !== 'memory' && name !== 'console') {
      throw new IllegalArgumentError(`Unknown sink format '${name}'.`, {
        code: 'UNKNOWN_SINK_FORMAT', hint: "use format('memory') or format('console'), or pass a Sink object to sink() (S3, DynamoDB).",
      });
    }
    this.formatName = name;
    return this;
  }

  sink(sink: Sink): this {
    this.sinkChoice = sink;
    return this;
  }

  /**
   * Spark's foreachBatch: `fn(batchDF, batchId)` per micro-batch, the batch's output rows as a
   * static DataFrame (filter, join with static data, aggregate, collect, write to a sink...).
   * Make it idempotent by batch id: a batch re-run after a failure is handed over again.
   */
  foreachBatch(fn: ForeachBatchFrameFunction<F>): this {
    const toFrame = this.toFrame;
    this.sinkChoice = new ForeachBatchSink((_rows, batchId, _columns, batch) => fn(toFrame(batch), batchId));
    return this;
  }

  trigger(trigger: Trigger): this {
    this.triggerChoice = trigger;
    return this;
  }

  queryName(name: string): this {
    this.name = name;
    return this;
  }

  /** Where offsets, commits and state live; pass the same one to restart a query. */
  checkpoint(checkpoint: Checkpoint): this {
    this.checkpointChoice = checkpoint;
    return this;
  }

  clock(clock: Clock): this {
    this.clockChoice = clock;
    return this;
  }

  /** A `spark.sql.*` conf for this query only (overrides the session's). */
  option(key: string, value: string): this {
    this.extraConf.set(key, value);
    return this;
  }

  private resolveSink(): Sink {
    if (this.sinkChoice) return this.sinkChoice;
    if (this.formatName === 'console') {
      // Spark's console sink options, set with option(): numRows (20) and truncate (true).
      const numRows = Number(this.extraConf.get('numRows') ?? 20);
      const truncate = (this.extraConf.get('truncate') ?? 'true').toLowerCase() !== 'false';
      if (!Number.isSafeInteger(numRows) || numRows < 0) {
        throw new IllegalArgumentError(`numRows must be a non-negative integer, got '${this.extraConf.get('numRows')}'.`, { code: 'INVALID_CONSOLE_OPTION', hint: "e.g. option('numRows', '50')." });
      }
      return new ConsoleSink(undefined, [], { numRows, truncate: truncate ? 20 : 0 });
    }
    if (this.formatName === 'memory') {
      if (!this.name) {
        throw new AnalysisError('queryName must be specified for memory sink', { code: 'MEMORY_SINK_NEEDS_NAME', hint: 'call .queryName("name") before start().' });
      }
      const sink = new MemorySink();
      memorySinks.set(this.name, sink);
      return sink;
    }
    throw new AnalysisError('No sink chosen for the streaming query.', {
      code: 'NO_SINK', hint: "call .format('console'|'memory'), .foreachBatch(fn) or .sink(sink) before start().",
    });
  }

  /**
   * Validates the query against the output mode and sink (nothing is read or written if it is
   * refused), recovers from the checkpoint, and returns the running query's handle.
   */
  async start(options: { background?: boolean } = {}): Promise<StreamingQuery> {
    const conf = new Map([...this.df.session.conf, ...this.extraConf]);
    checkStreamingQuery(this.df.plan, this.mode, conf);
    const sink = this.resolveSink();
    checkSinkOutputMode(sink, this.mode);
    const execution = new StreamExecution({
      plan: this.df.plan,
      sources: this.df.sources,
      columns: this.df.columns,
      outputMode: this.mode,
      sink,
      trigger: this.triggerChoice,
      checkpoint: this.checkpointChoice ?? new MemoryCheckpoint(),
      conf,
      clock: this.clockChoice,
      queryName: this.name,
    });
    await execution.start();
    const query = new StreamingQuery(execution, this.triggerChoice, this.clockChoice, this.name);
    if (options.background) query.runInBackground();
    return query;
  }
}
