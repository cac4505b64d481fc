/**
 * Finds a deployed query's tables, streams, buckets and queue for the `sluice` CLI. In order:
 *
 *   1. `--deployment <file>`: the descriptor JSON itself, or `cdk deploy --outputs-file`'s JSON
 *      (stack → output → value), whose Sluice output is the descriptor.
 *   2. CloudFormation: the SluiceQuery construct writes one output per query (description
 *      `DEPLOYMENT_OUTPUT_DESCRIPTION<query>`, value the descriptor JSON); every stack of the
 *      account and region is searched, or only `--stack`.
 */
import { readFileSync } from 'node:fs';
import { CloudFormationClient, paginateDescribeStacks } from '@aws-sdk/client-cloudformation';
import { DEPLOYMENT_OUTPUT_DESCRIPTION, type DeploymentDescriptor } from '../runtime/runtime-config.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';

/** A query that cannot be found is a usage error (exit code 2): the name or the file is wrong. */
export class DeploymentNotFoundError extends IllegalArgumentError {}

export function isDescriptor(value: unknown): value is DeploymentDescriptor {
  const v = value as Partial<DeploymentDescriptor> | null;
  return typeof v === 'object' && v !== null && typeof v.sluiceQuery === 'string' && typeof v.checkpointTable === 'string'
    && typeof v.stateTable === 'string' && typeof v.streamName === 'string' && typeof v.deadLetterBucket === 'string';
}

/** The descriptors in a file: one descriptor, a list of them, or a CDK outputs file. */
export function descriptorsInFile(path: string): DeploymentDescriptor[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new DeploymentNotFoundError(`Cannot read the deployment file ${path}: ${(error as Error).message}`, { code: 'DEPLOYMENT_FILE' });
  }
  const found: DeploymentDescriptor[] = [];
  const visit = (value: unknown, stack?: string): void => {
    if (typeof value === 'string') {
      try { visit(JSON.parse(value), stack); } catch { /* an output that is not ours */ }
    } else if (isDescriptor(value)) {
      found.push(stack && !value.stack ? { ...value, stack } : value);
    } else if (Array.isArray(value)) {
      for (const v of value) visit(v, stack);
    } else if (typeof value === 'object' && value !== null) {
      for (const [k, v] of Object.entries(value)) visit(v, stack ?? (typeof v === 'object' ? k : undefined));
    }
  };
  visit(parsed);
  return found;
}

export interface LookupOptions {
  readonly deploymentFile?: string;
  readonly stack?: string;
  readonly cloudFormation?: () => CloudFormationClient;
}

export async function findDeployment(query: string, options: LookupOptions): Promise<DeploymentDescriptor> {
  const candidates = options.deploymentFile
    ? descriptorsInFile(options.deploymentFile)
    : await descriptorsInStacks(options.cloudFormation?.() ?? new CloudFormationClient({}), options.stack);
  const matches = candidates.filter((d) => d.sluiceQuery === query && (!options.stack || !d.stack || d.stack === options.stack));
  if (matches.length === 1) return matches[0]!;
  const where = options.deploymentFile ? `in ${options.deploymentFile}` : options.stack ? `in stack ${options.stack}` : 'in any CloudFormation stack of this account and region';
  if (matches.length > 1) {
    throw new DeploymentNotFoundError(`Query '${query}' is deployed ${matches.length} times ${where} (stacks ${matches.map((m) => m.stack ?? '?').join(', ')}).`, {
      code: 'DEPLOYMENT_AMBIGUOUS', hint: 'name the stack with --stack.',
    });
  }
  const known = [...new Set(candidates.map((c) => c.sluiceQuery))];
  throw new DeploymentNotFoundError(`No deployed Sluice query named '${query}' ${where}${known.length ? ` (found: ${known.join(', ')})` : ''}.`, {
    code: 'DEPLOYMENT_NOT_FOUND',
    hint: 'deploy it with the SluiceQuery construct (its stack has an output described "Sluice query deployment"), '
      + 'or pass --deployment with a descriptor or `cdk deploy --outputs-file` JSON; check the region (AWS_REGION) and credentials.',
  });
}

async function descriptorsInStacks(client: CloudFormationClient, stack: string | undefined): Promise<DeploymentDescriptor[]> {
  const found: DeploymentDescriptor[] = [];
  for await (const page of paginateDescribeStacks({ client }, stack ? { StackName: stack } : {})) {
    for (const s of page.Stacks ?? []) {
      for (const output of s.Outputs ?? []) {
        if (!output.Description?.startsWith(DEPLOYMENT_OUTPUT_DESCRIPTION) || !output.OutputValue) continue;
        try {
          const value: unknown = JSON.parse(output.OutputValue);
          if (isDescriptor(value)) found.push({ ...value, stack: s.StackName });
        } catch { /* not a descriptor */ }
      }
    }
  }
  return found;
}
