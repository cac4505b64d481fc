/**
 * CloudWatch metrics the handlers publish (Embedded Metric Format, through Powertools) and the
 * CDK construct alarms on. One namespace; the query name is the one dimension.
 */
export const METRICS_NAMESPACE = 'Sluice';
export const METRIC_DIMENSION_QUERY = 'query';
/** Second dimension of the per-operator metrics: the operator's index and name (`0:stateStoreSave`). */
export const METRIC_DIMENSION_OPERATOR = 'operator';

export const METRIC = {
  inputRows: 'InputRows',
  outputRows: 'OutputRows',
  deadLetteredRecords: 'DeadLetteredRecords',
  rowsDroppedByWatermark: 'RowsDroppedByWatermark',
  batches: 'Batches',
  batchDurationMs: 'BatchDurationMs',
  failedTriggers: 'FailedTriggers',
  stateRows: 'StateRows',
  dynamoDbWriteUnits: 'DynamoDbWriteUnits',
  dynamoDbReadUnits: 'DynamoDbReadUnits',
  s3Puts: 'S3Puts',
  /** Bytes of state the batch wrote (snapshot and delta items): what the state table grows by. */
  stateBytesWritten: 'StateBytesWritten',
  /** Batch start (wall clock) minus the watermark the batch ran with; only when there is one. */
  watermarkLagMs: 'WatermarkLagMs',
  /** Batch start (wall clock) minus the newest event time the batch read; only when it read rows. */
  eventTimeLagMs: 'EventTimeLagMs',
  /** Records a planned batch lost to the stream's retention before it committed (it ran over the rest; a lost range). */
  expiredPlannedRecords: 'ExpiredPlannedRecords',
} as const;

/** Per stateful operator, dimensions query + operator (see METRIC_DIMENSION_OPERATOR). */
export const OPERATOR_METRIC = {
  stateRows: 'OperatorStateRows',
} as const;
