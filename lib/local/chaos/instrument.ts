/**
 * The fault middleware on one simulated container's SDK clients: it counts the fault points,
 * injects the faults planned for them, and tells the sink history every write a reader could see.
 *
 * Two places in the SDK's middleware stack:
 * - `initialize` (outside the SDK's retries): throttles, 5xx, conflicts and partial results reach
 *   the engine as they would once the SDK gave up; kills strike right after a write succeeded;
 * - `deserialize` (inside the retry loop, once per HTTP attempt): an ambiguous write is applied,
 *   then its response is lost with a network error, so the SDK itself sends it again.
 */
import {
  ProvisionedThroughputExceededException, RequestLimitExceeded, ThrottlingException, TransactionCanceledException,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { ProvisionedThroughputExceededException as KinesisThroughputExceeded, type PutRecordsResultEntry } from '@aws-sdk/client-kinesis';
import { S3ServiceException } from '@aws-sdk/client-s3';
import type { AwsClients } from '../../aws/clients.js';
import type { RuntimeConfig } from '../../runtime/runtime-config.js';
import { randomInt } from '../sample-events.js';
import { ChaosKill, type FaultController, type PlannedFault } from './faults.js';
import type { SinkHistory } from './history.js';
import { dynamoDbSentSignatures, dynamoDbSignature } from './retry-ledger.js';
import { currentReaderCall, watchShortPages } from './short-pages.js';

/** What the middleware needs to know of its container. */
export interface ContainerHandle {
  readonly id: number;
  dead: boolean;
  killedBy?: string;
  /** Which of its invocations is running (a resend in the same one is a retry in place). */
  invocation?: number;
}

export interface InstrumentOptions {
  readonly controller: FaultController;
  readonly config: RuntimeConfig;
  readonly history?: SinkHistory;
  /**
   * Records past the stream's trim horizon ('planned-then-expired'): GetRecords leaves them out.
   * By stream name and sequence number.
   */
  readonly expired?: (streamName: string, shardId: string, sequenceNumber: string) => boolean;
  /**
   * 'planned-then-expired' struck right after this container planned batch `batchId` of the
   * checkpoint partition `pk`: the records to expire are chosen by the caller.
   */
  readonly onPlannedThenExpired?: (fault: PlannedFault, pk: string, batchId: number) => void;
  /**
   * Before a transaction with these commit items (`pk`, batch id) is sent: may kill the container
   * (a retry that ran the planned batch dies before committing it, retention-timeline.ts).
   */
  readonly beforeCommit?: (commits: readonly { readonly pk: string; readonly batchId: number }[]) => void;
  /** The engine claimed a kept copy of batch `batchId` of checkpoint partition `partitionId` (lib/aws/kept-records.ts). */
  readonly onKept?: (partitionId: string, batchId: number) => void;
  /** A record's arrival as the function sees it (the simulated backlog, retention-timeline.ts). */
  readonly arrivalMs?: (streamName: string, shardId: string, sequenceNumber: string, putArrivalMs: number) => number;
}

type Input = Record<string, unknown> & {
  TableName?: string; Key?: string; CopySource?: string; Item?: Record<string, { S?: string }>; ConditionExpression?: string;
  RequestItems?: Record<string, WriteRequest[]>; Records?: unknown[]; Limit?: number; Body?: unknown;
};

export function killContainer(container: ContainerHandle, why: string): never {
  container.dead = true;
  container.killedBy = why;
  throw new ChaosKill(`chaos: process killed ${why}`);
}

export function instrumentClients(container: ContainerHandle, clients: AwsClients, options: InstrumentOptions): void {
  const { controller, config, history, expired } = options;
  watchShortPages();
  const deadCheck = (): void => {
    if (container.dead) throw new ChaosKill(`chaos: container ${container.id} is dead (${container.killedBy})`);
  };
  const killKind = (kind: string | undefined, expected: string[], why: string): void => {
    if (kind && expected.includes(kind)) {
      const how = kind === 'timeout-mid-write' ? 'Task timed out' : kind === 'out-of-memory-mid-write' ? 'Runtime exited: out of memory' : 'killed';
      killContainer(container, `${why} (${how})`);
    }
  };

  clients.dynamodb.middlewareStack.add((next, context) => async (args) => {
    deadCheck();
    const command = (context as { commandName?: string }).commandName ?? '?';
    const input = args.input as Input;
    const table = input.TableName ?? '';
    const sk = input.Item?.sk?.S ?? '';
    // A resend counts as sent even if a throttle then fails it (its caller tried again).
    if (command === 'BatchWriteItemCommand') controller.sent(container, Object.values(input.RequestItems ?? {}).flat().map(writeRequestKey));
    const signature = dynamoDbSignature(command, input);
    for (const sent of dynamoDbSentSignatures(command, input)) controller.retries.sent(sent, container);
    const throttle = controller.hit('dynamodb-request', () => `${command} ${table} ${sk}`.trim());
    if (throttle) {
      // The sink's upserts retry a throttle themselves (the adaptive writer); elsewhere the invocation fails and is retried.
      const error = dynamoDbThrottle(controller.random());
      // The item's sort key names which write it was (an offset log entry, the metadata, a blame entry).
      // A batch of deletes outside the sink is a cleanup the engine does not resend (kept copies, blame entries, obsolete state).
      const requests = Object.values(input.RequestItems ?? {}).flat();
      const cleanup = (command === 'BatchWriteItemCommand' && requests.length > 0 && requests.every((r) => r.DeleteRequest !== undefined)
        && !Object.keys(input.RequestItems ?? {}).includes(config.sinkTable ?? ''))
        // The kept copy's claim, removed after its pages (lib/aws/kept-records.ts `remove`): best effort too, with a TTL.
        || (command === 'DeleteItemCommand' && table !== config.sinkTable && String(input.ConditionExpression ?? '').includes('keptBatch = :b'));
      controller.retries.failed('throttle-dynamodb', throttle.at, throttledWrite(command, input), signature, container,
        command === 'PutItemCommand' && table === config.sinkTable, error, cleanup);
      throw error;
    }
    if (command === 'TransactWriteItemsCommand' && options.beforeCommit) {
      const items = (input.TransactItems as { Put?: { Item?: Record<string, { S?: string }> } }[] | undefined) ?? [];
      const commits = items.flatMap((t) => {
        const itemSk = t.Put?.Item?.sk?.S ?? '';
        return itemSk.startsWith('commit#') ? [{ pk: t.Put?.Item?.pk?.S ?? '', batchId: Number(itemSk.slice('commit#'.length)) }] : [];
      });
      if (commits.length > 0) options.beforeCommit(commits);
    }
    if (command === 'TransactWriteItemsCommand') {
      const conflict = controller.hit('transaction', () => 'commit transaction');
      if (conflict?.kind === 'transaction-conflict') {
        // The commit transaction retries a conflict in place (dynamodb-checkpoint.ts); a plan's transaction need not.
        const error = transactionConflict((input.TransactItems as unknown[] | undefined)?.length ?? 1);
        controller.retries.failed('transaction-conflict', conflict.at, signature, signature, container, signature.includes('|commit#'), error);
        throw error;
      }
    }
    if (command === 'BatchWriteItemCommand') {
      const [batchTable, requests] = Object.entries(input.RequestItems ?? {})[0] ?? ['', []];
      const fault = controller.hit('batch-write', () => `BatchWriteItem ${batchTable}, ${requests.length} requests`);
      if (fault?.kind === 'batch-write-unprocessed' && requests.length > 0) {
        // Part applied, the rest handed back: the caller must send it again.
        const applied = requests.slice(0, Math.floor(requests.length / 2));
        const rest = requests.slice(applied.length);
        controller.handBack(container, rest.map(writeRequestKey), `BatchWriteItem ${batchTable} handed back to container ${container.id}`);
        const out = applied.length > 0
          ? await next({ ...args, input: { ...input, RequestItems: { [batchTable]: applied } } })
          : { output: { $metadata: {} }, response: {} };
        deadCheck();
        (out.output as { UnprocessedItems?: Record<string, WriteRequest[]> }).UnprocessedItems = { [batchTable]: rest };
        return out;
      }
    }
    const ifAbsent = command === 'PutItemCommand' && input.ConditionExpression === 'attribute_not_exists(pk)';
    let output;
    try {
      output = await next(args);
    } catch (error) {
      if (ifAbsent && (error as Error).name === 'ConditionalCheckFailedException') controller.retries.itemExists(signature);
      throw error;
    }
    if (ifAbsent) controller.retries.itemExists(signature);
    // A kept copy's claim succeeded (its condition held): the batch has a kept copy from now on.
    if (command === 'UpdateItemCommand' && String(input.UpdateExpression ?? '').includes('keptBatch = :b') && options.onKept) {
      const claimSk = (input.Key as unknown as { sk?: { S?: string } } | undefined)?.sk?.S ?? '';
      const batch = (input.ExpressionAttributeValues as { ':b'?: { N?: string } } | undefined)?.[':b']?.N;
      const body = claimSk.replace(/#expired-planned$/, '');
      options.onKept(body.slice(0, body.lastIndexOf('#')), Number(batch));
    }
    // Applied, whether or not this container died meanwhile (a concurrent request's kill): a reader can see it.
    if (command === 'PutItemCommand' && table === config.sinkTable) history?.dynamoDbWrite(input.Item as never);
    deadCheck();
    // Which write just succeeded: a kill planned for it strikes now, before the next step.
    if (command === 'PutItemCommand' && table === config.stateTable) {
      if (sk.startsWith('s#')) {
        const fault = controller.hit('state-snapshot-chunk-write', () => `${input.Item?.pk?.S} ${sk}`);
        if (fault?.kind === 'kill-between-state-writes') killContainer(container, `between state writes (after ${sk}, before its marker)`);
      } else if (sk.startsWith('d#') || sk.startsWith('m#')) {
        const fault = controller.hit('state-version-write', () => `${input.Item?.pk?.S} ${sk}`);
        if (fault?.kind === 'kill-after-state-commit') killContainer(container, `after state write ${sk}, before the commit`);
      }
    } else if (command === 'PutItemCommand' && table === config.checkpointTable && sk.startsWith('offset#')) {
      const fault = controller.hit('offset-write', () => `${input.Item?.pk?.S} ${sk}`);
      if (fault?.kind === 'kill-after-plan') killContainer(container, `after planning ${sk}`);
      if (fault?.kind === 'planned-then-expired') {
        options.onPlannedThenExpired?.(fault, input.Item?.pk?.S ?? '', Number(sk.slice('offset#'.length)));
        killContainer(container, `after planning ${sk}; an outage follows and the batch's first records expire`);
      }
    } else if (command === 'TransactWriteItemsCommand') {
      const fault = controller.hit('commit-write', () => 'commit transaction');
      if (fault?.kind === 'kill-after-commit') killContainer(container, 'after the commit-log transaction');
    } else if (command === 'PutItemCommand' && table === config.sinkTable) {
      const fault = controller.hit('sink-partial-write', () => `sink item ${input.Item?.pk?.S ?? ''}`);
      killKind(fault?.kind, ['kill-mid-sink-write', 'timeout-mid-write', 'out-of-memory-mid-write'], 'in the middle of the DynamoDB sink upserts');
    }
    return output;
  }, { step: 'initialize', name: 'sluiceChaosDynamoDb' });

  // Inside the SDK's retry loop: one HTTP attempt per call of this middleware.
  const firstAttempt = new WeakSet<object>();
  clients.dynamodb.middlewareStack.add((next, context) => async (args) => {
    const command = (context as { commandName?: string }).commandName ?? '?';
    const input = args.input as Input;
    const conditional = command === 'TransactWriteItemsCommand'
      || ((command === 'PutItemCommand' || command === 'UpdateItemCommand') && input.ConditionExpression !== undefined);
    const counted = firstAttempt.has(input);
    firstAttempt.add(input);
    const fault = conditional && !counted ? controller.hit('conditional-write', () => `${command} ${input.TableName ?? ''} ${input.Item?.sk?.S ?? input.Item?.pk?.S ?? ''}`.trim()) : undefined;
    const output = await next(args);
    deadCheck();
    if (fault?.kind === 'ambiguous-write') throw connectionReset();
    return output;
  }, { step: 'deserialize', name: 'sluiceChaosAmbiguousWrite' });

  clients.s3.middlewareStack.add((next, context) => async (args) => {
    deadCheck();
    const command = (context as { commandName?: string }).commandName ?? '?';
    const input = args.input as Input;
    const key = String(input.Key ?? '');
    const signature = `${command} ${String(input.Bucket ?? '')}/${key || String(input.Prefix ?? '')} ${String(input.ContinuationToken ?? '')}`;
    controller.retries.sent(signature, container);
    const fault = controller.hit('s3-request', () => `${command} ${key}`);
    if (fault) controller.retries.failed(fault.kind === 'throttle-s3' ? 'throttle-s3' : 's3-5xx', fault.at, `${command} ${key}`, signature, container, false);
    if (fault?.kind === 'throttle-s3') throw s3Error('SlowDown', 503, 'Please reduce your request rate (chaos).');
    if (fault?.kind === 's3-5xx') throw s3Error('InternalError', 500, 'We encountered an internal error. Please try again (chaos).');
    const output = await next(args);
    // Applied, whether or not this container died meanwhile: recorded first (else an object in the sink is one the history never saw).
    if (command === 'PutObjectCommand') history?.s3Put(key, typeof input.Body === 'string' ? input.Body : input.Body as Uint8Array);
    if (command === 'CopyObjectCommand') history?.s3Copy(copySourceKey(String(input.CopySource ?? '')), key);
    deadCheck();
    // The files sink's two multi-object steps: staging a batch's files before its manifest entry,
    // and revealing them (one copy per file) after the checkpoint commit.
    if (command === 'PutObjectCommand' && /\/_sluice_staging\//.test(key)) {
      const kill = controller.hit('sink-partial-write', () => key);
      killKind(kill?.kind, ['kill-mid-sink-write', 'timeout-mid-write', 'out-of-memory-mid-write'], `between the staged S3 file ${key} and its manifest entry`);
    }
    if (command === 'CopyObjectCommand') {
      const kill = controller.hit('sink-partial-write', () => `reveal ${key}`);
      killKind(kill?.kind, ['kill-mid-sink-write', 'timeout-mid-write', 'out-of-memory-mid-write'], `after revealing ${key}, before the rest of its batch's reveal`);
    }
    return output;
  }, { step: 'initialize', name: 'sluiceChaosS3' });

  // The function's own Kinesis calls: the repartition stage's PutRecords to the internal stream
  // (stage 1's sink) and the shard reader's GetRecords.
  const expiredShardOfIterator = new Map<string, { streamName: string; shardId: string }>();
  /** The shard each iterator reads (a GetRecords resend comes with a new iterator of the same shard). */
  const shardOfIterator = new Map<string, string>();
  clients.kinesis.middlewareStack.add((next, context) => async (args) => {
    deadCheck();
    const command = (context as { commandName?: string }).commandName ?? '?';
    const input = args.input as Input;
    const stream = String((input as { StreamName?: string }).StreamName ?? '');
    const iterator = String((input as { ShardIterator?: string }).ShardIterator ?? '');
    const signature = command === 'GetRecordsCommand' ? `GetRecords ${shardOfIterator.get(iterator) ?? iterator}`
      : `${command} ${stream} ${String((input as { ShardId?: string }).ShardId ?? '')}`;
    controller.retries.sent(signature, container);
    if (command === 'GetRecordsCommand') controller.retries.sent(`GetRecords from ${iterator}`, container);
    const readerCall = command === 'GetRecordsCommand' ? currentReaderCall() : undefined;
    readerCall?.readFrom.add(iterator);
    const throttle = controller.hit('kinesis-request', () => `${command} ${stream}`.trim());
    if (throttle) {
      controller.retries.failed('throttle-kinesis', throttle.at, `${command} ${stream}`.trim(), signature, container, false);
      throw kinesisThrottle();
    }
    let short: { at: number; asked: number; given: number } | undefined;
    if (command === 'GetRecordsCommand') {
      const fault = controller.hit('get-records', () => `GetRecords limit ${input.Limit ?? '-'}`);
      if (fault?.kind === 'short-get-records') {
        short = { at: fault.at, asked: input.Limit ?? 10_000, given: randomInt(() => controller.random(), 1, 3) };
        args = { ...args, input: { ...input, Limit: short.given } };
      }
    }
    let output;
    const partial = command === 'PutRecordsCommand' ? controller.hit('put-records', () => `PutRecords to ${stream}, ${input.Records?.length ?? 0} records`) : undefined;
    if (partial?.kind === 'put-records-partial' && (input.Records?.length ?? 0) > 0) {
      output = await putRecordsPartially(next as never, args, input.Records!, () => controller.random()) as Awaited<ReturnType<typeof next>>;
    } else {
      output = await next(args);
    }
    deadCheck();
    const page = output.output as KinesisPage;
    if (command === 'GetShardIteratorCommand' && page.ShardIterator) shardOfIterator.set(page.ShardIterator, `${stream}#${String((input as { ShardId?: string }).ShardId ?? '')}`);
    if (command === 'GetRecordsCommand' && page.NextShardIterator && shardOfIterator.has(iterator)) shardOfIterator.set(page.NextShardIterator, shardOfIterator.get(iterator)!);
    if (short && page.NextShardIterator) {
      controller.retries.failed('short-get-records', short.at, `${page.Records?.length ?? 0} records`, `GetRecords from ${page.NextShardIterator}`, container, true);
    }
    if (expired || options.arrivalMs) viewOfStream(command, input, page, expiredShardOfIterator, expired, options.arrivalMs);
    // Judged when the reader call returns (it alone knows what it was asked for), on the page as the reader saw it (after the expiry trim).
    if (short && readerCall) {
      const { at, asked, given } = short;
      readerCall.shorts.push({
        at, asked, given, sequenceNumbers: (page.Records ?? []).map((r) => BigInt(r.SequenceNumber ?? '0')),
        nextIterator: page.NextShardIterator, millisBehindLatest: (page as { MillisBehindLatest?: number }).MillisBehindLatest ?? 0,
        report: (why) => controller.retries.readEndedShort(at, why),
      });
    }
    if (command === 'PutRecordsCommand') {
      const fault = controller.hit('sink-write', () => `PutRecords to ${stream}`);
      if (fault?.kind === 'kill-after-sink-write') killContainer(container, `after PutRecords to the internal stream ${stream}`);
    }
    return output;
  }, { step: 'initialize', name: 'sluiceChaosKinesis' });
}

type KinesisPage = { ShardIterator?: string; NextShardIterator?: string; Records?: { SequenceNumber?: string; ApproximateArrivalTimestamp?: Date }[] };

/**
 * The stream as the simulated retention timeline shows it: expired records left out of a
 * GetRecords page, backlog records with their earlier arrival (following each iterator to its
 * stream and shard).
 */
function viewOfStream(
  command: string, input: Input, output: KinesisPage, shardOfIterator: Map<string, { streamName: string; shardId: string }>,
  expired: ((streamName: string, shardId: string, sequenceNumber: string) => boolean) | undefined,
  arrivalMs: InstrumentOptions['arrivalMs'],
): void {
  if (command === 'GetShardIteratorCommand' && output.ShardIterator) {
    const { StreamName, ShardId } = input as { StreamName?: string; ShardId?: string };
    shardOfIterator.set(output.ShardIterator, { streamName: String(StreamName ?? ''), shardId: String(ShardId ?? '') });
  }
  if (command !== 'GetRecordsCommand') return;
  const shard = shardOfIterator.get(String((input as { ShardIterator?: string }).ShardIterator ?? ''));
  if (shard === undefined) return;
  if (output.NextShardIterator) shardOfIterator.set(output.NextShardIterator, shard);
  if (output.Records && expired) output.Records = output.Records.filter((r) => !expired(shard.streamName, shard.shardId, r.SequenceNumber ?? ''));
  if (output.Records && arrivalMs) {
    output.Records = output.Records.map((r) => (r.ApproximateArrivalTimestamp
      ? { ...r, ApproximateArrivalTimestamp: new Date(arrivalMs(shard.streamName, shard.shardId, r.SequenceNumber ?? '', r.ApproximateArrivalTimestamp.getTime())) }
      : r));
  }
}

/** A BatchWriteItem request's item key (what a resend of it names again). */
/** A throttled request as the report names it: its table and its (first) item's key, a batch write's count. */
function throttledWrite(command: string, input: Input): string {
  if (command !== 'BatchWriteItemCommand') return `${command} ${input.TableName ?? ''} ${input.Item?.sk?.S ?? ''}`.trim();
  const [table, requests] = Object.entries(input.RequestItems ?? {})[0] ?? ['', []];
  const first = requests[0] ? writeRequestKey(requests[0]) : '';
  return `${command} ${table} ${first}${requests.length > 1 ? ` (+${requests.length - 1} more)` : ''}`.trim();
}

export function writeRequestKey(request: WriteRequest): string {
  const key = request.DeleteRequest?.Key ?? { pk: request.PutRequest?.Item?.pk, sk: request.PutRequest?.Item?.sk };
  return `${request.DeleteRequest ? 'delete' : 'put'} ${key.pk?.S ?? ''} ${key.sk?.S ?? ''}`;
}

/** The key of a CopyObject's `bucket/key` source (URL-encoded, as S3 requires). */
function copySourceKey(copySource: string): string {
  const slash = copySource.indexOf('/');
  return decodeURIComponent(copySource.slice(slash + 1));
}

/** Sends a random part of the records, answers the rest as throttled (Kinesis's partial failure). */
async function putRecordsPartially(
  next: (args: never) => Promise<{ output: unknown; response: unknown }>, args: { input: unknown }, records: unknown[], rnd: () => number,
): Promise<{ output: unknown; response: unknown }> {
  const failed = new Set<number>();
  // At least one fails; with several, at least one goes through (so the retry lands after it).
  const target = records.length === 1 ? 1 : randomInt(rnd, 1, records.length - 1);
  while (failed.size < target) failed.add(randomInt(rnd, 0, records.length - 1));
  const sent = records.filter((_, i) => !failed.has(i));
  let results: PutRecordsResultEntry[] = [];
  let response: unknown = {};
  if (sent.length > 0) {
    const out = await next({ ...args, input: { ...(args.input as object), Records: sent } } as never);
    results = [...((out.output as { Records?: PutRecordsResultEntry[] }).Records ?? [])];
    response = out.response;
  }
  const merged = records.map((_, i) => (failed.has(i)
    ? { ErrorCode: 'ProvisionedThroughputExceededException', ErrorMessage: 'Rate exceeded for shard (chaos).' }
    : results.shift()!));
  return { output: { $metadata: {}, FailedRecordCount: failed.size, Records: merged }, response };
}

function dynamoDbThrottle(r: number): Error {
  const $metadata = { httpStatusCode: 400, requestId: 'chaos' };
  if (r < 0.5) return new ProvisionedThroughputExceededException({ $metadata, message: 'The level of configured provisioned throughput for the table was exceeded (chaos).' });
  if (r < 0.8) return new ThrottlingException({ $metadata, message: 'Rate of requests exceeds the allowed throughput (chaos).' });
  return new RequestLimitExceeded({ $metadata, message: 'Throughput exceeds the current throughput limit for your account (chaos).' });
}

function transactionConflict(items: number): Error {
  return new TransactionCanceledException({
    $metadata: { httpStatusCode: 400, requestId: 'chaos' },
    message: 'Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict] (chaos)',
    CancellationReasons: Array.from({ length: items }, (_, i) => ({ Code: i === items - 1 ? 'TransactionConflict' : 'None' })),
  });
}

/** The response of an applied request never arrives: the SDK sees a reset connection and retries. */
function connectionReset(): Error {
  return Object.assign(new Error('socket hang up (chaos: the write was applied, its response lost)'), { code: 'ECONNRESET' });
}

function kinesisThrottle(): Error {
  return new KinesisThroughputExceeded({ $metadata: { httpStatusCode: 400, requestId: 'chaos' }, message: 'Rate exceeded for shard in stream (chaos).' });
}

function s3Error(name: string, status: number, message: string): Error {
  return new S3ServiceException({ name, $fault: 'server', $metadata: { httpStatusCode: status, requestId: 'chaos' }, message });
}
