/**
 * The query's CloudWatch dashboard: what Spark's streaming tab shows (input and processing rate,
 * batch duration, watermark and event-time lag, state per operator), plus the Lambda side (iterator
 * age), bad and late input, the cost units and an estimate in dollars per hour, and the alarms.
 * Every Sluice metric named here comes from lib/runtime/metric-names.ts, which the handlers
 * publish through lib/aws/observability.ts.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import {
  METRIC, METRIC_DIMENSION_OPERATOR, METRICS_NAMESPACE, OPERATOR_METRIC,
} from '../lib/runtime/metric-names.js';
import { CURRENT_PRICES, unitPrices, type PriceTable } from '../lib/core/price-table.js';

/**
 * On-demand list prices (US East, N. Virginia) the dollars-per-hour widget multiplies the units by.
 * A deployment elsewhere, or under a discount, gives its own (`dashboardPrices`).
 */
export interface DashboardPrices {
  /** Which price list these are (shown on the widget). */
  readonly asOf: string;
  /** DynamoDB on-demand, per write request unit. */
  readonly dynamoDbWriteUnit: number;
  /** DynamoDB on-demand, per read request unit. */
  readonly dynamoDbReadUnit: number;
  /** S3 Standard, per PUT/COPY/POST/LIST request. */
  readonly s3Put: number;
  /** Lambda (arm64), per GB-second. */
  readonly lambdaGbSecond: number;
  /** Lambda, per request. */
  readonly lambdaRequest: number;
}

/** The dashboard's units of the one price table (lib/core/price-table.ts). */
export function dashboardPricesFrom(table: PriceTable): DashboardPrices {
  const { dynamoDbWriteUnit, dynamoDbReadUnit, s3Put, lambdaGbSecond, lambdaRequest } = unitPrices(table);
  return { asOf: table.version, dynamoDbWriteUnit, dynamoDbReadUnit, s3Put, lambdaGbSecond, lambdaRequest };
}

export const DEFAULT_DASHBOARD_PRICES: DashboardPrices = dashboardPricesFrom(CURRENT_PRICES);

export interface QueryDashboardParts {
  readonly queryName: string;
  /** A Sluice metric of this query (namespace, service + query dimensions), sum over 5 minutes. */
  readonly metric: (name: string, options?: cloudwatch.MetricOptions) => cloudwatch.Metric;
  /** Dimensions the per-operator metrics share with the query's (the operator comes on top). */
  readonly dimensions: Readonly<Record<string, string>>;
  readonly kinesisTrigger: lambda.IFunction;
  readonly repartitionTrigger?: lambda.IFunction;
  readonly functions: readonly { readonly fn: lambda.IFunction; readonly memoryMb: number }[];
  readonly onFailureQueue: sqs.IQueue;
  readonly alarms: readonly cloudwatch.IAlarm[];
  readonly prices: DashboardPrices;
  readonly dashboardName?: string;
}

const PERIOD = Duration.minutes(1);
const WIDTH = 8;
const HEIGHT = 6;

