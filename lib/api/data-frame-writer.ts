import type { OutputMode } from '../core/output-mode.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';
import type { LogicalPlan } from '../plan/logical-plan.js';
import { runBatchQuery } from '../runtime/batch-runner.js';
import type { Sink, SinkBatch } from '../sinks/sink.js';

/**
 * `df.write` on a static DataFrame (Spark's DataFrameWriter): runs the query once and hands its
 * rows to a sink as one batch. Inside foreachBatch, pass the micro-batch's id (`.batchId(id)`):
 * the sinks are idempotent per batch id, so a re-run batch does not write twice.
 */
export class DataFrameWriter {
  private target: Sink | null = null;
  private saveMode: OutputMode = 'append';
  private id = 0;
  private partition = 'static';

  constructor(private readonly frame: { readonly plan: LogicalPlan }) {}

  sink(sink: Sink): this {
    this.target = sink;
    return this;
  }

  /** `append` (the default) adds the rows; `complete` (Spark's `overwrite`) replaces what a snapshot sink holds. */
  mode(mode: 'append' | 'overwrite' | 'complete'): this {
    this.saveMode = mode === 'append' ? 'append' : 'complete';
    return this;
  }

  /** The batch id the sink records the rows under (its idempotence key); in foreachBatch, the micro-batch's id. */
  batchId(batchId: number): this {
    this.id = batchId;
    return this;
  }

  /** The partition id the sink records (a file name part, a checkpoint key); default `static`. */
  partitionId(partitionId: string): this {
    this.partition = partitionId;
    return this;
  }

  async save(): Promise<void> {
    const sink = this.target;
    if (!sink) {
      throw new IllegalArgumentError('No sink chosen for write.', { code: 'NO_SINK', hint: 'call df.write.sink(sink).save() with a MemorySink, ConsoleSink, S3 or DynamoDB sink.' });
    }
    if (!sink.supportedOutputModes.includes(this.saveMode)) {
      throw new IllegalArgumentError(`Data source ${sink.description} does not support ${this.saveMode === 'complete' ? 'overwrite' : 'append'} mode.`, {
        code: 'UNSUPPORTED_SAVE_MODE', hint: `use mode('${sink.supportedOutputModes.includes('append') ? 'append' : 'overwrite'}') with this sink.`,
      });
    }
    const { plan } = this.frame;
    const batch: SinkBatch = {
      batchId: this.id,
      columns: plan.output.map((a) => a.name),
      rows: runBatchQuery(plan),
      outputMode: this.saveMode,
      schema: plan.output.map((a) => ({ name: a.name, type: a.type })),
      partitionId: this.partition,
    };
    await sink.addBatch(batch);
    await sink.onCommitted?.(this.partition, this.id);
  }
}
