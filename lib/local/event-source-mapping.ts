/**
 * A local Kinesis event source mapping: what AWS Lambda does between a Kinesis stream and a
 * function, run in-process against any Kinesis endpoint (kinesis-mock, LocalStack, AWS).
 *
 * Per shard it polls GetRecords with one invocation in flight at a time, builds the exact Lambda
 * `KinesisStreamEvent`, and applies Lambda's stream error handling:
 *
 * - success (no `batchItemFailures`) → checkpoint at the batch's last record;
 * - `batchItemFailures` (with `reportBatchItemFailures`) → checkpoint before the lowest failed
 *   sequence number and retry from it; an identifier that is empty, null, not a string or not in the
 *   batch makes the whole batch a failure, as in Lambda;
 * - a thrown error / rejected promise / timeout / lost response → the whole batch is retried, or,
 *   with `bisectBatchOnFunctionError`, split in two halves retried separately (recursively). Splits
 *   do not count against `maximumRetryAttempts`; re-sending the same records does;
 * - retries exhausted → `onFailure` (an on-failure destination) gets the batch's description and
 *   records, and the shard moves on past them;
 * - resharding: a child shard starts only after every parent shard has been read to its end and
 *   fully processed.
 *
 * Nothing is reordered or skipped otherwise: records of a shard reach the handler in sequence
 * order, and a record is only sent again after a failure (at-least-once, as in Lambda).
 */
import { randomUUID, randomBytes } from 'node:crypto';
import {
  ExpiredIteratorException,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type KinesisClient,
  type _Record as KinesisRecord,
  type ShardIteratorType,
} from '@aws-sdk/client-kinesis';
import type { Callback, Context, KinesisStreamBatchResponse, KinesisStreamEvent, KinesisStreamRecord } from 'aws-lambda';
import { listAllShards } from './kinesis-admin.js';

export type StartingPosition = 'TRIM_HORIZON' | 'LATEST';

export type HandlerResult = KinesisStreamBatchResponse | void | null | undefined;

/**
 * The function. A real Lambda handler (`KinesisStreamHandler`, async or callback style) fits; a
 * two-argument async function does too.
 */
export type LocalKinesisHandler = (
  event: KinesisStreamEvent,
  context: Context,
  callback: Callback<KinesisStreamBatchResponse | void>,
) => Promise<HandlerResult> | HandlerResult;

/** What an on-failure destination receives for a discarded batch (Lambda's `KinesisBatchInfo` plus the records). */
export interface BatchFailureInfo {
  readonly condition: 'RetryAttemptsExhausted';
  /** Why the last attempt failed: the error message, or the partial/invalid batch response. */
  readonly reason: string;
  readonly shardId: string;
  readonly streamArn: string;
  readonly startSequenceNumber: string;
  readonly endSequenceNumber: string;
  readonly batchSize: number;
  readonly approximateArrivalOfFirstRecord: string;
  readonly approximateArrivalOfLastRecord: string;
  /** Invocations these records took part in (this exact set or a larger batch containing them). */
  readonly approximateInvokeCount: number;
  readonly records: readonly KinesisStreamRecord[];
}

export type InvocationKind = 'initial' | 'retry' | 'bisected';

export type InvocationOutcome =
  | 'success'
  | 'partial-failure'
  /** Thrown error, rejected promise, timeout or an invalid `batchItemFailures` response. */
  | 'function-error'
  /** The handler ran but `afterInvoke` threw: Lambda never got the response (a crash). */
  | 'response-lost'
  /** `beforeInvoke` threw: the function was never reached (throttle/service error); not a retry. */
  | 'not-invoked';

export interface InvocationInfo {
  readonly requestId: string;
  readonly shardId: string;
  readonly kind: InvocationKind;
  /** Retries already spent on these records (0 on first delivery and on bisected halves' first try). */
  readonly retryAttempt: number;
}

export interface InvocationLogEntry extends InvocationInfo {
  /** Position in the log (0-based, over the mapping's lifetime). */
  readonly index: number;
  readonly sequenceNumbers: readonly string[];
  readonly size: number;
  readonly outcome: InvocationOutcome;
  /** For a partial failure: the lowest failed sequence number (the retry starts there). */
  readonly failedSequenceNumber?: string;
  readonly error?: string;
  readonly startedAt: number;
  readonly endedAt: number;
}

export interface EventSourceMappingHooks {
  /** Before the handler; throwing simulates a failure to reach the function (retried, not counted). */
  beforeInvoke?(event: KinesisStreamEvent, info: InvocationInfo): void | Promise<void>;
  /**
   * After the handler returned; throwing simulates a crash between the handler finishing and Lambda
   * getting the response: a function error, so the batch is redelivered.
   */
  afterInvoke?(event: KinesisStreamEvent, result: HandlerResult, info: InvocationInfo): void | Promise<void>;
  /** Before each GetRecords; throwing simulates a read error (backed off and retried). */
  beforeGetRecords?(shardId: string): void | Promise<void>;
  onInvocation?(entry: InvocationLogEntry): void;
  onCheckpoint?(shardId: string, sequenceNumber: string): void;
  /** Kinesis or destination errors the mapping retries by itself. */
  onError?(error: unknown, shardId: string | undefined): void;
}

