/**
 * What the `sluice` CLI reads from a deployed SluiceQuery: one stack output describing the query's
 * resources (lib/aws/deployment-lookup.ts), and TTL on the checkpoint table for the progress ring.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SluiceQuery } from '../../cdk/sluice-query.js';
import { descriptorsInFile, findDeployment, isDescriptor } from '../../lib/aws/deployment-lookup.js';
import { DEPLOYMENT_OUTPUT_DESCRIPTION, PROGRESS_RECORDS, type DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';
import { example, testStack } from './support.js';

/** The output's value as CloudFormation would render it, with `<Ref X>` for each reference. */
function render(value: unknown): string {
  if (typeof value === 'string') return value;
  const v = value as Record<string, unknown>;
  if ('Ref' in v) return `<Ref ${String(v.Ref)}>`;
  if ('Fn::GetAtt' in v) return `<GetAtt ${(v['Fn::GetAtt'] as string[]).join('.')}>`;
  if ('Fn::Join' in v) {
    const [sep, parts] = v['Fn::Join'] as [string, unknown[]];
    return parts.map(render).join(sep);
  }
  throw new Error(`unexpected intrinsic ${JSON.stringify(value)}`);
}

describe('SluiceQuery deployment output and progress TTL', () => {
  let stack: Stack;
  let query: SluiceQuery;
  let template: Template;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-outputs-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  beforeAll(() => {
    stack = testStack();
    query = new SluiceQuery(stack, 'Live', { queryModule: example('hourly-sales-live.ts') });
    template = Template.fromStack(stack);
  });

  it('enables TTL on the checkpoint table\'s progress attribute, and only there', () => {
    const ref = (c: { node: { defaultChild?: unknown } }) => stack.getLogicalId(c.node.defaultChild as never);
    const tables = template.findResources('AWS::DynamoDB::Table');
    expect(tables[ref(query.checkpointTable)]!.Properties.TimeToLiveSpecification).toEqual({ AttributeName: PROGRESS_RECORDS.ttlAttribute, Enabled: true });
    expect(tables[ref(query.stateTable)]!.Properties.TimeToLiveSpecification).toBeUndefined();
  });

  it('writes one output whose value is the deployment descriptor the CLI finds the query by', async () => {
    const outputs = Object.entries(template.findOutputs('*')).filter(([, o]) => String(o.Description).startsWith(DEPLOYMENT_OUTPUT_DESCRIPTION));
    expect(outputs).toHaveLength(1);
    const [outputKey, output] = outputs[0]!;
    expect(output.Description).toBe(`${DEPLOYMENT_OUTPUT_DESCRIPTION}${query.queryName}`);
    const descriptor = JSON.parse(render(output.Value)) as DeploymentDescriptor;
    expect(isDescriptor(descriptor)).toBe(true);
    const ref = (c: { node: { defaultChild?: unknown } }) => `<Ref ${stack.getLogicalId(c.node.defaultChild as never)}>`;
    expect(descriptor).toMatchObject({
      sluiceQuery: query.queryName,
      checkpointTable: ref(query.checkpointTable),
      stateTable: ref(query.stateTable),
      streamName: ref(query.stream as never),
      deadLetterBucket: ref(query.deadLetterBucket as never),
      onFailureQueueUrl: ref(query.onFailureQueue),
      sinkTable: ref(query.sinkTable as never),
      expectedShardCount: 1,
    });
    // `cdk deploy --outputs-file` writes { stack: { outputKey: value } }: the CLI reads it as is.
    const file = join(dir, 'outputs.json');
    writeFileSync(file, JSON.stringify({ Test: { [outputKey]: JSON.stringify(descriptor), Other: 'x' } }));
    expect(descriptorsInFile(file)).toEqual([{ ...descriptor, stack: 'Test' }]);
    expect((await findDeployment(query.queryName, { deploymentFile: file })).checkpointTable).toBe(descriptor.checkpointTable);
    await expect(findDeployment('other', { deploymentFile: file })).rejects.toThrow(/No deployed Sluice query named 'other'.*found: hourly-sales-live/s);
  });
});
