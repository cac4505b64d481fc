/**
 * What a query costs, counted where the money is spent: the adapters add DynamoDB capacity units,
 * S3 requests and Kinesis calls as they make them; progress reports the difference per batch.
 */
export type CostMetric =
  | 'dynamoDbWriteUnits'
  | 'dynamoDbReadUnits'
  | 's3Puts'
  | 's3Gets'
  | 's3Lists'
  | 'kinesisGetRecords'
  | 'kinesisPutRecords'
  | 'repartitionRecords'
  | 'repartitionBytes'
  | 'stateBytesWritten'
  | 'stateBytesRead';

export class CostMeter {
  private readonly totals = new Map<CostMetric, number>();

  add(metric: CostMetric, amount: number): void {
    if (!Number.isFinite(amount) || amount === 0) return;
    this.totals.set(metric, (this.totals.get(metric) ?? 0) + amount);
  }

  snapshot(): Record<string, number> {
    return Object.fromEntries(this.totals);
  }

  /** The cost accrued since `before` (a snapshot), metrics that did not move omitted. */
  since(before: Readonly<Record<string, number>>): Record<string, number> {
    const delta: Record<string, number> = {};
    for (const [metric, total] of this.totals) {
      const d = total - (before[metric] ?? 0);
      if (d !== 0) delta[metric] = Math.round(d * 1000) / 1000;
    }
    return delta;
  }
}
