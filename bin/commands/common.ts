/**
 * What every command against a deployed query shares: where AWS is (default credential chain and
 * region, or `--endpoint` for LocalStack and emulators), how the query's resources are found
 * (lib/aws/deployment-lookup.ts), plain text or `--json`, and the exit codes:
 * 0 healthy / done, 1 unhealthy / failed, 2 usage error (bad option, unknown query).
 */
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { SQSClient } from '@aws-sdk/client-sqs';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { createAwsClients, type AwsClientOptions, type AwsClients, type AwsEndpoints } from '../../lib/aws/clients.js';
import { findDeployment } from '../../lib/aws/deployment-lookup.js';
import { readNamespacePointer } from '../../lib/aws/query-namespace.js';
import type { DeploymentDescriptor } from '../../lib/runtime/runtime-config.js';

export const EXIT = { ok: 0, unhealthy: 1, usage: 2 } as const;

export interface AwsOptions {
  readonly endpoint?: string[];
  readonly region?: string;
  readonly deployment?: string;
  readonly stack?: string;
  readonly json?: boolean;
}

type Service = keyof AwsEndpoints | 'sqs' | 'cloudformation';
const SERVICES: readonly Service[] = ['kinesis', 'dynamodb', 's3', 'sqs', 'cloudformation'];

/** `--endpoint URL` (every service, LocalStack) or `--endpoint service=URL` (repeatable, emulators). */
export function parseEndpoints(values: readonly string[] = []): Partial<Record<Service, string>> {
  const endpoints: Partial<Record<Service, string>> = {};
  for (const value of values) {
    const m = /^(\w+)=(.+)$/.exec(value);
    if (!m) {
      for (const s of SERVICES) endpoints[s] ??= value;
      continue;
    }
    const service = m[1]!.toLowerCase() as Service;
    if (!SERVICES.includes(service)) throw new InvalidArgumentError(`--endpoint: unknown service '${m[1]}' (one of ${SERVICES.join(', ')}).`);
    endpoints[service] = m[2]!;
  }
  return endpoints;
}

export function addAwsOptions(command: Command): Command {
  return command
    .addOption(new Option('--endpoint <url>', 'AWS endpoint for every service (LocalStack), or service=url (kinesis, dynamodb, s3, sqs, cloudformation); repeatable')
      .argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]))
    .option('--region <region>', 'AWS region (default: the SDK\'s: AWS_REGION, the profile)')
    .option('--deployment <file>', 'the query\'s deployment descriptor, or `cdk deploy --outputs-file` JSON (default: search CloudFormation outputs)')
    .option('--stack <name>', 'the CloudFormation stack the query is deployed in (default: search every stack)')
    .option('--json', 'print JSON instead of text');
}

export interface Connected {
  readonly clients: AwsClients;
  readonly sqs: SQSClient;
  readonly deployment: DeploymentDescriptor;
  close(): void;
}

/** Clients for the deployment's services, and the deployment of `query`. */
export async function connect(query: string, options: AwsOptions): Promise<Connected> {
  const endpoints = parseEndpoints(options.endpoint);
  const clientOptions: AwsClientOptions = {
    ...(options.region ? { region: options.region } : {}),
    endpoints: { kinesis: endpoints.kinesis, dynamodb: endpoints.dynamodb, s3: endpoints.s3 },
  };
  const region = options.region ?? process.env.AWS_REGION;
  const cloudFormation = (): CloudFormationClient => new CloudFormationClient({
    ...(region ? { region } : {}), ...(endpoints.cloudformation ? { endpoint: endpoints.cloudformation } : {}),
  });
  const found = await findDeployment(query, { deploymentFile: options.deployment, stack: options.stack, cloudFormation });
  const clients = createAwsClients(clientOptions);
  // After a replay's cutover the query's checkpoint and state live in another namespace.
  const { active } = await readNamespacePointer(clients.dynamodb, found.checkpointTable, found.sluiceQuery);
  const deployment: DeploymentDescriptor = active.namespace === found.sluiceQuery ? found : { ...found, activeNamespace: active.namespace };
  const sqs = new SQSClient({ ...(region ? { region } : {}), ...(endpoints.sqs ? { endpoint: endpoints.sqs } : {}) });
  return { clients, sqs, deployment, close: () => { clients.destroy(); sqs.destroy(); } };
}

export function positiveInt(name: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`${name} must be a positive integer.`);
    return n;
  };
}

export function print(options: { json?: boolean }, json: unknown, text: () => string): void {
  process.stdout.write(options.json ? `${JSON.stringify(json, null, 2)}\n` : `${text()}\n`);
}

export const formatTime = (ms: number | null | undefined): string =>
  ms === null || ms === undefined ? '-' : ms <= 0 ? 'none' : new Date(ms).toISOString();

/** A plain-text table: columns padded to their widest cell. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}
