/**
 * One deployed query as a Lambda function under fault injection: the REAL Kinesis handler
 * (createKinesisTriggerHandler, or createRepartitionTriggerHandler for a query's stage 2) over the
 * REAL AWS adapters (createAwsQueryBackends), run inside a simulated container. A container owns its SDK clients; a middleware on them counts the fault
 * points and injects the faults:
 *
 * - a kill (ChaosKill) strikes right after a chosen write succeeded; from then on every request of
 *   that container fails (the process is gone), the invocation ends in a function error, the warm
 *   state cache is dropped and the next invocation runs in a new container (new clients, new
 *   backends, new handler), as after a Lambda runtime crash;
 * - a throttle fails one request before it is sent, with the service's throttling exception
 *   (a mock only for that request: everything else goes to the emulators);
 * - around the handler: a duplicate delivery, a crash before running (a function error, which
 *   the event source mapping answers by bisecting the batch), a lost response (afterInvoke hook).
 */
import type { Context, KinesisStreamBatchResponse, KinesisStreamEvent } from 'aws-lambda';
import type { QueryDefinition } from '../../query/query-definition.js';
import { compileForDeployment } from '../../query/compiled-query.js';
import { createAwsClients, type AwsClientOptions, type AwsClients } from '../../aws/clients.js';
import { DynamoDbCheckpoint } from '../../aws/dynamodb-checkpoint.js';
import { StateCache } from '../../aws/dynamodb-state-store.js';
import { createKinesisTriggerHandler, createRepartitionTriggerHandler, shardIdOf, type KinesisTriggerHandler } from '../../aws/kinesis-trigger-handler.js';
import type { Observability } from '../../aws/observability.js';
import type { RuntimeConfig } from '../../runtime/runtime-config.js';
import type { PartitionBackends } from '../../query/partition-backends.js';
import type { ShardInvocationResult } from '../../query/shard-invocation.js';
import type { Sink, SinkBatch } from '../../sinks/sink.js';
import type { EventSourceMappingHooks, HandlerResult } from '../event-source-mapping.js';
import { ChaosKill, type FaultController, type PlannedFault } from './faults.js';
import type { SinkHistory } from './history.js';
import { instrumentClients, killContainer, type ContainerHandle } from './instrument.js';
import { atRisk, type Backlog } from './retention-timeline.js';
import { withWrites } from './sink-wrapper.js';
import type { ZombieChoice } from './zombie-choice.js';

interface Container {
  readonly id: number;
  readonly shardId: string;
  readonly clients: AwsClients;
  /** The process-level state cache of this container (Lambda keeps it between warm invocations). */
  readonly cache: StateCache;
  readonly handler: KinesisTriggerHandler;
  dead: boolean;
  killedBy?: string;
  /** Invocations started in it (a resend within one is a retry in place). */
  invocation: number;
  /** Set while an invocation runs: freezing it makes Lambda time it out (see 'zombie-wakes-late'). */
  freeze?: () => void;
  /** The event of the invocation it runs (what 'planned-then-expired' expires a part of). */
  event?: KinesisStreamEvent;
  /** The errors its running invocation met so far (the handler answers them as batchItemFailures). */
  errors?: unknown[];
  /** Whether its running invocation's records were at risk when it read them (retention-timeline.ts). */
  atRisk?: boolean;
}

/**
 * Each shard's trim horizon ('planned-then-expired'), shared by every function reading the stream.
 * Kinesis trims a shard oldest-first: expiring a record expires every older record of its shard
 * too, whichever query's planned batch holds them.
 */
export class ExpiredRecords {
  private readonly horizon = new Map<string, bigint>();
  private readonly listeners: ((streamName: string, shardId: string) => void)[] = [];
  /** Moves the shard's trim horizon to `sequenceNumber` (never back), then tells every listener. */
  add(streamName: string, shardId: string, sequenceNumber: string): void {
    const key = `${streamName}#${shardId}`;
    const seq = BigInt(sequenceNumber);
    if ((this.horizon.get(key) ?? -1n) < seq) this.horizon.set(key, seq);
    for (const l of this.listeners) l(streamName, shardId);
  }
  /** Called after each trim (every function reading the stream decides what its frozen attempts do). */
  onTrim(listener: (streamName: string, shardId: string) => void): void {
    this.listeners.push(listener);
  }
  readonly has = (streamName: string, shardId: string, sequenceNumber: string): boolean => {
    const horizon = this.horizon.get(`${streamName}#${shardId}`);
    return horizon !== undefined && sequenceNumber !== '' && BigInt(sequenceNumber) <= horizon;
  };
}

