/**
 * Logs and metrics the AWS way: Powertools' structured JSON logger and CloudWatch Embedded Metric
 * Format, one progress line and one set of metrics per batch. `POWERTOOLS_LOG_LEVEL` and
 * `POWERTOOLS_METRICS_DISABLED` turn them down (`sluice dev` prints its own view instead).
 * Logged errors carry no data values (lib/aws/log-redaction.ts) unless the log level is DEBUG or
 * TRACE; the dead-letter objects keep the records and the full reasons.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { StreamingQueryProgress } from '../runtime/progress.js';
import type { ExpiredPlannedRecords } from '../query/partition-backends.js';
import { METRIC, METRIC_DIMENSION_OPERATOR, METRIC_DIMENSION_QUERY, METRICS_NAMESPACE, OPERATOR_METRIC } from '../runtime/metric-names.js';
import { operatorLabel, progressLags, totalRowsDroppedByWatermark, totalStateRows } from '../runtime/progress-figures.js';
import { dataRedactingReplacer } from './log-redaction.js';

export interface Observability {
  readonly logger: Logger;
  readonly metrics: Metrics;
}

export function createObservability(queryName: string, serviceName = 'sluice'): Observability {
  const logger: Logger = new Logger({
    serviceName, persistentKeys: { query: queryName },
    jsonReplacerFn: dataRedactingReplacer(() => logsDataValues(logger)),
  });
  const metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName });
  metrics.setDefaultDimensions({ [METRIC_DIMENSION_QUERY]: queryName });
  return { logger, metrics };
}

/** Debug logging (POWERTOOLS_LOG_LEVEL=DEBUG or TRACE) is the switch that lets data values into logs. */
export function logsDataValues(logger: Logger): boolean {
  const level = logger.getLevelName();
  return level === 'DEBUG' || level === 'TRACE';
}

/**
 * A planned batch ran without its oldest records, which expired from the stream (recorded as a lost
 * range that `sluice status` lists): said where alarms and logs look too. Sequence numbers and batch
 * ids only, no data values.
 */
export function recordExpiredLoss(observability: Observability, shardId: string, stage: string, loss: ExpiredPlannedRecords): void {
  observability.logger.warn('planned batch records expired from the stream: the batch ran over the rest', {
    shardId, stage, batchId: loss.batchId, expired: loss.count, first: loss.firstSequenceNumber, last: loss.lastSequenceNumber,
    ...(loss.lostSources ? { lostSources: loss.lostSources } : {}),
  });
  observability.metrics.addMetric(METRIC.expiredPlannedRecords, MetricUnit.Count, loss.count);
}

export function recordBatchProgress(observability: Observability, shardId: string, progress: StreamingQueryProgress, stage = 'single'): void {
  const { logger, metrics } = observability;
  const dropped = totalRowsDroppedByWatermark(progress);
  const stateRows = totalStateRows(progress);
  logger.info('batch committed', { shardId, stage, progress });
  metrics.addMetric(METRIC.batches, MetricUnit.Count, 1);
  metrics.addMetric(METRIC.inputRows, MetricUnit.Count, progress.numInputRows);
  metrics.addMetric(METRIC.outputRows, MetricUnit.Count, progress.sink.numOutputRows);
  metrics.addMetric(METRIC.deadLetteredRecords, MetricUnit.Count, progress.numDeadLetteredRows);
  metrics.addMetric(METRIC.rowsDroppedByWatermark, MetricUnit.Count, dropped);
  metrics.addMetric(METRIC.stateRows, MetricUnit.Count, stateRows);
  metrics.addMetric(METRIC.batchDurationMs, MetricUnit.Milliseconds, progress.batchDuration);
  metrics.addMetric(METRIC.dynamoDbWriteUnits, MetricUnit.Count, progress.cost.dynamoDbWriteUnits ?? 0);
  metrics.addMetric(METRIC.dynamoDbReadUnits, MetricUnit.Count, progress.cost.dynamoDbReadUnits ?? 0);
  metrics.addMetric(METRIC.s3Puts, MetricUnit.Count, progress.cost.s3Puts ?? 0);
  metrics.addMetric(METRIC.stateBytesWritten, MetricUnit.Bytes, progress.cost.stateBytesWritten ?? 0);
  const lags = progressLags(progress);
  if (lags.watermarkLagMs !== undefined) metrics.addMetric(METRIC.watermarkLagMs, MetricUnit.Milliseconds, lags.watermarkLagMs);
  if (lags.eventTimeLagMs !== undefined) metrics.addMetric(METRIC.eventTimeLagMs, MetricUnit.Milliseconds, lags.eventTimeLagMs);
  // A second dimension needs its own EMF document (a single metric publishes at once): one line
  // per operator and batch, so only the figure the dashboard charts per operator.
  progress.stateOperators.forEach((op, index) => {
    const perOperator = metrics.singleMetric();
    perOperator.addDimension(METRIC_DIMENSION_OPERATOR, operatorLabel(index, op.operatorName));
    perOperator.addMetric(OPERATOR_METRIC.stateRows, MetricUnit.Count, op.numRowsTotal);
  });
}

/** No log lines and no EMF output: local runs and tests, which show progress their own way. */
export function createQuietObservability(queryName: string): Observability {
  // Powertools reads this switch from the environment only.
  process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
  const logger = new Logger({ serviceName: 'sluice', logLevel: 'SILENT', persistentKeys: { query: queryName } });
  const metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName: 'sluice' });
  return { logger, metrics };
}
