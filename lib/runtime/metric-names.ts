/**
 * CloudWatch metrics the handlers publish (Embedded Metric Format, through Powertools) and the
 * CDK construct alarms on. One namespace; the query name is the one dimension.
 */
export const METRICS_NAMESPACE = 'Sluice';
export const METRIC_DIMENSION_QUERY = 'query';

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
} as const;
