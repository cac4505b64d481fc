/** The metrics a committed batch publishes (EMF through Powertools), read back from the output. */
import { describe, expect, it } from 'vitest';
import { METRIC, METRIC_DIMENSION_OPERATOR, METRICS_NAMESPACE, OPERATOR_METRIC } from '../../lib/runtime/metric-names.js';
import { emitBatchMetrics, emitMetrics, sampleProgress } from '../support/emitted-metrics.js';
import { recordExpiredLoss } from '../../lib/aws/observability.js';

describe('recordBatchProgress', () => {
  it('publishes the per-query figures with their values', () => {
    const docs = emitBatchMetrics();
    const query = docs.find((d) => d._aws.CloudWatchMetrics[0]!.Dimensions[0]!.length === 2)!;
    expect(query._aws.CloudWatchMetrics[0]!.Namespace).toBe(METRICS_NAMESPACE);
    expect(query).toMatchObject({
      query: 'q', service: 'sluice',
      [METRIC.inputRows]: 25, [METRIC.outputRows]: 2, [METRIC.batchDurationMs]: 40, [METRIC.stateRows]: 11,
      [METRIC.rowsDroppedByWatermark]: 2, [METRIC.deadLetteredRecords]: 1, [METRIC.dynamoDbWriteUnits]: 3,
      [METRIC.dynamoDbReadUnits]: 1.5, [METRIC.s3Puts]: 1, [METRIC.stateBytesWritten]: 800,
      // 12:00:10 minus the 11:45 watermark; minus the 12:00 newest event time.
      [METRIC.watermarkLagMs]: 15 * 60_000 + 10_000, [METRIC.eventTimeLagMs]: 10_000,
    });
  });

  it('publishes state rows per operator under an operator dimension', () => {
    const perOperator = emitBatchMetrics().filter((d) => d._aws.CloudWatchMetrics[0]!.Dimensions[0]!.includes(METRIC_DIMENSION_OPERATOR));
    expect(perOperator.map((d) => [d[METRIC_DIMENSION_OPERATOR], d[OPERATOR_METRIC.stateRows]])).toEqual([['0:stateStoreSave', 7], ['1:dedupe', 4]]);
    expect(perOperator[0]).toMatchObject({ query: 'q', service: 'sluice' });
  });

  it('leaves the lags out when the batch has no watermark and read no rows', () => {
    const [doc] = emitBatchMetrics(sampleProgress({ eventTime: {}, batchWatermarkMs: 0, stateOperators: [] }));
    expect(doc).not.toHaveProperty(METRIC.watermarkLagMs);
    expect(doc).not.toHaveProperty(METRIC.eventTimeLagMs);
    expect(doc).toHaveProperty(METRIC.inputRows, 25);
  });
});

describe('recordExpiredLoss', () => {
  it('counts the planned records a batch lost to retention', () => {
    const docs = emitMetrics((o) => recordExpiredLoss(o, 'shardId-000000000000', 'state', {
      shardId: 'shardId-000000000000', batchId: 4, firstSequenceNumber: '10', lastSequenceNumber: '12', count: 3,
      lostSources: [{ src: 'shardId-000000000001', lo: '0', hi: 'ff', fromBatch: 7, toBatch: 9 }],
    }));
    expect(docs.map((d) => d[METRIC.expiredPlannedRecords])).toEqual([3]);
  });
});