export interface ChaosFunctionOptions {
  readonly definition: QueryDefinition;
  /**
   * Which function of the deployment: the source stream's (the whole query, or stage 1 when it
   * has a repartition stage) or the internal repartition stream's (stage 2). Default 'source'.
   */
  readonly kind?: 'source' | 'repartition';
  readonly config: RuntimeConfig;
  readonly clientOptions: AwsClientOptions;
  readonly controller: FaultController;
  readonly observability: Observability;
  readonly onInvocation?: (shardId: string, result: ShardInvocationResult) => void;
  /** Notes on what the harness did (with --trace). */
  readonly trace?: (line: string) => void;
  /** Records every sink write a reader could see. */
  readonly history?: SinkHistory;
  /** Payloads (UTF-8) that crash the function whenever an event holds one (poison records). */
  readonly poison?: ReadonlySet<string>;
  /** Reshards the stream this function reads ('reshard-mid-run'); says what it did. */
  readonly reshard?: () => Promise<string>;
  /** Test hook: what the sink does (a planted bug), under the harness's recording. */
  readonly decorateSink?: (sink: Sink) => Sink;
  /** The stream this function reads, and the records expired from it ('planned-then-expired'). */
  readonly streamName?: string;
  readonly expired?: ExpiredRecords;
  /** Where a zombie of an upsert sink freezes (zombie-choice.ts); default wherever it strikes. */
  readonly zombieChoice?: ZombieChoice;
  /**
   * The simulated retention timeline (retention-timeline.ts): backlog arrivals, the keep policy
   * told to the engine, and when a trim may strike. Without it every trim strikes at once.
   */
  readonly timeline?: Backlog;
  /** The engine claimed a kept copy of a batch (checkpoint partition, batch id). */
  readonly onKept?: (partitionId: string, batchId: number) => void;
}

/** A planned batch whose records are not at risk: they expire once a retry ran it and died before its commit. */
interface DeferredTrim {
  readonly fault: PlannedFault;
  readonly pk: string;
  readonly batchId: number;
  readonly records: KinesisStreamEvent['Records'];
}

export class ChaosFunction {
  /** The live container per shard: Lambda runs concurrent invocations in separate containers. */
  private readonly current = new Map<string, Container>();
  private containerCount = 0;
  private crashes = 0;
  /** Successful invocations per shard: a frozen invocation wakes once newer batches committed. */
  private readonly successes = new Map<string, number>();
  private readonly sleepers: { shardId: string; container: Container; after: number; ready: () => boolean; wake: () => void; kill: (why: string) => void }[] = [];
  private readonly deferredTrims: DeferredTrim[] = [];
  /** Planned batches a trim struck ('planned-then-expired'), by checkpoint pk and batch id. */
  readonly trimmedBatches: { readonly pk: string; readonly batchId: number }[] = [];
  /** Frozen attempts killed by a trim of records they read while not at risk (Lambda timed them out long before). */
  readonly zombiesTimedOut: string[] = [];
  /**
   * Zombies of an upsert sink that woke once a newer batch had written one of their keys (a
   * missing sink fence shows as a key going back), and those woken at the end without one.
   */
  readonly zombieWakes = { challenged: 0, unchallenged: [] as string[] };
  private readonly zombies = new Set<Promise<unknown>>();
  /** Poison-record invocations (each a function error). */
  poisonCrashes = 0;
  /**
   * Records of this function's stream it fails on every time ('skipped-then-expired'), by
   * `<shard>#<sequence number>`: the payload (UTF-8).
   */
  readonly outage = new Map<string, { readonly shardId: string; readonly sequenceNumber: string; readonly data: string }>();
  /** Containers started (one per shard + one per simulated crash). */
  get containers(): number { return this.containerCount; }
  /** Simulated process deaths (kills and crashes), each followed by a cold container. */
  get processesKilled(): number { return this.crashes; }

  constructor(private readonly options: ChaosFunctionOptions) {
    options.expired?.onTrim((streamName, shardId) => this.trimmed(streamName, shardId));
  }