export function createQueryDashboard(scope: Construct, id: string, parts: QueryDashboardParts): cloudwatch.Dashboard {
  const m = (name: string, statistic: string = cloudwatch.Stats.SUM, label?: string): cloudwatch.Metric =>
    parts.metric(name, { period: PERIOD, statistic, ...(label ? { label } : {}) });
  const graph = (title: string, left: cloudwatch.IMetric[], options: Partial<cloudwatch.GraphWidgetProps> = {}): cloudwatch.GraphWidget =>
    new cloudwatch.GraphWidget({ title, left, width: WIDTH, height: HEIGHT, period: PERIOD, ...options });

  const inputRows = m(METRIC.inputRows);
  const rates = graph('Input rate and processing rate (rows/s)', [
    new cloudwatch.MathExpression({ expression: 'rows / PERIOD(rows)', usingMetrics: { rows: inputRows }, label: 'input rows/s', period: PERIOD }),
    new cloudwatch.MathExpression({
      expression: 'IF(busy > 0, rows / (busy / 1000), 0)',
      usingMetrics: { rows: inputRows, busy: m(METRIC.batchDurationMs) },
      label: 'processed rows/s (rows per second of batch time)', period: PERIOD,
    }),
  ], { right: [new cloudwatch.MathExpression({
    expression: 'out / PERIOD(out)', usingMetrics: { out: m(METRIC.outputRows) }, label: 'output rows/s', period: PERIOD,
  })] });
  const batchDuration = graph('Batch duration (ms)', [
    m(METRIC.batchDurationMs, cloudwatch.Stats.AVERAGE, 'average'),
    m(METRIC.batchDurationMs, cloudwatch.Stats.p(99), 'p99'),
    m(METRIC.batchDurationMs, cloudwatch.Stats.MAXIMUM, 'maximum'),
  ], { right: [m(METRIC.batches, cloudwatch.Stats.SUM, 'batches')] });
  const iteratorAge = graph('Iterator age (ms behind the stream)', [
    parts.kinesisTrigger.metric('IteratorAge', { statistic: cloudwatch.Stats.MAXIMUM, period: PERIOD, label: 'source stream' }),
    ...(parts.repartitionTrigger
      ? [parts.repartitionTrigger.metric('IteratorAge', { statistic: cloudwatch.Stats.MAXIMUM, period: PERIOD, label: 'internal stream (stage 2)' })]
      : []),
  ]);
  const lag = graph('Watermark and event-time lag (ms behind wall clock)', [
    m(METRIC.watermarkLagMs, cloudwatch.Stats.MAXIMUM, 'watermark delay'),
    m(METRIC.eventTimeLagMs, cloudwatch.Stats.MAXIMUM, 'newest event time lag'),
  ]);
  // Operators are found by SEARCH: their labels come from the plan, unknown to the dashboard.
  const dims = Object.keys(parts.dimensions);
  const queryFilter = Object.entries(parts.dimensions).map(([k, v]) => `${k}="${v}"`).join(' ');
  const stateRows = graph('State rows per operator (largest shard)', [
    new cloudwatch.MathExpression({
      expression: `SEARCH('{${METRICS_NAMESPACE},${[...dims, METRIC_DIMENSION_OPERATOR].join(',')}} MetricName="${OPERATOR_METRIC.stateRows}" ${queryFilter}', 'Maximum', 60)`,
      label: '', period: PERIOD,
    }),
  ]);
  const stateBytes = graph('State bytes written', [m(METRIC.stateBytesWritten, cloudwatch.Stats.SUM, 'bytes written')],
    { right: [m(METRIC.stateRows, cloudwatch.Stats.MAXIMUM, 'state rows, all operators (largest shard)')] });
  const badInput = graph('Late rows, dead letters, failures', [
    m(METRIC.rowsDroppedByWatermark, cloudwatch.Stats.SUM, 'late rows dropped'),
    m(METRIC.deadLetteredRecords, cloudwatch.Stats.SUM, 'dead letters'),
    m(METRIC.failedTriggers, cloudwatch.Stats.SUM, 'failed batches'),
    parts.onFailureQueue.metricApproximateNumberOfMessagesVisible({ period: PERIOD, statistic: cloudwatch.Stats.MAXIMUM, label: 'skipped batches waiting' }),
  ]);
  const units = graph('DynamoDB units and S3 PUTs', [
    m(METRIC.dynamoDbWriteUnits, cloudwatch.Stats.SUM, 'write units'),
    m(METRIC.dynamoDbReadUnits, cloudwatch.Stats.SUM, 'read units'),
    m(METRIC.s3Puts, cloudwatch.Stats.SUM, 'S3 PUTs'),
  ]);
  const dollars = graph(`Estimated $ per hour (${parts.prices.asOf})`, [dollarsPerHour(parts, m)], { leftYAxis: { min: 0 } });
  const alarms = new cloudwatch.AlarmStatusWidget({
    title: 'Alarms (each links to its alarm)', alarms: [...parts.alarms], width: 24, height: 3,
  });

  return new cloudwatch.Dashboard(scope, id, {
    ...(parts.dashboardName ? { dashboardName: parts.dashboardName } : {}),
    defaultInterval: Duration.hours(3),
    widgets: [
      [new cloudwatch.TextWidget({
        markdown: `# Sluice query \`${parts.queryName}\`\nSpark's streaming tab for this query; per-batch progress records are in the functions' logs (\`batch committed\`).`,
        width: 24, height: 2,
      })],
      [alarms],
      [rates, batchDuration, iteratorAge],
      [lag, stateRows, stateBytes],
      [badInput, units, dollars],
    ],
  });
}

/** Units × price, scaled from the period to an hour: DynamoDB, S3 PUTs and Lambda (requests and GB-seconds). */
function dollarsPerHour(
  parts: QueryDashboardParts, m: (name: string, statistic?: string, label?: string) => cloudwatch.Metric,
): cloudwatch.MathExpression {
  const p = parts.prices;
  const usingMetrics: Record<string, cloudwatch.IMetric> = {
    wcu: m(METRIC.dynamoDbWriteUnits), rcu: m(METRIC.dynamoDbReadUnits), puts: m(METRIC.s3Puts),
  };
  const terms = [`FILL(wcu, 0) * ${decimal(p.dynamoDbWriteUnit)}`, `FILL(rcu, 0) * ${decimal(p.dynamoDbReadUnit)}`, `FILL(puts, 0) * ${decimal(p.s3Put)}`];
  parts.functions.forEach(({ fn, memoryMb }, i) => {
    usingMetrics[`ms${i}`] = fn.metricDuration({ statistic: cloudwatch.Stats.SUM, period: PERIOD });
    usingMetrics[`calls${i}`] = fn.metricInvocations({ statistic: cloudwatch.Stats.SUM, period: PERIOD });
    terms.push(`FILL(ms${i}, 0) / 1000 * ${decimal(memoryMb / 1024)} * ${decimal(p.lambdaGbSecond)}`, `FILL(calls${i}, 0) * ${decimal(p.lambdaRequest)}`);
  });
  return new cloudwatch.MathExpression({
    expression: `(${terms.join(' + ')}) * 3600 / PERIOD(wcu)`,
    usingMetrics, label: '$ per hour (DynamoDB, S3 PUTs, Lambda)', period: PERIOD,
  });
}

/** Metric math has no exponent notation (`6.25e-7` would read as identifiers): plain decimals. */
function decimal(n: number): string {
  if (!Number.isFinite(n) || n < 0) throw new Error(`dashboard prices must be non-negative numbers, got ${n}`);
  return n.toFixed(15).replace(/0+$/, '').replace(/\.$/, '');
}
