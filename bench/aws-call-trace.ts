/**
 * Traces every AWS SDK call a set of clients sends: the command, what it touched (table, bucket,
 * stream), when it started and ended, and the DynamoDB capacity it consumed per table. The cost
 * benchmark derives request counts, units and the sequential round trips of an invocation from it.
 */
import type { AwsClients } from '../lib/aws/clients.js';
import { consumedUnits, itemSize, readUnitsFor, writeUnitsFor, type Item } from '../lib/aws/dynamodb-cost.js';

export interface TracedCall {
  readonly service: 'dynamodb' | 's3' | 'kinesis';
  readonly command: string;
  /** Tables (DynamoDB), the bucket (S3) or the stream (Kinesis) the call touched. */
  readonly resources: readonly string[];
  readonly startMs: number;
  endMs: number;
  /** DynamoDB capacity units per table (reported, else AWS's formula for a refused write). */
  readonly writeUnits: Map<string, number>;
  readonly readUnits: Map<string, number>;
}

type Input = Record<string, unknown>;

const WRITE_COMMANDS = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem', 'TransactWriteItems']);

function dynamoTables(input: Input): string[] {
  if (typeof input.TableName === 'string') return [input.TableName];
  if (input.RequestItems) return Object.keys(input.RequestItems as Input);
  if (Array.isArray(input.TransactItems)) {
    return [...new Set((input.TransactItems as Record<string, { TableName: string }>[]).flatMap((i) => Object.values(i).map((op) => op.TableName)))];
  }
  return [];
}

/** Capacity per table from a response's ConsumedCapacity (TOTAL: one entry per table). */
function unitsByTable(consumed: unknown): Map<string, number> {
  const units = new Map<string, number>();
  if (consumed === undefined) return units;
  for (const c of (Array.isArray(consumed) ? consumed : [consumed]) as { TableName?: string; CapacityUnits?: number }[]) {
    const n = consumedUnits(c as never);
    if (n !== undefined && c.TableName) units.set(c.TableName, (units.get(c.TableName) ?? 0) + n);
  }
  return units;
}

/** What AWS charges for a write it refused (a failed condition): the item's units, as if written; for a transaction, what it charges anyway. */
function refusedWriteUnits(command: string, input: Input): Map<string, number> {
  const units = new Map<string, number>();
  const add = (table: string, n: number): void => { units.set(table, (units.get(table) ?? 0) + n); };
  if (command === 'TransactWriteItems') {
    for (const item of input.TransactItems as Record<string, { TableName: string; Item?: Item }>[]) {
      for (const op of Object.values(item)) add(op.TableName, writeUnitsFor(op.Item ? itemSize(op.Item) : 0, true));
    }
  } else if (typeof input.TableName === 'string') {
    add(input.TableName, writeUnitsFor(input.Item ? itemSize(input.Item as Item) : 0));
  }
  return units;
}

export class AwsCallTrace {
  readonly calls: TracedCall[] = [];

  /** Adds the tracing middleware to every client (outermost step: one entry per command, retries included). */
  attach(clients: AwsClients): AwsClients {
    const make = (service: TracedCall['service']) => (next: (args: { input: object }) => Promise<{ output: unknown }>, context: { commandName?: string }) =>
      async (args: { input: object }) => {
        const input = args.input as Input;
        const command = (context.commandName ?? 'unknown').replace(/Command$/, '');
        const resources = service === 'dynamodb' ? dynamoTables(input)
          : service === 's3' ? [String(input.Bucket ?? '')]
            : [String(input.StreamName ?? input.StreamARN ?? (input.ShardIterator ? 'iterator' : ''))];
        const call: TracedCall = { service, command, resources, startMs: performance.now(), endMs: 0, writeUnits: new Map(), readUnits: new Map() };
        this.calls.push(call);
        try {
          const result = await next(args);
          call.endMs = performance.now();
          if (service === 'dynamodb') {
            const output = result.output as Input;
            // DynamoDB Local misreports transactions (4 units per KB of a Put, none for a
            // ConditionCheck or an Update; measured 2026-12-05): AWS's formula instead, 2 units per
            // KB of every item, the condition checks included.
            const units = command === 'TransactWriteItems' ? refusedWriteUnits(command, input) : unitsByTable(output.ConsumedCapacity);
            if (units.size === 0 && resources.length === 1) {
              // No ConsumedCapacity (an emulator that omits it): AWS's formula for what came back.
              const items = (output.Items ?? (output.Item ? [output.Item] : [])) as Item[];
              units.set(resources[0]!, WRITE_COMMANDS.has(command) ? writeUnitsFor(input.Item ? itemSize(input.Item as Item) : 0)
                : readUnitsFor(items.reduce((a, i) => a + itemSize(i), 0), input.ConsistentRead === true));
            }
            for (const [table, n] of units) (WRITE_COMMANDS.has(command) ? call.writeUnits : call.readUnits).set(table, n);
          }
          return result;
        } catch (error) {
          call.endMs = performance.now();
          const name = (error as { name?: string }).name;
          if (name === 'ConditionalCheckFailedException' || name === 'TransactionCanceledException') {
            for (const [table, n] of refusedWriteUnits(command, input)) call.writeUnits.set(table, n);
          }
          throw error;
        }
      };
    const options = { step: 'initialize', name: 'sluiceBenchTrace', priority: 'high' } as const;
    clients.dynamodb.middlewareStack.add(make('dynamodb') as never, options);
    clients.s3.middlewareStack.add(make('s3') as never, options);
    clients.kinesis.middlewareStack.add(make('kinesis') as never, options);
    return clients;
  }

  /** The calls started since index `from` (an invocation's calls: the handlers run one at a time). */
  since(from: number): TracedCall[] {
    return this.calls.slice(from);
  }
}

/**
 * The sequential AWS round trips of a set of calls: the longest chain of calls each of which
 * started after the previous one ended (calls in flight together count once).
 */
export function sequentialRoundTrips(calls: readonly TracedCall[]): number {
  const sorted = [...calls].sort((a, b) => a.startMs - b.startMs);
  const depth: number[] = [];
  let best = 0;
  for (let i = 0; i < sorted.length; i++) {
    let d = 1;
    for (let j = 0; j < i; j++) if (sorted[j]!.endMs <= sorted[i]!.startMs && depth[j]! + 1 > d) d = depth[j]! + 1;
    depth.push(d);
    best = Math.max(best, d);
  }
  return best;
}

/** Milliseconds of `wallMs` during which no AWS call was in flight: the function's own work. */
export function localComputeMs(calls: readonly TracedCall[], startMs: number, endMs: number): number {
  const spans = calls.map((c) => [Math.max(c.startMs, startMs), Math.min(c.endMs, endMs)] as const).filter(([a, b]) => b > a).sort((a, b) => a[0] - b[0]);
  let covered = 0;
  let cursor = startMs;
  for (const [a, b] of spans) {
    if (b <= cursor) continue;
    covered += b - Math.max(a, cursor);
    cursor = b;
  }
  return Math.max(0, endMs - startMs - covered);
}