  /**
   * After a trim of `shardId`: a frozen attempt that read trimmed records while they were not at
   * risk cannot outlive them (its Lambda timed out long before): it never wakes. One at risk may.
   */
  private trimmed(streamName: string, shardId: string): void {
    const { expired, timeline } = this.options;
    if (!timeline || !expired || streamName !== this.options.streamName) return;
    for (const s of [...this.sleepers]) {
      const records = s.container.event?.Records ?? [];
      if (s.container.atRisk !== false || !records.some((r) => shardIdOf(r) === shardId && expired.has(streamName, shardId, r.kinesis.sequenceNumber))) continue;
      this.sleepers.splice(this.sleepers.indexOf(s), 1);
      this.zombiesTimedOut.push(`container ${s.container.id} on ${s.shardId}`);
      s.kill('its Lambda timed out long before the records it read (not at risk) expired');
    }
  }

  private containerFor(shardId: string): Container {
    let c = this.current.get(shardId);
    if (!c) this.current.set(shardId, (c = this.newContainer(shardId)));
    return c;
  }

  /** The function as the event source mapping invokes it. */
  readonly handler = async (event: KinesisStreamEvent, context: Context): Promise<KinesisStreamBatchResponse | void> => {
    const { controller } = this.options;
    const shardId = event.Records[0] ? shardIdOf(event.Records[0]) : '?';
    const { timeline, streamName } = this.options;
    if (timeline && streamName) event = timeline.agedEvent(streamName, event);
    let container = this.containerFor(shardId);
    container.event = event;
    const poison = this.options.poison;
    if (poison && event.Records.some((r) => poison.has(Buffer.from(r.kinesis.data, 'base64').toString('utf8')))) {
      // A record that kills the runtime whenever it is in the event (it fails every time).
      this.poisonCrashes++;
      this.replace(container, 'poison record');
      throw new Error('Runtime exited with error: signal: killed (chaos: a poison record in the event)');
    }
    const outageKey = (r: KinesisStreamEvent['Records'][number]): string => `${shardIdOf(r)}#${r.kinesis.sequenceNumber}`;
    if (event.Records.some((r) => this.outage.has(outageKey(r)))) {
      throw new Error('chaos: the function fails on these records until the event source mapping gives them up (an outage)');
    }
    const fault = controller.hit('invocation', () => `${shardId}, ${event.Records.length} records from ${event.Records[0]?.kinesis.sequenceNumber.slice(-6)}`);
    if (fault?.kind === 'skipped-then-expired') {
      for (const r of event.Records) {
        this.outage.set(outageKey(r), { shardId: shardIdOf(r), sequenceNumber: r.kinesis.sequenceNumber, data: Buffer.from(r.kinesis.data, 'base64').toString('utf8') });
      }
      throw new Error('chaos: an outage starts: the function fails on these records until the event source mapping gives them up');
    }
    if (fault?.kind === 'crash-before-run') {
      this.replace(container, 'crash before run');
      throw new Error('chaos: the runtime crashed before running the handler');
    }
    if (fault?.kind === 'clock-skew') {
      // This container's clock is off from now on (hours, either way); the others' are right.
      const hours = 1 + Math.floor(controller.random() * 3);
      const skewMs = (controller.random() < 0.5 ? -1 : 1) * hours * 3_600_000;
      this.replace(container, 'replaced by a container with a skewed clock');
      this.current.set(shardId, (container = this.newContainer(shardId, skewMs)));
      container.event = event;
      this.options.trace?.(`container ${container.id} on ${shardId}: clock off by ${skewMs / 3_600_000} h`);
    }
    if (fault?.kind === 'reshard-mid-run' && this.options.reshard) {
      // This invocation's event is the parent's; the mapping starts the children once it finished.
      this.options.trace?.(`reshard before ${shardId}'s invocation: ${await this.options.reshard()}`);
    }
    if (fault?.kind === 'concurrent-duplicate') {
      // A second container runs the same event at the same time (an invocation Lambda gave up on
      // that still runs, or an operator's manual re-run): the conditional writes must decide.
      const zombie = this.newContainer(shardId);
      zombie.event = event;
      container.invocation++;
      zombie.invocation++;
      const [mine, theirs] = await Promise.allSettled([this.invoke(container, event, context), this.invoke(zombie, structuredClone(event), context)]);
      zombie.clients.destroy();
      const show = (r: PromiseSettledResult<KinesisStreamBatchResponse | void>): string =>
        (r.status === 'rejected' ? `threw ${(r.reason as Error).message}` : JSON.stringify(r.value ?? null));
      this.options.trace?.(`concurrent duplicate on ${shardId}: container ${container.id} → ${show(mine)}; container ${zombie.id} → ${show(theirs)}`);
      this.checkAlive(container);
      if (theirs.status === 'rejected' && !(theirs.reason instanceof ChaosKill)) throw theirs.reason;
      if (mine.status === 'rejected') throw mine.reason;
      return this.succeeded(shardId, mine.value);
    }
    let result = await this.runFreezable(container, event, context);
    this.checkAlive(container);
    if (fault?.kind === 'duplicate-delivery') {
      result = await this.runFreezable(container, structuredClone(event), context);
      this.checkAlive(container);
    }
    return this.succeeded(shardId, result);
  };

