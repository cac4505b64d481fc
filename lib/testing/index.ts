/**
 * `sluice/testing`: what a query's tests use. Memory sources, sinks and checkpoints; Spark's
 * StreamTest DSL (`testStream(df, mode)(addData(...), checkNewAnswer(...), ...)`); and the local
 * AWS emulators `sluice dev` runs on (kinesis-mock, DynamoDB Local, s3rver: optional peer
 * dependencies, installed next to sluice when used).
 *
 * @packageDocumentation
 * @module sluice/testing
 */
export { MemoryStream } from '../sources/memory-stream.js';
export { JsonMemoryStream, type InvalidRecord, type JsonMemoryStreamOptions } from '../sources/json-memory-stream.js';
export { MemorySink } from '../sinks/memory-sink.js';
export { memorySinks } from '../api/data-stream-writer.js';
export { MemoryCheckpoint } from '../checkpoint/memory-checkpoint.js';
export {
  testStream, startStream, stopStream, addData, checkAnswer, checkNewAnswer, checkLastBatch, assertStateOperators,
  assertOnQuery, type StreamAction,
} from './test-stream.js';
export { startEmulators, type EmulatorSet, type StartEmulatorsOptions } from '../local/emulators.js';
export { runDev, type DevOptions, type DevSummary } from '../local/dev/run-dev.js';
