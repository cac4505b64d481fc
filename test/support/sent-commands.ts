/**
 * Records the AWS SDK commands each deployed function sends while a test drives it on the
 * emulators, as the IAM actions and resources they need. The emulators enforce no IAM, so this is
 * what lets a test compare the code's calls with the construct's grants (test/cdk/support.ts).
 *
 * Every client made by lib/aws/clients.ts gets a recording middleware (the test file mocks that
 * module with `recordingClientsModule`); the function a call belongs to comes from the
 * AsyncLocalStorage context `asFunction` opens around each handler invocation. Calls outside one
 * (test setup, the local event source mapping's own polling) are not recorded.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { AwsClients } from '../../lib/aws/clients.js';
import type { FunctionRole, InvocationWrapper } from './aws-pipeline.js';

/** One IAM action on one resource: a table, a stream, a bucket (with a list prefix) or an object. */
export interface NeededAccess {
  readonly action: string;
  readonly table?: string;
  readonly stream?: string;
  readonly bucket?: string;
  /** The object key (object actions) or the listed prefix (s3:ListBucket). */
  readonly key?: string;
  /** The SDK command that needs it, for the failure message. */
  readonly command: string;
}

const currentFunction = new AsyncLocalStorage<FunctionRole>();
const sent = new Map<FunctionRole, NeededAccess[]>();
/** GetRecords names no stream: its iterator came from GetShardIterator or a previous GetRecords. */
const streamOfIterator = new Map<string, string>();

export const asFunction: InvocationWrapper = (role, invoke) => currentFunction.run(role, invoke);

export function sentBy(role: FunctionRole): NeededAccess[] {
  return sent.get(role) ?? [];
}

export function clearSent(): void {
  sent.clear();
  streamOfIterator.clear();
}

type Input = Record<string, unknown>;

function streamNameOf(input: Input): string | undefined {
  if (typeof input.StreamName === 'string') return input.StreamName;
  if (typeof input.StreamARN === 'string') return input.StreamARN.split('/').pop();
  if (typeof input.ShardIterator === 'string') return streamOfIterator.get(input.ShardIterator);
  return undefined;
}

/** What IAM authorizes a command against (the service authorization reference's mapping). */
export function accessNeededBy(command: string, input: Input): Omit<NeededAccess, 'command'>[] {
  const name = command.replace(/Command$/, '');
  const bucket = input.Bucket as string | undefined;
  switch (name) {
    case 'GetObject': case 'HeadObject': return [{ action: 's3:GetObject', bucket, key: input.Key as string }];
    case 'PutObject': return [{ action: 's3:PutObject', bucket, key: input.Key as string }];
    case 'DeleteObject': return [{ action: 's3:DeleteObject', bucket, key: input.Key as string }];
    case 'DeleteObjects': {
      const objects = ((input.Delete as { Objects?: { Key: string }[] })?.Objects ?? []);
      return objects.map((o) => ({ action: 's3:DeleteObject', bucket, key: o.Key }));
    }
    case 'CopyObject': {
      const source = decodeURIComponent(String(input.CopySource).replace(/^\//, ''));
      const slash = source.indexOf('/');
      return [
        { action: 's3:GetObject', bucket: source.slice(0, slash), key: source.slice(slash + 1) },
        { action: 's3:PutObject', bucket, key: input.Key as string },
      ];
    }
    case 'ListObjectsV2': case 'ListObjects': return [{ action: 's3:ListBucket', bucket, key: (input.Prefix as string | undefined) ?? '' }];
    case 'TransactWriteItems': {
      const items = (input.TransactItems as Record<string, { TableName: string }>[]) ?? [];
      const actions: Record<string, string> = { Put: 'PutItem', Update: 'UpdateItem', Delete: 'DeleteItem', ConditionCheck: 'ConditionCheckItem' };
      return items.flatMap((item) => Object.entries(item).map(([kind, op]) => ({ action: `dynamodb:${actions[kind] ?? kind}`, table: op.TableName })));
    }
    case 'BatchWriteItem': case 'BatchGetItem':
      return Object.keys((input.RequestItems as Input) ?? {}).map((table) => ({ action: `dynamodb:${name}`, table }));
    default:
      if (typeof input.TableName === 'string') return [{ action: `dynamodb:${name}`, table: input.TableName }];
      return [{ action: `kinesis:${name}`, stream: streamNameOf(input) }];
  }
}

function recordIterators(input: Input, output: Input | undefined): void {
  const stream = streamNameOf(input);
  if (!stream || !output) return;
  for (const field of ['ShardIterator', 'NextShardIterator']) {
    if (typeof output[field] === 'string') streamOfIterator.set(output[field] as string, stream);
  }
}

/** Adds the recording middleware to a set of clients (each call, sent or refused, is recorded). */
export function recordCommands(clients: AwsClients): AwsClients {
  // An initialize-step middleware: it sees the command's name and input before serialization.
  type Args = { input: object };
  const middleware = (next: (args: Args) => Promise<{ output: unknown }>, context: { commandName?: string }) => async (args: Args) => {
    const role = currentFunction.getStore();
    const input = args.input as Input;
    const command = context.commandName ?? 'unknown';
    if (role) {
      const list = sent.get(role) ?? [];
      list.push(...accessNeededBy(command, input).map((a) => ({ ...a, command })));
      sent.set(role, list);
    }
    const result = await next(args);
    recordIterators(input, result.output as Input | undefined);
    return result;
  };
  const options = { step: 'initialize', name: 'sluiceRecordCommand' } as const;
  clients.kinesis.middlewareStack.add(middleware as never, options);
  clients.dynamodb.middlewareStack.add(middleware as never, options);
  clients.s3.middlewareStack.add(middleware as never, options);
  return clients;
}