  /**
   * 'planned-then-expired', right after `container` planned a batch of its event: an outage makes
   * the function fail on the event's first records (1 to all of them) until the mapping gives them
   * up, and they leave the stream (its trim horizon passes them) while the planned batch needs them.
   * With a timeline, records not at risk leave only after a retry ran the batch (Lambda retries a
   * crash promptly) and died before its commit (DeferredTrim); records at risk at once.
   */
  private expirePlanned(container: Container, fault: PlannedFault, pk: string, batchId: number): void {
    const records = container.event?.Records ?? [];
    if (records.length === 0 || !this.options.streamName || !this.options.expired) return;
    const count = 1 + Math.floor(this.options.controller.random() * records.length);
    const expiring = records.slice(0, count);
    const newest = expiring[expiring.length - 1]!;
    const { timeline } = this.options;
    if (timeline && !atRisk(newest.kinesis.approximateArrivalTimestamp * 1000, Date.now())) {
      this.options.controller.hold(fault);
      this.deferredTrims.push({ fault, pk, batchId, records: expiring });
      this.options.trace?.(`container ${container.id} on ${container.shardId}: its planned batch ${batchId}'s first ${count} of ${records.length} records (not at risk) expire once a retry ran it`);
      return;
    }
    this.trim(expiring);
    this.trimmedBatches.push({ pk, batchId });
    this.options.trace?.(`container ${container.id} on ${container.shardId}: its planned batch's first ${count} of ${records.length} records fail, then expire${timeline ? ' (at risk)' : ''}`);
  }

  /** The outage on `records`, then the trim horizon passes them. */
  private trim(records: KinesisStreamEvent['Records']): void {
    for (const r of records) {
      const shardId = shardIdOf(r);
      this.outage.set(`${shardId}#${r.kinesis.sequenceNumber}`, { shardId, sequenceNumber: r.kinesis.sequenceNumber, data: Buffer.from(r.kinesis.data, 'base64').toString('utf8') });
    }
    const newest = records[records.length - 1]!;
    this.options.expired!.add(this.options.streamName!, shardIdOf(newest), newest.kinesis.sequenceNumber);
  }

  /**
   * Before a commit transaction of any container (or the scheduled function's): a retry that ran a
   * deferred trim's batch dies before committing it, then the batch's first records expire.
   */
  readonly beforeCommit = (container: ContainerHandle, commits: readonly { readonly pk: string; readonly batchId: number }[]): void => {
    const i = this.deferredTrims.findIndex((t) => commits.some((c) => c.pk === t.pk && c.batchId === t.batchId));
    if (i < 0) return;
    const [t] = this.deferredTrims.splice(i, 1);
    this.trim(t!.records);
    this.trimmedBatches.push({ pk: t!.pk, batchId: t!.batchId });
    this.options.controller.confirm(t!.fault, `a retry ran batch ${t!.batchId} and died before its commit, then ${t!.records.length} of its records expired`);
    this.options.trace?.(`container ${container.id}: ran ${t!.pk} batch ${t!.batchId} again and dies before its commit; then its first ${t!.records.length} records expire`);
    killContainer(container, `before committing ${t!.pk} batch ${t!.batchId} (its records expire next)`);
  };

  /** Wakes every frozen invocation and waits until they are done (before the sinks are read). */
  async wakeZombies(): Promise<void> {
    for (const s of this.sleepers.splice(0)) s.wake();
    await Promise.allSettled([...this.zombies]);
  }

  private succeeded<T>(shardId: string, result: T): T {
    const n = (this.successes.get(shardId) ?? 0) + 1;
    this.successes.set(shardId, n);
    for (const s of this.sleepers.filter((z) => z.shardId === shardId && n >= z.after && z.ready())) {
      this.sleepers.splice(this.sleepers.indexOf(s), 1);
      s.wake();
    }
    return result;
  }

