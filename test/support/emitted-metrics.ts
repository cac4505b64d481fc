/**
 * What the runtime really publishes for a batch: runs lib/aws/observability.ts's
 * recordBatchProgress on a progress record and reads back its Embedded Metric Format documents
 * (Powertools prints them through the global console in POWERTOOLS_DEV mode).
 */
import { vi } from 'vitest';
import { createObservability, recordBatchProgress, type Observability } from '../../lib/aws/observability.js';
import type { StreamingQueryProgress } from '../../lib/runtime/progress.js';

export interface EmfDocument {
  readonly _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string; Unit: string }[] }[] };
  readonly [key: string]: unknown;
}

/** A batch with a watermark, event times and two stateful operators. */
export function sampleProgress(overrides: Partial<StreamingQueryProgress> = {}): StreamingQueryProgress {
  const op = (operatorName: string, numRowsTotal: number) => ({
    operatorName, numRowsTotal, numRowsUpdated: 2, numRowsRemoved: 0, numRowsDroppedByWatermark: 1, numOutputRows: 2,
    numShufflePartitions: 1, numStateStoreInstances: 1, customMetrics: {},
  });
  return {
    id: 'id', runId: 'run', name: 'q', timestamp: '2026-12-04T12:00:10.000Z', batchId: 3, batchDuration: 40, numInputRows: 25,
    inputRowsPerSecond: 625, processedRowsPerSecond: 625, durationMs: { addBatch: 30, triggerExecution: 40 },
    eventTime: { min: '2026-12-04T11:50:00.000Z', max: '2026-12-04T12:00:00.000Z', avg: '2026-12-04T11:55:00.000Z', watermark: '2026-12-04T11:45:00.000Z' },
    batchWatermarkMs: Date.parse('2026-12-04T11:45:00.000Z'),
    stateOperators: [op('stateStoreSave', 7), op('dedupe', 4)],
    sources: [], sink: { description: 'sink', numOutputRows: 2 }, numDeadLetteredRows: 1, numRowsNullEventTime: 0,
    cost: { dynamoDbWriteUnits: 3, dynamoDbReadUnits: 1.5, s3Puts: 1, stateBytesWritten: 800 },
    ...overrides,
  };
}

export function emitBatchMetrics(progress: StreamingQueryProgress = sampleProgress(), queryName = 'q'): EmfDocument[] {
  return emitMetrics((observability) => recordBatchProgress(observability, 'shardId-000000000000', progress), queryName);
}

/** The EMF documents `record` publishes (its log lines are not under test). */
export function emitMetrics(record: (observability: Observability) => void, queryName = 'q'): EmfDocument[] {
  const saved = { dev: process.env.POWERTOOLS_DEV, disabled: process.env.POWERTOOLS_METRICS_DISABLED };
  process.env.POWERTOOLS_DEV = 'true';
  process.env.POWERTOOLS_METRICS_DISABLED = 'false';
  const lines: string[] = [];
  const spy = vi.spyOn(console, 'log').mockImplementation((text: unknown) => { lines.push(String(text)); });
  // The logger's 'batch committed' line (pretty-printed in dev mode) is not under test here.
  const quiet = vi.spyOn(console, 'info').mockImplementation(() => {});
  const quietWarn = vi.spyOn(console, 'warn').mockImplementation(() => {});
  try {
    const observability = createObservability(queryName);
    record(observability);
    observability.metrics.publishStoredMetrics();
  } finally {
    spy.mockRestore();
    quiet.mockRestore();
    quietWarn.mockRestore();
    if (saved.dev === undefined) delete process.env.POWERTOOLS_DEV; else process.env.POWERTOOLS_DEV = saved.dev;
    if (saved.disabled === undefined) delete process.env.POWERTOOLS_METRICS_DISABLED; else process.env.POWERTOOLS_METRICS_DISABLED = saved.disabled;
  }
  return lines.filter((l) => l.startsWith('{') && l.includes('"_aws"')).map((l) => JSON.parse(l) as EmfDocument);
}

export function emittedMetricNames(docs: readonly EmfDocument[] = emitBatchMetrics()): Set<string> {
  return new Set(docs.flatMap((d) => d._aws.CloudWatchMetrics.flatMap((m) => m.Metrics.map((x) => x.Name))));
}