export interface LocalEventSourceMappingOptions {
  readonly kinesis: KinesisClient;
  readonly streamName: string;
  readonly handler: LocalKinesisHandler;
  /** Maximum records per invocation (1–10 000); default 100. */
  readonly batchSize?: number;
  /** With > 0, gather records for up to this long (from the first record) before invoking; default 0. */
  readonly maximumBatchingWindowMs?: number;
  /** Where shards that exist at the first start begin; shards created later always start at TRIM_HORIZON. */
  readonly startingPosition?: StartingPosition;
  /** -1 (default) retries until success; n discards a batch after n retries. */
  readonly maximumRetryAttempts?: number;
  readonly bisectBatchOnFunctionError?: boolean;
  /** Honour `batchItemFailures` in the handler's response (Lambda's FunctionResponseTypes); default true. */
  readonly reportBatchItemFailures?: boolean;
  /** On-failure destination for discarded batches. If it throws, it is retried and the shard waits. */
  readonly onFailure?: (info: BatchFailureInfo) => Promise<void> | void;
  /** Milliseconds between GetRecords calls on a shard with nothing new; default 250. */
  readonly pollIntervalMs?: number;
  /** Milliseconds between ListShards calls looking for new shards; default 1000. */
  readonly shardDiscoveryIntervalMs?: number;
  /** First back-off before a retry, doubled per retry up to 1 s; default 20 ms. */
  readonly retryBackoffMs?: number;
  /** Function timeout; 0 (default) means none. A timed-out invocation is a function error. */
  readonly functionTimeoutMs?: number;
  /** Cap on the event's JSON size, as Lambda's 6 MB synchronous payload limit; default 6 MiB. */
  readonly maxPayloadBytes?: number;
  /** Default: the Kinesis client's region, else us-east-1. */
  readonly region?: string;
  /** Default 000000000000 (the emulators' account). */
  readonly accountId?: string;
  readonly functionName?: string;
  /** Default `arn:aws:iam::<accountId>:role/lambda-role`. */
  readonly invokeIdentityArn?: string;
  /** Resume positions (shardId → last processed sequence number), as a persisted mapping would. */
  readonly initialCheckpoints?: Readonly<Record<string, string>>;
  /** Oldest invocation log entries are dropped past this many; default 10 000. */
  readonly invocationLogLimit?: number;
  readonly hooks?: EventSourceMappingHooks;
}

export interface EventSourceMappingStats {
  /** Handler invocations (including failed ones; not `not-invoked` attempts). */
  invocations: number;
  /** Records processed successfully and checkpointed (each counted once). */
  records: number;
  /** Records sent to the handler, counting redeliveries. */
  deliveredRecords: number;
  /** Retries spent (each counts against maximumRetryAttempts). */
  retries: number;
  /** Batches split in two. */
  bisects: number;
  /** Batches discarded after their retries were exhausted (each went to onFailure once). */
  failedBatches: number;
  /** Records in those discarded batches. */
  discardedRecords: number;
  /** Closed shards read to their end and fully processed. */
  shardsCompleted: number;
  /** Kinesis/destination errors retried by the mapping itself. */
  errors: number;
}

export type ShardStatus = 'waiting-for-parents' | 'active' | 'completed';

export interface ShardState {
  readonly shardId: string;
  readonly parentShardIds: readonly string[];
  readonly status: ShardStatus;
  readonly checkpoint: string | undefined;
  readonly bufferedRecords: number;
  readonly pendingRecords: number;
  readonly inFlight: boolean;
}

export interface DrainOptions {
  /** Every open shard must have returned nothing for this long; default 500 ms. */
  readonly idleMs?: number;
  /** Reject if not idle by then; default 120 000 ms. */
  readonly timeoutMs?: number;
}

interface WorkItem {
  records: KinesisStreamRecord[];
  retries: number;
  kind: InvocationKind;
  lastError: string;
}

interface ShardWorker {
  readonly shardId: string;
  readonly parentIds: readonly string[];
  readonly initialPosition: StartingPosition;
  status: ShardStatus;
  /** undefined: none yet (acquire one); null: the closed shard's end was reached. */
  iterator: string | null | undefined;
  /** Last sequence number fetched (buffer + pending hold everything after the checkpoint). */
  readPosition: string | undefined;
  checkpoint: string | undefined;
  buffer: KinesisStreamRecord[];
  bufferSince: number;
  pending: WorkItem[];
  inFlight: boolean;
  lastActivityAt: number;
  lastEmptyPollStartedAt: number;
  doneAt: number;
  loop: Promise<void> | undefined;
}