  /**
   * Runs the handler; if it freezes (a 'zombie-wakes-late' fault), Lambda's timeout answers the
   * mapping while the frozen invocation stays in its container, which no new invocation uses.
   */
  private async runFreezable(container: Container, event: KinesisStreamEvent, context: Context): Promise<KinesisStreamBatchResponse | void> {
    let timedOut!: (error: Error) => void;
    let frozen = false;
    const timeout = new Promise<never>((_, reject) => { timedOut = reject; });
    container.freeze = () => {
      container.freeze = undefined;
      frozen = true;
      if (this.current.get(container.shardId) === container) this.current.delete(container.shardId);
      timedOut(new Error('Task timed out after 900.00 seconds (chaos: the invocation froze)'));
    };
    container.invocation++;
    const { timeline, streamName } = this.options;
    if (timeline && streamName) {
      const now = Date.now();
      container.atRisk = event.Records.some((r) => atRisk(r.kinesis.approximateArrivalTimestamp * 1000, now));
    }
    const run = this.invoke(container, event, context);
    try {
      return await Promise.race([run, timeout]);
    } catch (error) {
      if (frozen) {
        // The frozen invocation carries on in the background; its clients go with it.
        const done = run.then((r) => this.options.trace?.(`zombie container ${container.id} finished: ${JSON.stringify(r ?? null)}`),
          (e: unknown) => this.options.trace?.(`zombie container ${container.id} failed: ${(e as Error).message}`))
          .finally(() => { this.zombies.delete(done); container.clients.destroy(); });
        this.zombies.add(done);
      }
      throw error;
    } finally {
      container.freeze = undefined;
    }
  }

  /**
   * Runs `container`'s current invocation and tells the retry ledger how it ended: a fault the
   * engine retries in place may be sent again only later if the invocation ended for another reason.
   */
  private async invoke(container: Container, event: KinesisStreamEvent, context: Context): Promise<KinesisStreamBatchResponse | void> {
    const errors: unknown[] = [];
    container.errors = errors;
    const invocation = { id: container.id, invocation: container.invocation };
    try {
      return await container.handler(event, context);
    } catch (error) {
      errors.push(error);
      throw error;
    } finally {
      if (container.dead) errors.push(new ChaosKill(`chaos: the process was killed (${container.killedBy})`));
      this.options.controller.retries.ended(invocation, errors);
    }
  }

  /** Called by the sink wrapper of a container whose invocation freezes: resolves when it wakes. */
  private sleepUntilNewerCommits(container: Container, batch: SinkBatch): Promise<void> {
    const after = (this.successes.get(container.shardId) ?? 0) + 2;
    // An upsert sink's zombie wakes only once a newer batch wrote one of its keys: else its stale
    // write lands where no newer value is, and a sink with no fence would pass unseen.
    const newer = (): boolean | undefined => this.options.history?.newerWriteOfKeys(batch);
    container.freeze?.();
    return new Promise((resolve, reject) => this.sleepers.push({
      shardId: container.shardId, container, after, ready: () => newer() !== false,
      kill: (why) => {
        container.dead = true;
        container.killedBy = why;
        this.options.trace?.(`zombie container ${container.id} (${batch.partitionId} batch ${batch.batchId}) never wakes: ${why}`);
        reject(new ChaosKill(`chaos: ${why}`));
      },
      wake: () => {
        const challenged = newer();
        if (challenged === true) this.zombieWakes.challenged++;
        if (challenged === false) this.zombieWakes.unchallenged.push(`${batch.partitionId} batch ${batch.batchId}`);
        this.options.trace?.(`zombie container ${container.id} (${batch.partitionId} batch ${batch.batchId}): a newer batch wrote one of its keys: ${String(challenged)}`);
        resolve();
      },
    }));
  }

  /** The event source mapping's afterInvoke hook: lost responses and deaths before the response. */
  readonly hooks: EventSourceMappingHooks = {
    afterInvoke: (event: KinesisStreamEvent, _result: HandlerResult) => {
      const shardId = event.Records[0] ? shardIdOf(event.Records[0]) : '?';
      const fault = this.options.controller.hit('response', () => `${shardId}, ${event.Records.length} records`);
      if (fault?.kind === 'kill-before-response') {
        this.replace(this.containerFor(shardId), 'killed before the response');
        throw new ChaosKill('chaos: the process died before Lambda got the response');
      }
      if (fault?.kind === 'response-lost') throw new Error('chaos: the response was lost');
    },
  };

  destroy(): void {
    for (const c of this.current.values()) c.clients.destroy();
    this.current.clear();
  }

