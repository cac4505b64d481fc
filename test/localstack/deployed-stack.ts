/**
 * What `cdklocal deploy SluiceExampleStack` left in LocalStack, read back through the SDK: the
 * template's resources beside the stack's, each with its status and LocalStack's reason.
 */
import { readFileSync } from 'node:fs';
import {
  CloudFormationClient, DescribeStackEventsCommand, DescribeStacksCommand, paginateListStackResources,
  type StackEvent, type StackResourceSummary,
} from '@aws-sdk/client-cloudformation';

export const STACK_NAME = 'SluiceExampleStack';

export interface TemplateResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
}

export interface ResourceOutcome {
  readonly logicalId: string;
  readonly type: string;
  /** CREATE_COMPLETE, CREATE_FAILED, ..., or NOT_ATTEMPTED when the stack never reached it. */
  readonly status: string;
  readonly physicalId?: string;
  readonly reason?: string;
}

export interface DeployedStack {
  readonly status: string;
  readonly statusReason?: string;
  readonly outputs: Record<string, string>;
  readonly template: Record<string, TemplateResource>;
  readonly outcomes: ResourceOutcome[];
  physicalId(logicalId: string): string;
}

export async function readDeployedStack(cfn: CloudFormationClient, templatePath: string): Promise<DeployedStack> {
  const template = (JSON.parse(readFileSync(templatePath, 'utf8')) as { Resources: Record<string, TemplateResource> }).Resources;
  const { Stacks } = await cfn.send(new DescribeStacksCommand({ StackName: STACK_NAME }));
  const stack = Stacks![0]!;
  const resources = new Map<string, StackResourceSummary>();
  for await (const page of paginateListStackResources({ client: cfn }, { StackName: STACK_NAME })) {
    for (const r of page.StackResourceSummaries ?? []) resources.set(r.LogicalResourceId!, r);
  }
  const failures = new Map<string, string>();
  let next: string | undefined;
  do {
    const page = await cfn.send(new DescribeStackEventsCommand({ StackName: STACK_NAME, NextToken: next }));
    for (const e of page.StackEvents ?? []) if (isFailure(e) && !failures.has(e.LogicalResourceId!)) failures.set(e.LogicalResourceId!, e.ResourceStatusReason ?? '');
    next = page.NextToken;
  } while (next);
  const outcomes = Object.entries(template).map(([logicalId, r]): ResourceOutcome => {
    const deployed = resources.get(logicalId);
    return {
      logicalId, type: r.Type,
      status: deployed?.ResourceStatus ?? 'NOT_ATTEMPTED',
      physicalId: deployed?.PhysicalResourceId,
      reason: deployed?.ResourceStatusReason ?? failures.get(logicalId),
    };
  });
  return {
    status: stack.StackStatus!,
    statusReason: stack.StackStatusReason,
    outputs: Object.fromEntries((stack.Outputs ?? []).map((o) => [o.OutputKey!, o.OutputValue!])),
    template,
    outcomes,
    physicalId(logicalId) {
      const id = resources.get(logicalId)?.PhysicalResourceId;
      if (!id) throw new Error(`${logicalId} was not created (${outcomes.find((o) => o.logicalId === logicalId)?.status})`);
      return id;
    },
  };
}

function isFailure(e: StackEvent): boolean {
  return (e.ResourceStatus ?? '').endsWith('_FAILED');
}

/** The logical ids of a template's resources of one type whose id starts with `prefix` (a construct path, flattened). */
export function logicalIds(template: Record<string, TemplateResource>, type: string, prefix = ''): string[] {
  return Object.entries(template).filter(([id, r]) => r.Type === type && id.startsWith(prefix)).map(([id]) => id).sort();
}

/** A Markdown table of the outcomes, type by type, for the report and docs. */
export function outcomeTable(outcomes: readonly ResourceOutcome[]): string {
  const byType = new Map<string, ResourceOutcome[]>();
  for (const o of outcomes) byType.set(o.type, [...(byType.get(o.type) ?? []), o]);
  const lines = ['| resource type | in template | created | not created (status: reason) |', '|---|---|---|---|'];
  for (const [type, list] of [...byType].sort(([a], [b]) => a.localeCompare(b))) {
    const created = list.filter((o) => o.status === 'CREATE_COMPLETE' || o.status === 'UPDATE_COMPLETE');
    const missing = list.filter((o) => !created.includes(o));
    const why = [...new Set(missing.map((o) => `${o.status}${o.reason ? `: ${o.reason.replace(/\|/g, '\\|').slice(0, 200)}` : ''}`))].join('; ');
    lines.push(`| ${type} | ${list.length} | ${created.length} | ${why} |`);
  }
  return lines.join('\n');
}