type InvokeResult =
  | { kind: 'success' }
  | { kind: 'partial'; index: number; reason: string }
  | { kind: 'error'; reason: string }
  | { kind: 'not-invoked'; reason: string };

const DEFAULT_MAX_PAYLOAD = 6 * 1024 * 1024;

export class LocalEventSourceMapping {
  readonly streamName: string;
  private readonly kinesis: KinesisClient;
  private readonly handler: LocalKinesisHandler;
  private readonly batchSize: number;
  private readonly windowMs: number;
  private readonly startingPosition: StartingPosition;
  private readonly maxRetries: number;
  private readonly bisect: boolean;
  private readonly reportItemFailures: boolean;
  private readonly onFailure: LocalEventSourceMappingOptions['onFailure'];
  private readonly pollIntervalMs: number;
  private readonly discoveryIntervalMs: number;
  private readonly retryBackoffMs: number;
  private readonly functionTimeoutMs: number;
  private readonly maxPayloadBytes: number;
  private readonly accountId: string;
  private readonly functionName: string;
  private readonly hooks: EventSourceMappingHooks;
  private readonly logLimit: number;
  private readonly initialCheckpoints: Readonly<Record<string, string>>;
  private region: string | undefined;
  private identityArn: string | undefined;

  private readonly workers = new Map<string, ShardWorker>();
  private readonly log: InvocationLogEntry[] = [];
  private logIndex = 0;
  private readonly counters: EventSourceMappingStats = {
    invocations: 0, records: 0, deliveredRecords: 0, retries: 0, bisects: 0,
    failedBatches: 0, discardedRecords: 0, shardsCompleted: 0, errors: 0,
  };
  private isRunning = false;
  private startPromise: Promise<void> | undefined;
  private stopPromise: Promise<void> | undefined;
  private supervisor: Promise<void> | undefined;
  private firstDiscoveryDone = false;
  private lastDiscoveryStartedAt = 0;
  private discoveryError: unknown;
  private readonly sleepers = new Set<() => void>();
  private wakeDiscovery: (() => void) | undefined;
  private discoveryRequested = false;

  constructor(options: LocalEventSourceMappingOptions) {
    this.kinesis = options.kinesis;
    this.streamName = options.streamName;
    this.handler = options.handler;
    this.batchSize = options.batchSize ?? 100;
    if (!Number.isInteger(this.batchSize) || this.batchSize < 1 || this.batchSize > 10_000) {
      throw new RangeError(`batchSize must be an integer from 1 to 10000, got ${options.batchSize}`);
    }
    this.windowMs = options.maximumBatchingWindowMs ?? 0;
    this.startingPosition = options.startingPosition ?? 'TRIM_HORIZON';
    this.maxRetries = options.maximumRetryAttempts ?? -1;
    if (!Number.isInteger(this.maxRetries) || this.maxRetries < -1) {
      throw new RangeError(`maximumRetryAttempts must be -1 or a non-negative integer, got ${options.maximumRetryAttempts}`);
    }
    this.bisect = options.bisectBatchOnFunctionError ?? false;
    this.reportItemFailures = options.reportBatchItemFailures ?? true;
    this.onFailure = options.onFailure;
    this.pollIntervalMs = options.pollIntervalMs ?? 250;
    this.discoveryIntervalMs = options.shardDiscoveryIntervalMs ?? 1_000;
    this.retryBackoffMs = options.retryBackoffMs ?? 20;
    this.functionTimeoutMs = options.functionTimeoutMs ?? 0;
    this.maxPayloadBytes = options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD;
    this.region = options.region;
    this.accountId = options.accountId ?? '000000000000';
    this.functionName = options.functionName ?? 'local-function';
    this.identityArn = options.invokeIdentityArn;
    this.initialCheckpoints = options.initialCheckpoints ?? {};
    this.logLimit = options.invocationLogLimit ?? 10_000;
    this.hooks = options.hooks ?? {};
  }

  // ---------------------------------------------------------------------------------------------
  // Public API

  get running(): boolean { return this.isRunning; }

  /** `arn:aws:kinesis:<region>:<accountId>:stream/<streamName>` (region resolved at start). */
  get eventSourceArn(): string {
    return `arn:aws:kinesis:${this.region ?? 'us-east-1'}:${this.accountId}:stream/${this.streamName}`;
  }

  /** A snapshot of the counters (cumulative over the mapping's lifetime). */
  get stats(): EventSourceMappingStats { return { ...this.counters }; }

  /** Invocations so far, oldest first (bounded by `invocationLogLimit`). */
  get invocationLog(): readonly InvocationLogEntry[] { return this.log; }

