/**
 * `sluice`: Spark Structured Streaming's model in TypeScript. The session and DataFrame API, the
 * functions, the sinks a query writes to, and the deployable query (`defineQuery`) with the
 * validation `cdk synth` and `sluice explain` run. Test helpers (memory streams and sinks, the
 * testStream DSL, the emulators) are in `sluice/testing`; the construct in `sluice/cdk`; the Lambda
 * handler factories in `sluice/lambda`.
 *
 * @packageDocumentation
 * @module sluice
 */
export { SluiceSession, toSchema, type SchemaLike } from './api/session.js';
export { DataFrame, GroupedData } from './api/data-frame.js';
export {
  KeyValueGroupedDataFrame, type FlatMapGroupsWithStateOptions, type MapGroupsWithStateOptions, type TransformWithStateOptions,
} from './api/key-value-grouped.js';
export type * from './plan/stateful-processor.js';
export { DataStreamWriter } from './api/data-stream-writer.js';
export { Column, interval, type SortOrder } from './plan/column.js';
export * from './plan/functions.js';
export type { MicroBatchStream, Offset } from './sources/source.js';
export { ConsoleSink, formatBatchTable } from './sinks/console-sink.js';
export { ForeachBatchSink } from './sinks/foreach-batch-sink.js';
export type { Sink, SinkBatch } from './sinks/sink.js';
export type { Checkpoint } from './checkpoint/checkpoint.js';
export type { OutputMode } from './core/output-mode.js';
export { Trigger } from './runtime/trigger.js';
export { ManualClock, systemClock, type Clock } from './runtime/clock.js';
export { StreamingQuery } from './runtime/streaming-query.js';
export type { StreamingQueryProgress } from './runtime/progress.js';
export * from './errors/sluice-error.js';
export { runBatchQuery } from './runtime/batch-runner.js';
export {
  defineQuery, type KinesisSourceSpec, type MultiSourceQueryDefinition, type QueryDefinition, type SinkSpec, type StreamingQueryDefinition,
} from './query/query-definition.js';
export { validateQuery, explainQuery, type ValidatedQuery, type ValidateOptions } from './query/validate-query.js';
