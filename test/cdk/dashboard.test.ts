/**
 * The query's CloudWatch dashboard, read from the synthesized template: its widgets chart the
 * metrics the runtime really publishes (captured from recordBatchProgress, not a list copied
 * here), the alarms are on it, the dollars come from units × price, and X-Ray tracing is a prop.
 */
import type { Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { SluiceQuery } from '../../cdk/sluice-query.js';
import { DEFAULT_DASHBOARD_PRICES } from '../../cdk/dashboard.js';
import { METRIC, METRICS_NAMESPACE } from '../../lib/runtime/metric-names.js';
import { TRACING_ENV } from '../../lib/runtime/runtime-config.js';
import { emittedMetricNames } from '../support/emitted-metrics.js';
import { example, nagViolations, testStack } from './support.js';

interface Widget { type: string; properties: { title?: string; metrics?: unknown[][]; alarms?: string[]; markdown?: string } }

/** The dashboard body as JSON; references (function names, alarm ARNs) become `<ref>`. */
function dashboardBody(stack: Stack, template: Template): { widgets: Widget[] } {
  const [dashboard] = Object.values(template.findResources('AWS::CloudWatch::Dashboard')) as { Properties: { DashboardBody: unknown } }[];
  const body = stack.resolve(dashboard!.Properties.DashboardBody) as string | { 'Fn::Join': [string, unknown[]] };
  const text = typeof body === 'string' ? body : body['Fn::Join'][1].map((part) => (typeof part === 'string' ? part : '<ref>')).join('');
  return JSON.parse(text) as { widgets: Widget[] };
}

const titled = (widgets: Widget[], start: string): Widget => {
  const widget = widgets.find((w) => w.properties.title?.startsWith(start));
  expect(widget, `a widget titled "${start}…"`).toBeDefined();
  return widget!;
};

/** Sluice metric names a widget charts: plain metrics, and those named in math/SEARCH expressions. */
function sluiceMetricNames(widgets: Widget[]): Set<string> {
  const names = new Set<string>();
  for (const line of widgets.flatMap((w) => w.properties.metrics ?? [])) {
    if (line[0] === METRICS_NAMESPACE) names.add(String(line[1]));
    const options = line.at(-1) as { expression?: string } | undefined;
    for (const match of options?.expression?.matchAll(/MetricName="([A-Za-z]+)"/g) ?? []) names.add(match[1]!);
  }
  return names;
}

describe('the query dashboard', () => {
  let stack: Stack;
  let query: SluiceQuery;
  let template: Template;
  let widgets: Widget[];

  beforeAll(() => {
    stack = testStack();
    query = new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts') });
    template = Template.fromStack(stack);
    widgets = dashboardBody(stack, template).widgets;
  });

  it('is one dashboard per query, with no synth warning (metric math ids all defined)', () => {
    template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    expect(query.dashboard).toBeDefined();
    expect(Annotations.fromStack(stack).findWarning('*', Match.anyValue()).map((w) => w.entry.data)).toEqual([]);
  });

  it('adds the repartition function\'s iterator age and Lambda cost with a repartition stage', () => {
    const staged = testStack();
    const q = new SluiceQuery(staged, 'Staged', { queryModule: example('hourly-sales-per-product.ts'), shardCount: 2 });
    expect(q.repartitionFunction).toBeDefined();
    expect(Annotations.fromStack(staged).findWarning('*', Match.anyValue()).map((w) => w.entry.data)).toEqual([]);
    const body = dashboardBody(staged, Template.fromStack(staged)).widgets;
    expect(titled(body, 'Iterator age').properties.metrics!.filter((l) => l[1] === 'IteratorAge')).toHaveLength(2);
    expect((titled(body, 'Estimated $ per hour').properties.metrics![0]!.at(-1) as { expression: string }).expression).toContain('FILL(ms2, 0)');
  });

  it('charts every metric a committed batch publishes, and only metrics the runtime publishes', () => {
    const published = emittedMetricNames();
    const charted = sluiceMetricNames(widgets);
    for (const name of published) expect(charted, `${name} is published but not charted`).toContain(name);
    // FailedTriggers is published by the handlers when a batch fails, not by a committed batch.
    for (const name of charted) expect([...published, METRIC.failedTriggers], `${name} is charted but never published`).toContain(name);
  });

  it('has the streaming-tab figures, the Lambda iterator age and the dead-letter and skipped-batch counts', () => {
    const rates = titled(widgets, 'Input rate and processing rate');
    const expressions = rates.properties.metrics!.map((l) => (l.at(-1) as { expression?: string }).expression).filter(Boolean);
    expect(expressions).toEqual(['rows / PERIOD(rows)', 'IF(busy > 0, rows / (busy / 1000), 0)', 'out / PERIOD(out)']);
    expect(JSON.stringify(titled(widgets, 'Iterator age').properties.metrics)).toContain('"AWS/Lambda","IteratorAge"');
    const perOperator = JSON.stringify(titled(widgets, 'State rows per operator').properties.metrics);
    expect(perOperator).toContain(`SEARCH('{Sluice,service,query,operator} MetricName=\\"OperatorStateRows\\" service=\\"sluice\\" query=\\"hourly-sales-live\\"'`);
    const bad = JSON.stringify(titled(widgets, 'Late rows, dead letters').properties.metrics);
    expect(bad).toContain(METRIC.deadLetteredRecords);
    expect(bad).toContain('"AWS/SQS","ApproximateNumberOfMessagesVisible"');
    titled(widgets, 'Watermark and event-time lag');
    titled(widgets, 'Batch duration');
  });

  it('estimates dollars per hour as units × price, DynamoDB, S3 and each function\'s Lambda time', () => {
    const [line] = titled(widgets, 'Estimated $ per hour').properties.metrics!;
    const expression = (line!.at(-1) as { expression: string }).expression;
    // $0.625 and $0.125 per million request units, $0.005 per 1000 PUTs, in plain decimals (no 6.25e-7:
    // metric math has no exponent notation).
    expect(DEFAULT_DASHBOARD_PRICES.dynamoDbWriteUnit).toBeCloseTo(6.25e-7, 15);
    expect(expression).toContain('FILL(wcu, 0) * 0.000000625 + FILL(rcu, 0) * 0.000000125 + FILL(puts, 0) * 0.000005');
    // Two functions (Kinesis trigger, scheduled) of 1024 MB: GB-seconds (arm64 price) and requests each.
    expect(expression).toContain('FILL(ms1, 0) / 1000 * 1 * 0.0000133334 + FILL(calls1, 0) * 0.0000002');
    expect(expression).not.toContain('ms2');
    expect(expression).toMatch(/\* 3600 \/ PERIOD\(wcu\)$/);
    const ids = titled(widgets, 'Estimated $ per hour').properties.metrics!.map((l) => (l.at(-1) as { id?: string }).id);
    expect(ids).toEqual(expect.arrayContaining(['wcu', 'rcu', 'puts', 'ms0', 'calls0', 'ms1', 'calls1']));
  });

  it('shows every alarm of the query in an alarm status widget (each entry links to its alarm)', () => {
    const status = widgets.find((w) => w.type === 'alarm')!;
    expect(status.properties.alarms).toHaveLength(Object.keys(query.alarms).length);
    expect(Object.keys(query.alarms)).toHaveLength(7);
  });

  it('is left out with dashboard: false, and traces nothing by default', () => {
    const quiet = testStack();
    new SluiceQuery(quiet, 'Live', { queryModule: example('hourly-sales-live.ts'), dashboard: false });
    Template.fromStack(quiet).resourceCountIs('AWS::CloudWatch::Dashboard', 0);
    template.allResourcesProperties('AWS::Lambda::Function', { TracingConfig: Match.absent() });
    expect(query.environment[TRACING_ENV]).toBeUndefined();
  });

  it('with tracing: true, turns on X-Ray active tracing and Powertools Tracer in every function', () => {
    const traced = testStack();
    const q = new SluiceQuery(traced, 'Live', { queryModule: example('hourly-sales-live.ts'), tracing: true });
    const t = Template.fromStack(traced);
    const functions = Object.values(t.findResources('AWS::Lambda::Function')) as { Properties: { TracingConfig?: unknown; Environment: { Variables: Record<string, unknown> } } }[];
    const sluiceFunctions = functions.filter((f) => f.Properties.Environment?.Variables?.[TRACING_ENV] !== undefined);
    expect(sluiceFunctions).toHaveLength([...q.functions(), q.onFailureFunction].length);
    for (const f of sluiceFunctions) expect(f.Properties.TracingConfig).toEqual({ Mode: 'Active' });
    t.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Action: ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'] })]) },
    });
    expect(nagViolations(traced)).toEqual([]);
  });
});