  /** shardId → sequence number of the last record processed (or discarded) on that shard. */
  checkpoints(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [id, w] of this.workers) if (w.checkpoint !== undefined) out[id] = w.checkpoint;
    return out;
  }

  checkpoint(shardId: string): string | undefined { return this.workers.get(shardId)?.checkpoint; }

  shards(): ShardState[] {
    return [...this.workers.values()].map((w) => ({
      shardId: w.shardId,
      parentShardIds: w.parentIds,
      status: w.status,
      checkpoint: w.checkpoint,
      bufferedRecords: w.buffer.length,
      pendingRecords: w.pending.reduce((n, item) => n + item.records.length, 0),
      inFlight: w.inFlight,
    }));
  }

  /**
   * Starts polling in the background. Resolves once the shards are listed and, for LATEST, their
   * iterators are taken (records put after `start()` resolves are delivered). Idempotent.
   */
  async start(): Promise<void> {
    if (this.stopPromise) await this.stopPromise;
    if (this.isRunning) { await this.startPromise; return; }
    this.isRunning = true;
    this.startPromise = (async () => {
      try {
        if (!this.region) {
          try { this.region = await this.kinesis.config.region(); } catch { /* keep default */ }
          this.region ??= 'us-east-1';
        }
        this.identityArn ??= `arn:aws:iam::${this.accountId}:role/lambda-role`;
        await this.discover();
        if (!this.firstDiscoveryDone) throw this.discoveryError ?? new Error('shard discovery failed');
        // Pin LATEST iterators now, so records put after start() resolves are not missed.
        await Promise.all([...this.workers.values()]
          .filter((w) => w.iterator === undefined && w.initialPosition === 'LATEST' && w.checkpoint === undefined)
          .map(async (w) => { w.iterator = await this.acquireIterator(w); }));
      } catch (error) {
        this.isRunning = false;
        await Promise.allSettled([...this.workers.values()].map((w) => w.loop));
        throw error;
      }
      for (const w of this.workers.values()) this.launch(w);
      this.supervisor = this.superviseLoop();
    })();
    await this.startPromise;
  }

  /** Stops polling; waits for in-flight invocations. Buffered and pending records are kept for a restart. */
  async stop(): Promise<void> {
    if (this.stopPromise) return this.stopPromise;
    if (!this.isRunning) return;
    this.stopPromise = (async () => {
      try { await this.startPromise; } catch { /* start failed: nothing runs */ }
      this.isRunning = false;
      this.wakeAll();
      await this.supervisor;
      await Promise.allSettled([...this.workers.values()].map((w) => w.loop));
      for (const w of this.workers.values()) w.loop = undefined;
    })();
    try { await this.stopPromise; } finally { this.stopPromise = undefined; }
  }

  /**
   * Runs (starting if needed) until every open shard has returned no records for `idleMs`, nothing
   * is buffered, pending or in flight, and shards were re-listed; then resolves with the stats.
   * Stops again afterwards only if it started the mapping itself.
   */
  async drain(options: DrainOptions = {}): Promise<EventSourceMappingStats> {
    const idleMs = options.idleMs ?? 500;
    const timeoutMs = options.timeoutMs ?? 120_000;
    const startedHere = !this.isRunning;
    if (startedHere) await this.start();
    const drainStartedAt = Date.now();
    this.requestDiscovery(); // idleness needs a ListShards started after this point: do one now
    try {
      for (;;) {
        if (!this.isRunning) throw new Error('event source mapping stopped during drain');
        if (this.isIdle(idleMs, drainStartedAt)) break;
        if (Date.now() - drainStartedAt > timeoutMs) {
          throw new Error(`drain: not idle after ${timeoutMs} ms; shards: ${JSON.stringify(this.shards())}`);
        }
        await sleep(Math.max(10, Math.min(50, this.pollIntervalMs)));
      }
    } finally {
      if (startedHere) await this.stop();
    }
    return this.stats;
  }

  // ---------------------------------------------------------------------------------------------
  // Shard discovery

  private async superviseLoop(): Promise<void> {
    while (this.isRunning) {
      await new Promise<void>((resolve) => {
        if (this.discoveryRequested || !this.isRunning) { resolve(); return; }
        const timer = setTimeout(done, this.discoveryIntervalMs);
        function done(): void { clearTimeout(timer); resolve(); }
        this.wakeDiscovery = done;
      });
      this.wakeDiscovery = undefined;
      this.discoveryRequested = false;
      if (!this.isRunning) break;
      await this.discover();
      for (const w of this.workers.values()) if (!w.loop && w.status !== 'completed') this.launch(w);
    }
  }

  private requestDiscovery(): void {
    this.discoveryRequested = true;
    this.wakeDiscovery?.();
  }

  private async discover(): Promise<void> {
    const startedAt = Date.now();
    let shards;
    try {
      shards = await listAllShards(this.kinesis, this.streamName);
    } catch (error) {
      this.discoveryError = error;
      this.noteError(error, undefined);
      return;
    }
    const listed = new Set(shards.map((s) => s.ShardId!));
    const initial = !this.firstDiscoveryDone;
    for (const shard of shards) {
      const shardId = shard.ShardId!;
      if (this.workers.has(shardId)) continue;
      const parentIds = [shard.ParentShardId, shard.AdjacentParentShardId]
        .filter((id): id is string => !!id && (listed.has(id) || this.workers.has(id)));
      const checkpoint = this.initialCheckpoints[shardId];
      this.workers.set(shardId, {
        shardId,
        parentIds,
        // Lambda reads shards created after the mapping from their start.
        initialPosition: initial ? this.startingPosition : 'TRIM_HORIZON',
        status: parentIds.length > 0 ? 'waiting-for-parents' : 'active',
        iterator: undefined,
        readPosition: undefined,
        checkpoint,
        buffer: [],
        bufferSince: 0,
        pending: [],
        inFlight: false,
        lastActivityAt: Date.now(),
        lastEmptyPollStartedAt: 0,
        doneAt: 0,
        loop: undefined,
      });
    }
    this.firstDiscoveryDone = true;
    this.lastDiscoveryStartedAt = startedAt;
  }

  private launch(w: ShardWorker): void {
    if (w.loop || w.status === 'completed' || !this.isRunning) return;
    w.loop = this.shardLoop(w).finally(() => { w.loop = undefined; });
  }

  // ---------------------------------------------------------------------------------------------
  // Per-shard loop

  private async shardLoop(w: ShardWorker): Promise<void> {
    let errorStreak = 0;
    while (this.isRunning && w.status !== 'completed') {
      if (w.status === 'waiting-for-parents') {
        if (w.parentIds.every((id) => this.workers.get(id)?.status === 'completed' || !this.workers.has(id))) {
          w.status = 'active';
          w.lastActivityAt = Date.now();
        } else {
          await this.pause(this.pollIntervalMs);
          continue;
        }
      }
      try {
        if (w.pending.length === 0) {
          await this.gather(w);
          if (!this.isRunning) break;
          if (w.buffer.length === 0) {
            if (w.iterator === null) { this.complete(w); break; }
            await this.pause(this.pollIntervalMs);
            continue;
          }
          w.pending.push({ records: this.takeBatch(w), retries: 0, kind: 'initial', lastError: '' });
        }
        await this.processPending(w);
        errorStreak = 0;
      } catch (error) {
        this.noteError(error, w.shardId);
        errorStreak++;
        await this.pause(Math.min(this.pollIntervalMs * 2 ** Math.min(errorStreak, 6), 5_000));
      }
    }
  }

  private complete(w: ShardWorker): void {
    w.status = 'completed';
    w.doneAt = Date.now();
    this.counters.shardsCompleted++;
    this.requestDiscovery();
    this.wakeAll(); // children waiting on this shard re-check at once
  }

  /** Fills the buffer: one GetRecords, then, with a batching window, more until full or the window ends. */
  private async gather(w: ShardWorker): Promise<void> {
    if (w.buffer.length < this.batchSize && w.iterator !== null) await this.fetch(w);
    if (this.windowMs <= 0) return;
    while (
      this.isRunning && w.buffer.length > 0 && w.buffer.length < this.batchSize && w.iterator !== null
      && Date.now() - w.bufferSince < this.windowMs
    ) {
      await this.pause(Math.min(this.pollIntervalMs, this.windowMs - (Date.now() - w.bufferSince)));
      if (!this.isRunning) return;
      await this.fetch(w);
    }
  }

  private async fetch(w: ShardWorker): Promise<void> {
    if (w.iterator === undefined) w.iterator = await this.acquireIterator(w);
    if (w.iterator === null) return;
    await this.hooks.beforeGetRecords?.(w.shardId);
    const requestedAt = Date.now();
    let response;
    try {
      response = await this.kinesis.send(new GetRecordsCommand({
        ShardIterator: w.iterator,
        Limit: Math.max(1, this.batchSize - w.buffer.length),
      }));
    } catch (error) {
      if (error instanceof ExpiredIteratorException || (error as { name?: string }).name === 'ExpiredIteratorException') {
        w.iterator = undefined; // re-acquired after readPosition on the next fetch
        return;
      }
      throw error;
    }
    const records = response.Records ?? [];
    if (records.length > 0) {
      if (w.buffer.length === 0) w.bufferSince = Date.now();
      for (const record of records) {
        const converted = this.toEventRecord(w.shardId, record);
        // Never go backwards (a re-acquired iterator cannot, but be strict: order is the contract).
        if (w.readPosition !== undefined && BigInt(converted.kinesis.sequenceNumber) <= BigInt(w.readPosition)) continue;
        w.buffer.push(converted);
        w.readPosition = converted.kinesis.sequenceNumber;
      }
      w.lastActivityAt = Date.now();
    } else {
      w.lastEmptyPollStartedAt = requestedAt;
    }
    w.iterator = response.NextShardIterator ?? null;
  }

  private async acquireIterator(w: ShardWorker): Promise<string | null> {
    const after = w.readPosition ?? w.checkpoint;
    const request = after !== undefined
      ? { ShardIteratorType: 'AFTER_SEQUENCE_NUMBER' as ShardIteratorType, StartingSequenceNumber: after }
      : { ShardIteratorType: w.initialPosition as ShardIteratorType };
    const response = await this.kinesis.send(new GetShardIteratorCommand({ StreamName: this.streamName, ShardId: w.shardId, ...request }));
    return response.ShardIterator ?? null;
  }

  /** Takes the next batch off the buffer: up to batchSize records within the payload limit. */
  private takeBatch(w: ShardWorker): KinesisStreamRecord[] {
    let bytes = 16; // {"Records":[]}
    let count = 0;
    while (count < w.buffer.length && count < this.batchSize) {
      const size = Buffer.byteLength(JSON.stringify(w.buffer[count])) + 1;
      if (count > 0 && bytes + size > this.maxPayloadBytes) break;
      bytes += size;
      count++;
    }
    return w.buffer.splice(0, count);
  }

  private toEventRecord(shardId: string, record: KinesisRecord): KinesisStreamRecord {
    const sequenceNumber = record.SequenceNumber!;
    const arrival = record.ApproximateArrivalTimestamp;
    return {
      kinesis: {
        kinesisSchemaVersion: '1.0',
        partitionKey: record.PartitionKey ?? '',
        sequenceNumber,
        data: Buffer.from(record.Data ?? new Uint8Array()).toString('base64'),
        approximateArrivalTimestamp: arrival ? arrival.getTime() / 1000 : Date.now() / 1000,
      },
      eventSource: 'aws:kinesis',
      eventVersion: '1.0',
      eventID: `${shardId}:${sequenceNumber}`,
      eventName: 'aws:kinesis:record',
      invokeIdentityArn: this.identityArn!,
      awsRegion: this.region!,
      eventSourceARN: this.eventSourceArn,
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Invocation and error handling

  private async processPending(w: ShardWorker): Promise<void> {
    while (this.isRunning && w.pending.length > 0) {
      const item = w.pending[0]!;
      const result = await this.invoke(w, item);
      switch (result.kind) {
        case 'success':
          this.counters.records += item.records.length;
          this.setCheckpoint(w, item.records[item.records.length - 1]!.kinesis.sequenceNumber);
          w.pending.shift();
          break;
        case 'not-invoked':
          // Lambda retries until the records expire; it does not count against the retry quota.
          item.lastError = result.reason;
          await this.pause(this.backoff(item.retries + 1));
          break;
        case 'partial': {
          item.lastError = result.reason;
          if (result.index > 0) {
            this.counters.records += result.index;
            this.setCheckpoint(w, item.records[result.index - 1]!.kinesis.sequenceNumber);
            item.records = item.records.slice(result.index);
          }
          await this.retryOrDiscard(w, item);
          break;
        }
        case 'error':
          item.lastError = result.reason;
          if (this.bisect && item.records.length > 1) {
            // Splitting does not count towards the retry quota (Lambda docs).
            const middle = Math.ceil(item.records.length / 2);
            const first: WorkItem = { records: item.records.slice(0, middle), retries: item.retries, kind: 'bisected', lastError: result.reason };
            const second: WorkItem = { records: item.records.slice(middle), retries: item.retries, kind: 'bisected', lastError: result.reason };
            w.pending.splice(0, 1, first, second);
            this.counters.bisects++;
          } else {
            await this.retryOrDiscard(w, item);
          }
          break;
      }
    }
  }

  private async retryOrDiscard(w: ShardWorker, item: WorkItem): Promise<void> {
    if (this.maxRetries >= 0 && item.retries >= this.maxRetries) {
      await this.discard(w, item);
      return;
    }
    item.retries++;
    item.kind = 'retry';
    this.counters.retries++;
    await this.pause(this.backoff(item.retries));
  }

  private async discard(w: ShardWorker, item: WorkItem): Promise<void> {
    const records = item.records;
    const first = records[0]!;
    const last = records[records.length - 1]!;
    const info: BatchFailureInfo = {
      condition: 'RetryAttemptsExhausted',
      reason: item.lastError,
      shardId: w.shardId,
      streamArn: this.eventSourceArn,
      startSequenceNumber: first.kinesis.sequenceNumber,
      endSequenceNumber: last.kinesis.sequenceNumber,
      batchSize: records.length,
      approximateArrivalOfFirstRecord: new Date(first.kinesis.approximateArrivalTimestamp * 1000).toISOString(),
      approximateArrivalOfLastRecord: new Date(last.kinesis.approximateArrivalTimestamp * 1000).toISOString(),
      approximateInvokeCount: this.invokeCountOf(w.shardId, first.kinesis.sequenceNumber),
      records,
    };
    if (this.onFailure) {
      // The records are only skipped once the destination took them.
      for (let attempt = 1; ; attempt++) {
        try { await this.onFailure(info); break; } catch (error) {
          this.noteError(error, w.shardId);
          if (!this.isRunning) throw error;
          await this.pause(this.backoff(attempt));
          if (!this.isRunning) throw error;
        }
      }
    }
    this.counters.failedBatches++;
    this.counters.discardedRecords += records.length;
    this.setCheckpoint(w, last.kinesis.sequenceNumber);
    w.pending.shift();
  }

  private invokeCountOf(shardId: string, sequenceNumber: string): number {
    let n = 0;
    for (const entry of this.log) {
      if (entry.shardId === shardId && entry.outcome !== 'not-invoked' && entry.sequenceNumbers.includes(sequenceNumber)) n++;
    }
    return n;
  }

  private setCheckpoint(w: ShardWorker, sequenceNumber: string): void {
    if (w.checkpoint !== undefined && BigInt(sequenceNumber) <= BigInt(w.checkpoint)) {
      throw new Error(`checkpoint would move backwards on ${w.shardId}: ${sequenceNumber} <= ${w.checkpoint}`);
    }
    w.checkpoint = sequenceNumber;
    this.hooks.onCheckpoint?.(w.shardId, sequenceNumber);
  }

  private async invoke(w: ShardWorker, item: WorkItem): Promise<InvokeResult> {
    const requestId = randomUUID();
    const info: InvocationInfo = { requestId, shardId: w.shardId, kind: item.kind, retryAttempt: item.retries };
    // A fresh copy per invocation, as Lambda serializes the event: a handler mutating it cannot
    // change what a redelivery carries.
    const event: KinesisStreamEvent = { Records: structuredClone(item.records) };
    const startedAt = Date.now();
    let result: InvokeResult;
    let outcome: InvocationOutcome;
    w.inFlight = true;
    try {
      try {
        await this.hooks.beforeInvoke?.(event, info);
      } catch (error) {
        result = { kind: 'not-invoked', reason: `invoke failed before the function ran: ${messageOf(error)}` };
        outcome = 'not-invoked';
        return result;
      }
      this.counters.invocations++;
      this.counters.deliveredRecords += item.records.length;
      let response: HandlerResult;
      try {
        response = await this.callHandler(event, requestId);
      } catch (error) {
        result = { kind: 'error', reason: messageOf(error) };
        outcome = 'function-error';
        return result;
      }
      try {
        await this.hooks.afterInvoke?.(event, response, info);
      } catch (error) {
        result = { kind: 'error', reason: `response lost: ${messageOf(error)}` };
        outcome = 'response-lost';
        return result;
      }
      result = this.interpret(response, item.records);
      outcome = result.kind === 'success' ? 'success' : result.kind === 'partial' ? 'partial-failure' : 'function-error';
      return result;
    } finally {
      w.inFlight = false;
      w.lastActivityAt = Date.now();
      this.record({
        ...info,
        index: this.logIndex++,
        sequenceNumbers: item.records.map((r) => r.kinesis.sequenceNumber),
        size: item.records.length,
        outcome: outcome!,
        ...(result!.kind === 'partial' ? { failedSequenceNumber: item.records[result!.index]!.kinesis.sequenceNumber } : {}),
        ...(result!.kind !== 'success' ? { error: result!.reason } : {}),
        startedAt,
        endedAt: Date.now(),
      });
    }
  }

  private record(entry: InvocationLogEntry): void {
    this.log.push(entry);
    if (this.log.length > this.logLimit) this.log.splice(0, this.log.length - this.logLimit);
    this.hooks.onInvocation?.(entry);
  }

  /** Lambda's reading of a stream function's response. */
  private interpret(response: HandlerResult, records: readonly KinesisStreamRecord[]): InvokeResult {
    if (!this.reportItemFailures || response === null || response === undefined || typeof response !== 'object') return { kind: 'success' };
    const failures = (response as { batchItemFailures?: unknown }).batchItemFailures;
    if (failures === null || failures === undefined) return { kind: 'success' };
    if (!Array.isArray(failures)) return { kind: 'error', reason: 'invalid response: batchItemFailures is not a list' };
    if (failures.length === 0) return { kind: 'success' };
    let lowest: bigint | undefined;
    let lowestId = '';
    for (const failure of failures) {
      const id = (failure as { itemIdentifier?: unknown } | null)?.itemIdentifier;
      if (typeof id !== 'string' || id === '') {
        return { kind: 'error', reason: `invalid batchItemFailures entry ${JSON.stringify(failure)}: the whole batch failed` };
      }
      if (!/^\d+$/.test(id) || !records.some((r) => r.kinesis.sequenceNumber === id)) {
        return { kind: 'error', reason: `batchItemFailures itemIdentifier ${JSON.stringify(id)} is not in the batch: the whole batch failed` };
      }
      const value = BigInt(id);
      if (lowest === undefined || value < lowest) { lowest = value; lowestId = id; }
    }
    const index = records.findIndex((r) => r.kinesis.sequenceNumber === lowestId);
    return { kind: 'partial', index, reason: `partial batch failure at ${lowestId}` };
  }

  private callHandler(event: KinesisStreamEvent, requestId: string): Promise<HandlerResult> {
    const timeoutMs = this.functionTimeoutMs;
    const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : Date.now() + 900_000;
    return new Promise<HandlerResult>((resolve, reject) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (error: unknown, value?: HandlerResult): void => {
        if (settled) return;
        settled = true;
        if (timer) clearTimeout(timer);
        if (error !== undefined && error !== null) reject(error); else resolve(value);
      };
      const callback: Callback<KinesisStreamBatchResponse | void> = (error, value) => finish(error ?? undefined, value);
      const context = makeContext(requestId, this.functionName, this.region!, this.accountId, deadline, callback);
      if (timeoutMs > 0) {
        timer = setTimeout(() => finish(new Error(`Task timed out after ${(timeoutMs / 1000).toFixed(2)} seconds`)), timeoutMs);
      }
      let returned: unknown;
      try {
        returned = this.handler(event, context, callback);
      } catch (error) {
        finish(error ?? new Error('handler threw a nullish value'));
        return;
      }
      if (returned && typeof (returned as PromiseLike<HandlerResult>).then === 'function') {
        (returned as PromiseLike<HandlerResult>).then(
          (value) => finish(undefined, value),
          (error: unknown) => finish(error ?? new Error('handler rejected with a nullish value')),
        );
      } else if (this.handler.length < 3) {
        // A synchronous two-argument handler: its return value is the response.
        finish(undefined, returned as HandlerResult);
      }
      // else: callback style; wait for the callback (or the timeout).
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Idleness, sleeping, errors

  private isIdle(idleMs: number, since: number): boolean {
    const now = Date.now();
    if (this.workers.size === 0 && this.lastDiscoveryStartedAt < since) return false;
    let latest = since;
    for (const w of this.workers.values()) {
      if (w.status === 'completed') { latest = Math.max(latest, w.doneAt); continue; }
      if (w.status === 'waiting-for-parents') return false;
      if (w.inFlight || w.pending.length > 0 || w.buffer.length > 0) return false;
      if (w.lastEmptyPollStartedAt < since || w.lastEmptyPollStartedAt < w.lastActivityAt) return false;
      if (now - w.lastActivityAt < idleMs) return false;
    }
    // A ListShards after everything settled: no shard appeared (a split) that still needs reading.
    return this.lastDiscoveryStartedAt >= latest;
  }

  private backoff(attempt: number): number {
    if (this.retryBackoffMs <= 0) return 0;
    return Math.min(this.retryBackoffMs * 2 ** Math.max(0, attempt - 1), 1_000);
  }

  /** Sleeps, cut short by stop() or a completed shard. */
  private pause(ms: number): Promise<void> {
    if (ms <= 0 || !this.isRunning) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => { clearTimeout(timer); this.sleepers.delete(done); resolve(); };
      const timer = setTimeout(done, ms);
      this.sleepers.add(done);
    });
  }

  private wakeAll(): void {
    for (const wake of [...this.sleepers]) wake();
    this.wakeDiscovery?.();
  }

  private noteError(error: unknown, shardId: string | undefined): void {
    this.counters.errors++;
    this.hooks.onError?.(error, shardId);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return typeof error === 'string' ? error : JSON.stringify(error) ?? String(error);
}

function makeContext(
  requestId: string, functionName: string, region: string, accountId: string, deadline: number,
  callback: Callback<KinesisStreamBatchResponse | void>,
): Context {
  const day = new Date().toISOString().slice(0, 10).replace(/-/g, '/');
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${region}:${accountId}:function:${functionName}`,
    memoryLimitInMB: '128',
    awsRequestId: requestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: `${day}/[$LATEST]${randomBytes(16).toString('hex')}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: (error?: Error, result?: unknown) => callback(error ?? null, result as KinesisStreamBatchResponse | void),
    fail: (error: Error | string) => callback(typeof error === 'string' ? new Error(error) : error),
    succeed: (result: unknown) => callback(null, result as KinesisStreamBatchResponse | void),
  };
}