  private checkAlive(container: Container): void {
    if (!container.dead) return;
    this.replace(container, container.killedBy ?? 'killed');
    throw new ChaosKill(`chaos: the process was killed (${container.killedBy})`);
  }

  /** A new container takes over; the dead one's warm state goes with it. */
  private replace(container: Container, reason: string): void {
    container.dead = true;
    container.killedBy ??= reason;
    if (this.current.get(container.shardId) === container) {
      this.crashes++;
      container.clients.destroy();
      // Its state cache goes with it: the next invocation starts in a cold container.
      container.cache.clear();
      this.current.delete(container.shardId);
    }
  }

  private newContainer(shardId: string, clockSkewMs = 0): Container {
    const { definition, config, clientOptions, observability } = this.options;
    const clients = createAwsClients(clientOptions);
    const container: Container = {
      id: ++this.containerCount, shardId, clients, cache: new StateCache(), dead: false, invocation: 0, handler: undefined as unknown as KinesisTriggerHandler,
    };
    instrumentClients(container, clients, {
      controller: this.options.controller, config, ...(this.options.history ? { history: this.options.history } : {}),
      ...(this.options.expired ? { expired: this.options.expired.has } : {}),
      onPlannedThenExpired: (fault, pk, batchId) => this.expirePlanned(container, fault, pk, batchId),
      beforeCommit: (commits) => this.beforeCommit(container, commits),
      ...(this.options.onKept ? { onKept: this.options.onKept } : {}),
      ...(this.options.timeline ? { arrivalMs: (stream: string, shard: string, seq: string, ms: number) => this.options.timeline!.arrivalMs(stream, shard, seq, ms) } : {}),
    });
    const kind = this.options.kind ?? 'source';
    // A cold container compiles the query once; its handler reuses the compiled query.
    const query = compileForDeployment(definition, config);
    // The handler builds the AWS backends (and its reshard guard) as deployed, on this container's
    // clients; only the checkpoint's state cache is this container's own instead of the
    // module-level one (simulated containers share this process, Lambda's do not), and its clock.
    const decorateBackends = (b: PartitionBackends): PartitionBackends => ({
      ...b, checkpoint: new DynamoDbCheckpoint({ ...(b.checkpoint as DynamoDbCheckpoint).options, stateCache: container.cache }),
      ...(clockSkewMs !== 0 ? { clock: { nowMs: () => Date.now() + clockSkewMs } } : {}),
    });
    const create = kind === 'repartition' ? createRepartitionTriggerHandler : createKinesisTriggerHandler;
    (container as { handler: KinesisTriggerHandler }).handler = create(query, {
      config, clients, decorateBackends, decorateSink: (sink) => this.wrapSink(container, sink), observability,
      onInvocation: (shardId: string, result: ShardInvocationResult) => {
        if (result.error) container.errors?.push(result.error);
        this.options.onInvocation?.(shardId, result);
      },
    });
    return container;
  }

  private wrapSink(container: Container, real: Sink): Sink {
    const controller = this.options.controller;
    const sink = this.options.decorateSink ? this.options.decorateSink(real) : real;
    return withWrites(sink, async (batch: SinkBatch) => {
      // Only batches with rows: a zombie writing nothing shows nothing.
      const freeze = batch.rows.length > 0 ? controller.hit('sink-attempt', () => `${batch.partitionId} batch ${batch.batchId}, ${batch.rows.length} rows`) : undefined;
      // A container no Lambda timeout governs (a concurrent duplicate's second one) cannot freeze:
      // the zombie strikes the next sink attempt instead of passing as happened.
      // Likewise at a batch no newer batch will overwrite: its late write could not show a missing fence.
      const postpone = freeze?.kind === 'zombie-wakes-late'
        && (!container.freeze || this.options.zombieChoice?.(batch, controller.counts['sink-attempt']) === false);
      if (postpone) controller.postpone(freeze);
      if (freeze?.kind === 'zombie-wakes-late' && !postpone) {
        await this.sleepUntilNewerCommits(container, batch);
        this.options.trace?.(`zombie container ${container.id} wakes: writes ${batch.partitionId} batch ${batch.batchId}`);
      }
      this.options.history?.attempt(batch);
      await sink.addBatch(batch);
      const fault = controller.hit('sink-write', () => `${batch.partitionId} batch ${batch.batchId}, ${batch.rows.length} rows`);
      if (fault?.kind === 'kill-after-sink-write') killContainer(container, `after the sink wrote ${batch.partitionId} batch ${batch.batchId}`);
    });
  }
}
