/**
 * The chaos harness: does exactly-once hold when Lambda's processes die, requests are throttled
 * and events are delivered twice?
 *
 * One seed fixes the events (hourly sales, with malformed records) and every run's faults. On
 * one set of emulators and one Kinesis stream:
 *
 *   - the reference: the same queries in memory (the engine core over memory backends);
 *   - run 0, fault-free: three queries consume the stream through the real Kinesis handler
 *     under a local event source mapping (bisect on function error, unlimited retries):
 *     hourly sales per store in append mode → S3 files and in update mode → DynamoDB upserts, and
 *     hourly sales per product (update → DynamoDB), whose state is not keyed by the stream's
 *     partition key: it runs with a repartition stage, stage 1 on the source shards routing rows
 *     through an internal stream to stage 2 (a second function, the repartition handler); with
 *     `stages` (default) also a chain of two aggregates (three stages, two internal streams) and
 *     a join of the sales stream with a payments stream, then an aggregate (a source stage per
 *     stream, the join's stage, the aggregate's), every stream read by its own faulted function
 *     (staged-queries.ts). It must agree with the reference, and it counts the fault points;
 *   - runs 1..R, each on fresh tables and S3 prefixes, with faults planned from the seed at those
 *     points (see faults.ts). After the shards are drained, the scheduled handler runs once
 *     (fault-free), then the sinks and the dead letters are read as a consumer would and compared
 *     with run 0: rows lost, duplicated, mismatched. A query whose records expired while skipped
 *     ('skipped-then-expired', expiry.ts) is compared with the in-memory answer without them,
 *     once the harness checked that their loss was reported.
 */
import { isMultiSource, type QueryDefinition } from '../../query/query-definition.js';
import { createAwsClients, type AwsClients } from '../../aws/clients.js';
import { createScheduledTriggerHandler } from '../../aws/scheduled-trigger-handler.js';
import { GetItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { sinkPrefixOf } from '../../aws/aws-backends.js';
import { listKeys } from '../../aws/s3-util.js';
import { ensureTables } from '../../aws/tables.js';
import type { DeadLetterRecord } from '../../sources/dead-letter.js';
import { startEmulators, type EmulatorSet } from '../emulators.js';
import { LocalEventSourceMapping, type BatchFailureInfo, type EventSourceMappingStats } from '../event-source-mapping.js';
import { deliverToOnFailureHandler } from '../on-failure-destination.js';
import { createOnFailureHandler } from '../../aws/on-failure-handler.js';
import { streamNameOfArn } from '../../aws/kinesis-trigger-handler.js';
import { SkippedBatchStore, type SkippedRange } from '../../aws/skipped-batches.js';
import { createStreamAndWait, openShards, reshardStream } from '../kinesis-admin.js';
import { createPrng, generateSalesEvents, pick, DEFAULT_STORES } from '../sample-events.js';
import { hourlySalesPerProductQuery, hourlySalesQuery } from '../dev/default-query.js';
import {
  ensureBucket, localDeployment, localRuntimeConfig, putSampleRecords, quietObservability, readDeadLetterContents, readSinkContents,
} from '../dev/local-stack.js';
import type { ShardInvocationResult } from '../../query/shard-invocation.js';
import type { RuntimeConfig } from '../../runtime/runtime-config.js';
import { compileQuery } from '../../query/compiled-query.js';
import { formatProgressLine } from '../dev/report.js';
import { addDiff, compareDeadLetters, compareRows, emptyDiff, type Diff } from './compare.js';
import { ChaosFunction, ExpiredRecords } from './chaos-function.js';
import { Backlog, STREAM_RETENTION_HOURS } from './retention-timeline.js';
import { ChaosKill, FAULT_POINT, FaultController, type FaultKind, type FaultPoint, type InjectedFault, type PlannedFault, type PointCounts } from './faults.js';
import { expireAndRedrive, type ExpiryOutcome, type OutageRecord } from './expiry.js';
import { SinkHistory, type HistoryFigures } from './history.js';
import { instrumentClients, type ContainerHandle } from './instrument.js';
import type { Sink, SinkBatch } from '../../sinks/sink.js';
import { countingLateRows, subsetsBySize } from './late-rows.js';
import { keyColumnsOf, runInMemory, runMultiSourceInMemory, type PlacedRecord } from './memory-reference.js';
import { chainedAggregatesQuery, generatePayments, joinThenAggregateQuery, withSaleIds } from './staged-queries.js';
import { withWrites } from './sink-wrapper.js';
import { deadLettersBesideLoss, keptOrLost, plannedRangeTrimmed, retentionLoss, runRecordsOf, type RecordedLoss, type RunRecord } from './retention-loss.js';
import { planRunFaults, undivisibleStages } from './run-plan.js';
import { zombieChoiceFrom, type ZombieChoice } from './zombie-choice.js';
import { formatRetryFigures, retriesOf, totalRetries, type FailSafeKind, type RetryFigures } from './retry-ledger.js';

export interface ChaosOptions {
  readonly seed: number;
  readonly runs: number;
  readonly shards?: number;
  readonly batchSize?: number;
  readonly stores?: number;
  readonly hours?: number;
  readonly eventsPerStoreHour?: number;
  /** Faults per query and run beyond one of each kind (default 2). */
  readonly extraFaults?: number;
  readonly print?: (line: string) => void;
  /** Print every injected fault. */
  readonly verbose?: boolean;
  /** Print every committed batch's progress (and the scheduled handler's summary). */
  readonly trace?: boolean;
  /** Late rows put in wave 2, after every shard went idle (default 3). */
  readonly lateRows?: number;
  /** Also run hourly sales per product, which needs a repartition stage (default true). */
  readonly repartition?: boolean;
  /**
   * Also run the queries of several stages (default true): a chain of two aggregates (3 stages)
   * and a join of the sales stream with a payments stream, then an aggregate (4 stages).
   */
  readonly stages?: boolean;
  /**
   * Retries of a failed batch before the event source mapping gives up and sends it to the
   * on-failure destination (default 4; Lambda's maximumRetryAttempts). -1 retries forever.
   */
  readonly maxRetries?: number;
  /** Records that crash the function every time they are in an event (default 2). */
  readonly poisonRecords?: number;
  /** Inject faults into the scheduled function too (default true). */
  readonly scheduledFaults?: boolean;
  /** Also plan 'reshard-mid-run' (split or merge the stream a function reads, mid-run; default false). */
  readonly reshard?: boolean;
  /**
   * Plan 'planned-then-expired' under the simulated retention timeline (retention-timeline.ts; a
   * planned batch's records expire before it re-runs; default false until the runs pass).
   */
  readonly expirePlanned?: boolean;
  /** Test hook: changes the sink every function of a run writes through (e.g. a sink that writes twice); run 0 is fault-free. */
  readonly decorateSink?: (sink: Sink, run: number) => Sink;
  /** Test hook: changes each run's fault plans before the run (e.g. a fault that cannot happen). */
  readonly alterPlan?: (run: number, fn: string, plan: PlannedFault[]) => PlannedFault[];
}

export interface QueryOutcome {
  readonly query: string;
  readonly sink: string;
  readonly rows: number;
  readonly diff: Diff;
  /** Late rows of wave 2 its answer counted (a shard held the watermark back after an outage, late-rows.ts). */
  readonly lateRowsCounted: number;
  /** Its Lambda functions: the source stream's, and with a repartition stage `<query>/stage-2`. */
  readonly functions: readonly string[];
  /** Zombies of an upsert sink woken after a newer batch wrote one of their keys; those woken with none (function, batch). */
  readonly zombies: { readonly challenged: number; readonly unchallenged: readonly string[] };
  readonly injected: readonly (InjectedFault & { readonly fn: string })[];
  /** With how often this run met the fault's point, and the fault-free run (which the plan drew from; for a scheduled function, what its ticks are sure to meet). */
  readonly missed: readonly (PlannedFault & { readonly fn: string; readonly met: number; readonly faultFree: number })[];
  readonly stats: EventSourceMappingStats;
  /** Simulated process deaths (each invocation after one starts in a cold container). */
  readonly processesKilled: number;
  readonly history: HistoryFigures & {
    /** What the history and the on-failure destination showed (also counted in `diff`). */
    readonly diff: Diff;
  };
  /**
   * Poison records the on-failure destination got (of those planned), and other records it got;
   * of the poison records, those in a skipped range the on-failure handler recorded, and how many ranges it recorded.
   */
  readonly poison: {
    readonly planned: number; readonly deadLettered: number; readonly others: number; readonly recordedAsSkipped: number; readonly skippedRanges: number;
  };
  /** 'skipped-then-expired': skipped ranges that expired, records the re-drive reported expired, records really lost (never committed). */
  readonly expired: {
    readonly ranges: number; readonly reported: number; readonly lost: number; readonly recordedByEngine: number;
    /** Batches with a kept copy; planned batches a trim struck; frozen attempts a trim killed (retention-timeline.ts). */
    readonly kept: number; readonly trimmedBatches: number; readonly zombiesTimedOut: number;
  };
  /** The fail-safe faults: how each was sent again, and those whose defence did not act (retry-ledger.ts). */
  readonly retries: {
    readonly figures: Partial<Record<FailSafeKind, RetryFigures>>; readonly broken: readonly string[];
    /** Faults the engine retries in place sent again only later, their invocation having ended for another reason first. */
    readonly excused: readonly string[];
  };
}

export interface RunOutcome {
  readonly run: number;
  readonly seconds: number;
  readonly queries: readonly QueryOutcome[];
  readonly lost: number;
  readonly duplicated: number;
  readonly mismatched: number;
  /** Planned faults that never happened: the run did not test what it claims. */
  readonly missed: number;
  /** Fail-safe faults never sent again, or not in place where the engine retries in place. */
  readonly defences: number;
}

export interface ChaosReport {
  readonly seed: number;
  readonly runs: readonly RunOutcome[];
  readonly lost: number;
  readonly duplicated: number;
  readonly mismatched: number;
  readonly faultsInjected: number;
  readonly faultsByKind: Readonly<Partial<Record<FaultKind, number>>>;
  readonly faultsPlannedByKind: Readonly<Partial<Record<FaultKind, number>>>;
  readonly missed: number;
  /** Whether the harness found nothing wrong (no loss, duplicate, mismatch or missed fault; memory agrees). */
  readonly ok: boolean;
  /** The fault-free emulator run against the in-memory engine. */
  readonly memory: { readonly matches: boolean; readonly diff: Diff; readonly rows: Record<string, number> };
  readonly records: number;
  /** Records lost to retention after a skip, and reported as such (not counted in `lost`: see expiry.ts). */
  readonly lostToRetention: number;
  readonly summaryLine: string;
}

/** One Lambda function of a query: the source stream's, or the internal stream's (stage 2). */
interface FunctionRun {
  readonly id: string;
  readonly controller: FaultController;
  readonly stats: EventSourceMappingStats;
  readonly processesKilled: number;
  /**
   * The scheduled function only: the points every one of its ticks is sure to meet (each point's
   * fewest occurrences in one successful attempt, times the number of ticks the run asks for).
   */
  readonly certain?: PointCounts;
  /** Its zombies of an upsert sink: woken after a newer write of one of their keys, or without one. */
  readonly zombieWakes?: { readonly challenged: number; readonly unchallenged: readonly string[] };
}

interface QueryRun {
  readonly rows: Record<string, unknown>[];
  readonly deadLetters: DeadLetterRecord[];
  readonly functions: readonly FunctionRun[];
  readonly history: SinkHistory;
  readonly committed: ReadonlySet<string>;
  /** Payloads (UTF-8) of the records the on-failure destination got. */
  readonly discarded: string[];
  /** The batches the event source mappings gave up on, and the skipped ranges the on-failure handler recorded. */
  readonly gaveUp: readonly GaveUp[];
  readonly recordedSkips: readonly SkippedRange[];
  /** 'skipped-then-expired': what expired, what the status and the re-drive said. */
  readonly expiry: ExpiryOutcome;
  /** Every record it lost to retention (recorded by its engine or reported by its re-drive), checked against what expired. */
  readonly retention: RecordedLoss;
  /** S3 sinks: every key under the sink's prefix at the end (the history must have seen each). */
  readonly listed: readonly string[];
  /** Batches the engine kept a copy of, and planned batches a 'planned-then-expired' trim struck (`<partition>#<batch id>`). */
  readonly kept: ReadonlySet<string>;
  readonly trimmed: readonly string[];
  /** Frozen attempts a trim of records they read while not at risk killed (never woke). */
  readonly zombiesTimedOut: readonly string[];
}

interface GaveUp {
  readonly streamName: string;
  readonly shardId: string;
  readonly first: string;
  readonly last: string;
  readonly payloads: readonly string[];
  readonly records: readonly { readonly sequenceNumber: string; readonly data: string }[];
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const print = options.print ?? ((line: string) => process.stdout.write(`${line}\n`));
  const shards = options.shards ?? 2;
  const batchSize = options.batchSize ?? 10;
  const seed = options.seed;
  const storeNames = [...DEFAULT_STORES, 'harbor', 'airport', 'mall', 'station', 'campus'].slice(0, options.stores ?? 6);
  const staged = options.stages !== false;
  const generated = generateSalesEvents({
    seed, stores: storeNames, hours: options.hours ?? 4, eventsPerStoreHour: options.eventsPerStoreHour ?? 4, lateRows: options.lateRows ?? 3, malformed: 2,
  });
  // The join needs a key in each sale; the other queries ignore it.
  const records = staged ? withSaleIds(generated) : generated;
  // The second stream of the join: payments of the sales of wave 1.
  const payments = staged ? generatePayments(records, seed) : [];
  const queries: QueryDefinition[] = [
    hourlySalesQuery('append', 'chaos-archive'),
    hourlySalesQuery('update', 'chaos-live'),
    ...(options.repartition === false ? [] : [hourlySalesPerProductQuery('chaos-per-product')]),
    ...(staged ? [chainedAggregatesQuery('chaos-chain'), joinThenAggregateQuery('chaos-join')] : []),
  ];
  /** Hops per query on these shards: one internal stream each. */
  const compiled = queries.map((q) => compileQuery(q, { expectedShardCount: shards, allowRepartition: true }));
  const hopsOf = new Map(compiled.map((q) => [q.name, q.hops.length]));
  /** Internal streams whose stage cannot be divided: a split there is refused by design, not planned. */
  const noReshard = new Set(compiled.flatMap(undivisibleStages));
  const keyColumns = new Map(queries.map((q) => [q.name, keyColumnsOf(q)]));
  const maxRetries = options.maxRetries ?? 4;
  // Poison records: on-time events of wave 1 with a payload no other record has, from the seed.
  const poisonRnd = createPrng(seed * 31 + 17);
  const unique = records.filter((r) => r.kind === 'event' && r.wave === 1 && records.filter((o) => o.data === r.data).length === 1);
  const poison = new Set<string>();
  while (poison.size < Math.min(options.poisonRecords ?? 2, unique.length)) poison.add(pick(poisonRnd, unique).data);

  let emulators: EmulatorSet | undefined;
  let clients: AwsClients | undefined;
  try {
    const t0 = Date.now();
    emulators = await startEmulators();
    clients = createAwsClients(emulators.clientOptions);
    const base = localDeployment(`chaos-${seed}-${Date.now().toString(36)}`);
    await Promise.all([ensureBucket(clients.s3, base.sinkBucket), ensureBucket(clients.s3, base.deadLetterBucket)]);
    print(`chaos: seed ${seed}, ${records.length} records (${records.filter((r) => r.kind === 'malformed').length} malformed, ${poison.size} poison, `
      + `${records.filter((r) => r.kind === 'late').length} late in wave 2)${payments.length > 0 ? ` and ${payments.length} payments` : ''} on ${shards} shards per stream, `
      + `batch size ${batchSize}, ${maxRetries < 0 ? 'unlimited' : maxRetries} retries; queries ${queries.map((q) => `${q.name} (${q.outputMode} → ${q.sink.kind}${
        hopsOf.get(q.name)! > 0 ? `, ${hopsOf.get(q.name)! + 1} stages` : ''}${isMultiSource(q) ? `, ${Object.keys(q.sources).length} source streams` : ''})`).join(', ')}; `
      + `emulators ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

    const observability = quietObservability('chaos', (message, error) => {
      if (options.trace) print(`      handler: ${message}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
    });
    const trace = (line: string): void => { if (options.trace) print(`      +${((Date.now() - t0) / 1000).toFixed(1)}s ${line}`); };

    /** Per function of an upsert sink, where its zombies freeze (from the fault-free run; zombie-choice.ts). */
    const zombieChoices = new Map<string, ZombieChoice>();
    /** One run: a fresh stream, tables and prefixes; both queries under their fault plans. */
    const runOnce = async (run: number, plans: ReadonlyMap<string, PlannedFault[]>): Promise<{ queries: Map<string, QueryRun>; placed: PlacedRecord[]; placedPayments: PlacedRecord[] }> => {
      const d = {
        ...base, streamName: `${base.streamName}-r${run}`,
        checkpointTable: `${base.checkpointTable}-r${run}`, stateTable: `${base.stateTable}-r${run}`, sinkTable: `${base.sinkTable}-r${run}`,
      };
      const paymentsStream = `${d.streamName}-payments`;
      await Promise.all([
        createStreamAndWait(clients!.kinesis, d.streamName, shards),
        payments.length > 0 ? createStreamAndWait(clients!.kinesis, paymentsStream, shards) : undefined,
        ensureTables(clients!.dynamodb, { checkpointTable: d.checkpointTable, stateTable: d.stateTable, maxWaitSeconds: 60 }),
      ]);
      const wave1 = records.filter((r) => r.wave === 1);
      const put = await putSampleRecords(clients!, d.streamName, wave1);
      const placed: PlacedRecord[] = wave1.map((r, i) => ({ ...put[i]!, partitionKey: r.partitionKey, data: r.data }));
      const putPayments = await putSampleRecords(clients!, paymentsStream, payments);
      const placedPayments: PlacedRecord[] = payments.map((r, i) => ({ ...putPayments[i]!, partitionKey: r.partitionKey, data: r.data }));
      const rnd = createPrng(seed * 7919 + run);
      const expired = new ExpiredRecords();
      // The simulated retention (retention-timeline.ts): half of each shard's first wave is an old backlog, at risk.
      const timeline = options.expirePlanned === true
        ? new Backlog().mark(d.streamName, placed).mark(paymentsStream, placedPayments)
        : undefined;
      const parts = await Promise.all(queries.map(async (definition) => {
        const hops = hopsOf.get(definition.name)!;
        // One internal stream per hop (the first keeps the name it had with one hop).
        const internalStreams = Array.from({ length: hops }, (_, k) => `${d.streamName}-${definition.name}-internal${k === 0 ? '' : `-${k + 1}`}`);
        const sourceStreams: Record<string, string> = isMultiSource(definition)
          ? Object.fromEntries(Object.keys(definition.sources).map((name) => [name, name === 'payments' ? paymentsStream : d.streamName]))
          : {};
        const config: RuntimeConfig = {
          ...localRuntimeConfig(
            {
              ...d, sinkTable: `${d.sinkTable}-${definition.name}`,
              sinkPrefix: `run-${run}/${definition.name}/`, deadLetterPrefix: `run-${run}/dead-letter/${definition.name}/`,
            },
            { shards, idleShardTimeoutMs: 0, snapshotEveryBatches: 3 },
          ),
          ...(hops > 0 ? { repartitionStreamName: internalStreams[0]! } : {}),
          ...(hops > 1 ? { repartitionStreamNames: internalStreams } : {}),
          ...(isMultiSource(definition) ? { sourceStreams } : {}),
          // The retention the harness simulates, so the engine keeps what the harness may trim (retention-timeline.ts).
          ...(timeline ? { streamRetentionHours: STREAM_RETENTION_HOURS } : {}),
        };
        const history = new SinkHistory(keyColumns.get(definition.name)!, definition.sink.kind === 'dynamodb' ? '' : sinkPrefixOf(definition, config));
        const discarded: string[] = [];
        const gaveUp: GaveUp[] = [];
        /** Batches the engine kept a copy of (`<partition>#<batch id>`, retention-loss.ts keptOrLost). */
        const kept = new Set<string>();
        const onKept = (partitionId: string, batchId: number): void => { kept.add(`${partitionId}#${batchId}`); };
        // The deployed on-failure function: records each skipped range in the checkpoint table.
        const onFailureHandler = createOnFailureHandler(definition, { config, clientOptions: emulators!.clientOptions, observability });
        const onFailure = async (info: BatchFailureInfo): Promise<void> => {
          const payloads = info.records.map((r) => Buffer.from(r.kinesis.data, 'base64').toString('utf8'));
          discarded.push(...payloads);
          gaveUp.push({
            streamName: streamNameOfArn(info.streamArn), shardId: info.shardId, first: info.startSequenceNumber, last: info.endSequenceNumber, payloads,
            records: info.records.map((r, i) => ({ sequenceNumber: r.kinesis.sequenceNumber, data: payloads[i]! })),
          });
          await deliverToOnFailureHandler(onFailureHandler, info);
          trace(`r${run} ${definition.name} gave up on ${info.shardId} ${info.startSequenceNumber.slice(-6)}..${info.endSequenceNumber.slice(-6)} (${info.batchSize} records): ${info.reason}`);
        };
        await Promise.all([
          // Each query has its own sink table, as each deployment has.
          definition.sink.kind === 'dynamodb' ? ensureTables(clients!.dynamodb, { checkpointTable: d.checkpointTable, stateTable: d.stateTable, sinkTable: config.sinkTable, maxWaitSeconds: 60 }) : undefined,
          ...internalStreams.map((name) => createStreamAndWait(clients!.kinesis, name, shards)),
        ]);
        const onInvocation = (shardId: string, result: ShardInvocationResult): void => {
          const where = result.stage.label(shardId);
          for (const p of result.progress) trace(`r${run} ${definition.name} ${formatProgressLine(where, p)}`);
          if (result.error) trace(`r${run} ${definition.name} [${where}] error: ${result.error.message.split('\n')[0]}`);
        };
        // The source stream's function (one per source stream: its own mapping, containers and
        // faults), and per hop the function of the stage reading that internal stream.
        const functions = [
          ...(isMultiSource(definition)
            ? Object.entries(sourceStreams).map(([source, streamName]) => ({ id: `${definition.name}/${source}`, kind: 'source' as const, streamName }))
            : [{ id: definition.name, kind: 'source' as const, streamName: d.streamName }]),
          ...internalStreams.map((streamName, k) => ({ id: `${definition.name}/stage-${k + 2}`, kind: 'repartition' as const, streamName })),
        ].map((f) => {
          const controller = new FaultController(plans.get(f.id) ?? [], rnd);
          // A split while the stream has its first shard count or fewer open shards, else a merge.
          const reshard = async (): Promise<string> => {
            const open = (await openShards(clients!.kinesis, f.streamName)).length;
            const step = open <= shards ? { split: 'first-open' as const } : { merge: 'first-adjacent' as const };
            const created = await reshardStream(clients!.kinesis, f.streamName, [step], { timeoutMs: 60_000 });
            return `${'split' in step ? 'split' : 'merge'} of ${f.streamName} → ${created.flat().join(', ')}`;
          };
          const fn = new ChaosFunction({
            definition, kind: f.kind, config, clientOptions: emulators!.clientOptions, controller, observability, onInvocation, reshard, streamName: f.streamName, expired,
            trace: (line) => trace(`r${run} ${f.id} ${line}`), history, poison, ...(timeline ? { timeline } : {}), onKept,
            ...(zombieChoices.has(f.id) ? { zombieChoice: zombieChoices.get(f.id)! } : {}),
            ...(options.decorateSink ? { decorateSink: (sink: Sink) => options.decorateSink!(sink, run) } : {}),
          });
          const esm = new LocalEventSourceMapping({
            kinesis: clients!.kinesis, streamName: f.streamName, handler: fn.handler, hooks: fn.hooks, batchSize,
            bisectBatchOnFunctionError: true, maximumRetryAttempts: maxRetries, onFailure, pollIntervalMs: 25, shardDiscoveryIntervalMs: 200, retryBackoffMs: 5,
            functionName: f.id.replace(/[^A-Za-z0-9-]/g, '-'),
          });
          return { ...f, controller, fn, esm };
        });
        // The scheduled function, under its own fault plan: each attempt in a fresh container (a
        // kill leaves the rest of that attempt failing); EventBridge's next tick is the retry.
        const scheduledId = `${definition.name}/scheduled`;
        // Planned only where every tick is sure to pass (run-plan.ts), with any number of hops.
        const scheduledFaulted = options.scheduledFaults !== false;
        const scheduledController = new FaultController(scheduledFaulted ? plans.get(scheduledId) ?? [] : [], rnd);
        let scheduledContainers = 0;
        // What each tick meets for sure: its fewest occurrences of each point in one successful
        // attempt (an idle tick's checkpoint reads, ListShards), and how many ticks the run asks for.
        // An idle attempt (no batch run) is the least a tick does; a busy one only if none was idle.
        const tickFloor: PointCounts = {};
        const busyFloor: PointCounts = {};
        let ticks = 0;
        const decorate = (sink: Sink): Sink => recordingSink(options.decorateSink ? options.decorateSink(sink, run) : sink, history);
        const tick = async (): Promise<void> => {
          ticks++;
          for (let attempt = 1; ; attempt++) {
            const before = { ...scheduledController.counts };
            const container: ContainerHandle = { id: ++scheduledContainers, dead: false };
            const own = createAwsClients(emulators!.clientOptions);
            instrumentClients(container, own, {
              controller: scheduledController, config, history, expired: expired.has, onKept,
              // A tick that runs a planned batch is a retry of it too (a deferred trim strikes there as well).
              beforeCommit: (commits) => { for (const f of functions) f.fn.beforeCommit(container, commits); },
              ...(timeline ? { arrivalMs: (stream: string, shard: string, seq: string, ms: number) => timeline.arrivalMs(stream, shard, seq, ms) } : {}),
            });
            const scheduled = createScheduledTriggerHandler(definition, { config, clients: own, observability, onInvocation, decorateSink: decorate });
            let failure: string | undefined;
            let idle = false;
            try {
              const summary = await scheduled({ mode: 'tick' });
              idle = summary.shards.every((x) => x.batches === 0);
              trace(`r${run} ${definition.name} tick: ${summary.shards.map((x) => `${x.stage} ${x.shardId} ${x.caughtUp ? 'idle' : 'busy'} ${x.batches} batches${x.error ? ` error ${x.error}` : ''}`).join('; ')}`);
              failure = summary.shards.map((x) => x.error).filter(Boolean).join('; ') || undefined;
            } catch (error) {
              if (!(error instanceof ChaosKill) && !(error instanceof Error)) throw error;
              failure = error.message;
            } finally {
              own.destroy();
            }
            if (failure === undefined && !container.dead) {
              for (const point of Object.keys(before) as FaultPoint[]) {
                const met = scheduledController.counts[point] - before[point];
                const floor = idle ? tickFloor : busyFloor;
                floor[point] = Math.min(floor[point] ?? met, met);
              }
              return;
            }
            trace(`r${run} ${definition.name} tick ${attempt} failed: ${failure ?? container.killedBy}`);
            // EventBridge invokes it again every minute; the cap only stops a tick that can never
            // succeed. Each planned fault fails at most the attempt it strikes (the next runs in a
            // new container); a tick meeting fewer points (fewer no-data batches) or more of them
            // (reshards: more shards, seeding) meets its planned faults over more attempts.
            if (attempt >= 16 + scheduledController.plan.length) {
              throw new Error(`the scheduled handler of ${definition.name} keeps failing: ${failure ?? container.killedBy}`);
            }
          }
        };
        const certain = (): PointCounts => Object.fromEntries(Object.entries(Object.keys(tickFloor).length > 0 ? tickFloor : busyFloor)
          .map(([point, n]) => [point, (n ?? 0) * ticks]));
        return { definition, config, functions, tick, history, discarded, gaveUp, scheduledController, certain, kept };
      }));
      const mappings = parts.flatMap((p) => p.functions.map((f) => f.esm));
      const drain = async (): Promise<void> => {
        // Stage 1 feeds stage 2: drain until a whole round invoked nothing.
        for (let invoked = -1; ;) {
          await Promise.all(mappings.map((m) => m.drain({ idleMs: 300, timeoutMs: 300_000 })));
          const now = mappings.reduce((n, m) => n + m.stats.invocations, 0);
          if (now === invoked) return;
          invoked = now;
        }
      };
      // Everything the scheduled handler does once the shards are drained (stage 1 of a
      // repartitioned query may send more to stage 2, which is drained again).
      const settle = async (): Promise<void> => {
        await drain();
        // Frozen invocations wake now at the latest (most woke once newer batches committed).
        await Promise.all(parts.flatMap((p) => p.functions.map((f) => f.fn.wakeZombies())));
        await drain();
        for (const p of parts) await p.tick();
        await drain();
      };
      try {
        await Promise.all(mappings.map((m) => m.start()));
        await settle();
        // Wave 2, once every shard is idle: late rows (dropped by the watermark, whichever batch
        // and re-run they land in) and a few on-time ones.
        const wave2 = records.filter((r) => r.wave === 2);
        if (wave2.length > 0) {
          const put2 = await putSampleRecords(clients!, d.streamName, wave2);
          wave2.forEach((r, i) => placed.push({ ...put2[i]!, partitionKey: r.partitionKey, data: r.data }));
          await settle();
        }
        for (const p of parts) await p.tick();
        // Skipped ranges of an outage ('skipped-then-expired'): retention passes them, then the re-drive.
        const expiries = new Map<string, ExpiryOutcome>();
        for (const p of parts) {
          const outage: OutageRecord[] = p.functions.flatMap((f) => [...f.fn.outage.values()].map((o) => ({ ...o, streamName: f.streamName })));
          expiries.set(p.definition.name, await expireAndRedrive({
            clients: clients!, clientOptions: emulators!.clientOptions, deployment: { ...p.config, sluiceQuery: p.definition.name }, outage, gaveUp: p.gaveUp, poison,
          }));
        }
        // Nothing was put back; if something was, it is processed and shows in the comparison.
        await drain();
        const out = new Map<string, QueryRun>();
        const runRecords = runRecordsOf([{ source: 'sales', streamName: d.streamName, placed }, { source: 'payments', streamName: paymentsStream, placed: placedPayments }]);
        for (const p of parts) {
          const recordedSkips = await new SkippedBatchStore({ client: clients!.dynamodb, checkpointTable: d.checkpointTable, queryName: p.definition.name }).list();
          const expiry = expiries.get(p.definition.name)!;
          const [contents, deadLetters] = await Promise.all([readSinkContents(clients!, p.definition, p.config), readDeadLetterContents(clients!, p.config)]);
          const listed = p.definition.sink.kind === 'dynamodb' ? [] : await listKeys(clients!.s3, p.config.sinkBucket!, p.history.sinkPrefix);
          out.set(p.definition.name, {
            rows: contents.rows, deadLetters, listed, history: p.history, discarded: p.discarded, gaveUp: p.gaveUp, expiry, recordedSkips,
            retention: retentionLoss({ recorded: recordedSkips, records: runRecords, expired: expired.has, redriveLost: expiry.lostRecords }),
            kept: p.kept,
            trimmed: await struckBatches(clients!, d.checkpointTable, p.functions.map((f) => ({ streamName: f.streamName, trimmed: f.fn.trimmedBatches })), expired.has),
            zombiesTimedOut: p.functions.flatMap((f) => f.fn.zombiesTimedOut.map((z) => `${f.id} ${z}`)),
            committed: await committedBatches(clients!, d.checkpointTable, p.definition.name, hopsOf.get(p.definition.name)!),
            functions: [
              ...p.functions.map((f) => ({ id: f.id, controller: f.controller, stats: f.esm.stats, processesKilled: f.fn.processesKilled, zombieWakes: f.fn.zombieWakes })),
              { id: `${p.definition.name}/scheduled`, controller: p.scheduledController, stats: sumStats([]), processesKilled: 0, certain: p.certain() },
            ],
          });
        }
        return { queries: out, placed, placedPayments };
      } finally {
        await Promise.allSettled(mappings.map((m) => m.stop()));
        await Promise.allSettled(parts.flatMap((p) => p.functions.map((f) => f.fn.wakeZombies())));
        for (const p of parts) for (const f of p.functions) f.fn.destroy();
      }
    };

    // Run 0: fault-free.
    const t1 = Date.now();
    const { queries: baseline, placed, placedPayments } = await runOnce(0, new Map());

    // The reference: the same records, in the order they were put, through the engine in memory.
    const reference = new Map<string, { rows: Record<string, unknown>[]; deadLetters: DeadLetterRecord[] }>();
    // Poison records never reach a sink: they end in the on-failure destination.
    const clean = placed.filter((r) => !poison.has(r.data));
    const wave1Count = records.filter((r) => r.wave === 1).length;
    for (const q of queries) {
      reference.set(q.name, isMultiSource(q)
        // Several streams: each wave of both streams at once (the join's answer does not depend on batches).
        ? await runMultiSourceInMemory(q, [{ sales: placed.slice(0, wave1Count).filter((r) => !poison.has(r.data)), payments: placedPayments }, { sales: placed.slice(wave1Count) }])
        : await runInMemory(q, clean, { batchSize, waveStarts: [placed.slice(0, wave1Count).filter((r) => !poison.has(r.data)).length] }));
    }
    const memoryDiff = emptyDiff();
    const memoryRows: Record<string, number> = {};
    for (const q of queries) {
      const b = baseline.get(q.name)!;
      const r = reference.get(q.name)!;
      memoryRows[q.name] = r.rows.length;
      addDiff(memoryDiff, compareRows(r.rows, b.rows, keyColumns.get(q.name)!));
      addDiff(memoryDiff, compareDeadLetters(r.deadLetters, b.deadLetters, { ignoreShard: true }));
      // The fault-free run's own history and on-failure destination too.
      addDiff(memoryDiff, (await judgeRun(b, poison)).diff);
    }
    const memoryMatches = memoryDiff.lost + memoryDiff.duplicated + memoryDiff.mismatched === 0;
    print(`run 0 (fault-free, ${((Date.now() - t1) / 1000).toFixed(1)} s): ${queries.map((q) => {
      const b = baseline.get(q.name)!;
      return `${q.name} ${b.rows.length} rows, ${b.deadLetters.length} dead letters, ${b.functions.reduce((n, f) => n + f.stats.invocations, 0)} invocations`;
    }).join('; ')}`);
    print(`in-memory engine vs fault-free emulator run: ${memoryMatches ? 'same final answer' : 'DIFFERENT'} `
      + `(${queries.map((q) => `${q.name} ${memoryRows[q.name]} rows`).join(', ')}; lost=${memoryDiff.lost} duplicated=${memoryDiff.duplicated} mismatched=${memoryDiff.mismatched})`);
    for (const e of memoryDiff.examples) print(`  ${e}`);
    if (baseline.get(queries[0]!.name)!.rows.length === 0) throw new Error('the fault-free run wrote no rows: nothing to compare');

    // Fault points per function, as the fault-free run met them.
    const counts = new Map<string, Partial<Record<FaultPoint, number>>>(
      [...baseline.values()].flatMap((b) => b.functions.map((f) => [f.id, { ...f.controller.counts }] as const)),
    );
    // The scheduled functions' points every tick meets, whatever the stages' own invocations did.
    const certainCounts = new Map<string, PointCounts>(
      [...baseline.values()].flatMap((b) => b.functions.flatMap((f) => f.certain ? [[f.id, f.certain] as const] : [])),
    );
    for (const b of baseline.values()) {
      for (const f of b.functions) {
        const choice = zombieChoiceFrom(b.history, f.controller.counts['sink-attempt']);
        if (choice) zombieChoices.set(f.id, choice);
      }
    }
    /**
     * The in-memory answer without the `lost` records (by their places in put order, the same in
     * every run), and the fault-free run's dead letters without theirs (see deadLettersBesideLoss).
     */
    const expectedWithout = async (q: QueryDefinition, lost: readonly RunRecord[], countedLate: ReadonlySet<number> = new Set())
      : Promise<{ rows: Record<string, unknown>[]; deadLetters: DeadLetterRecord[] }> => {
      const gone = (source: string): Set<number> => new Set(lost.filter((r) => r.source === source).map((r) => r.index));
      const sales = gone('sales');
      const paid = gone('payments');
      const keep = (list: readonly PlacedRecord[], from = 0): PlacedRecord[] => list.filter((r, i) => !sales.has(from + i) && !poison.has(r.data));
      const rows = isMultiSource(q)
        ? (await runMultiSourceInMemory(q, [
          { sales: keep(placed.slice(0, wave1Count)), payments: placedPayments.filter((_, i) => !paid.has(i)) },
          { sales: keep(placed.slice(wave1Count), wave1Count) },
        ])).rows
        : await (async () => {
          const counted = new Set([...countedLate].map((i) => placed[i]!));
          const input = countingLateRows(keep(placed.slice(0, wave1Count)), keep(placed.slice(wave1Count), wave1Count), (r) => counted.has(r));
          return (await runInMemory(q, input.records, { batchSize, waveStarts: [input.waveStart] })).rows;
        })();
      const lostInRun0 = lost.map((r) => (r.source === 'payments' ? placedPayments : placed)[r.index]!);
      return { rows, deadLetters: deadLettersBesideLoss(baseline.get(q.name)!.deadLetters, lostInRun0) };
    };
    /** The late rows of wave 2, by their places in put order. */
    const lateRows = records.filter((r) => r.wave === 2).flatMap((r, j) => (r.kind === 'late' ? [wave1Count + j] : []));
    const outcomes: RunOutcome[] = [];
    const byKind: Partial<Record<FaultKind, number>> = {};
    const plannedByKind: Partial<Record<FaultKind, number>> = {};
    for (let run = 1; run <= options.runs; run++) {
      const plans = new Map([...planRunFaults({
        seed, run, counts, certainCounts, extraFaults: options.extraFaults ?? 2, reshard: options.reshard === true, expirePlanned: options.expirePlanned === true, noReshard,
      })].map(([id, plan]) => [id, options.alterPlan ? options.alterPlan(run, id, plan) : plan] as const));
      const started = Date.now();
      const result = (await runOnce(run, plans)).queries;
      const qs: QueryOutcome[] = await Promise.all(queries.map(async (q) => {
        const got = result.get(q.name)!;
        // Records lost to retention (reported, see expiry.ts and retention-loss.ts): the answer without them.
        const lost = got.retention.lost;
        let want = lost.length === 0 ? baseline.get(q.name)! : await expectedWithout(q, lost);
        let rowsDiff = compareRows(want.rows, got.rows, keyColumns.get(q.name)!);
        // After an outage a shard may hold the watermark back, so late rows may be counted (late-rows.ts).
        let lateRowsCounted = 0;
        if (!isMultiSource(q) && got.gaveUp.length > 0 && rowsDiff.lost + rowsDiff.duplicated + rowsDiff.mismatched > 0) {
          for (const counted of subsetsBySize(lateRows).slice(1)) {
            const alt = await expectedWithout(q, lost, new Set(counted));
            const altDiff = compareRows(alt.rows, got.rows, keyColumns.get(q.name)!);
            if (altDiff.lost + altDiff.duplicated + altDiff.mismatched === 0) { want = alt; rowsDiff = altDiff; lateRowsCounted = counted.length; break; }
          }
        }
        const diff = addDiff(rowsDiff, compareDeadLetters(want.deadLetters, deadLettersBesideLoss(got.deadLetters, lost)));
        const judged = await judgeRun(got, poison);
        addDiff(diff, { ...judged.diff, examples: [...judged.diff.examples] });
        addDiff(diff, got.expiry.diff);
        addDiff(diff, got.retention.diff);
        // Every trimmed planned batch kept or recorded lost, never both (the kept-records contract).
        addDiff(diff, keptOrLost({ trimmed: got.trimmed, kept: got.kept, lossy: got.retention.lossyBatches }));
        // UnprocessedItems dropped: a purge that silently leaves items behind.
        const neverResent = got.functions.flatMap((f) => f.controller.neverResent);
        if (neverResent.length > 0) addDiff(diff, { lost: 0, duplicated: 0, mismatched: neverResent.length, examples: [`never sent again: ${neverResent[0]}`] });
        const injected = got.functions.flatMap((f) => f.controller.injected.map((i) => ({ ...i, fn: f.id })));
        const missed = got.functions.flatMap((f) => f.controller.missed.map((m) => ({
          ...m, fn: f.id, met: f.controller.counts[FAULT_POINT[m.kind]], faultFree: (certainCounts.get(f.id) ?? counts.get(f.id))?.[FAULT_POINT[m.kind]] ?? 0,
        })));
        for (const f of injected) byKind[f.kind] = (byKind[f.kind] ?? 0) + 1;
        for (const f of [...injected, ...missed]) plannedByKind[f.kind] = (plannedByKind[f.kind] ?? 0) + 1;
        return {
          query: q.name, sink: q.sink.kind, rows: got.rows.length, diff, lateRowsCounted, injected, missed,
          stats: sumStats(got.functions.map((f) => f.stats)),
          processesKilled: got.functions.reduce((n, f) => n + f.processesKilled, 0),
          functions: got.functions.map((f) => f.id),
          zombies: {
            challenged: got.functions.reduce((n, f) => n + (f.zombieWakes?.challenged ?? 0), 0),
            unchallenged: got.functions.flatMap((f) => (f.zombieWakes?.unchallenged ?? []).map((z) => `${f.id} ${z}`)),
          },
          history: { ...got.history.figures(got.committed), diff: judged.diff }, poison: judged.poison,
          expired: {
            ranges: got.expiry.ranges, reported: got.expiry.reportedExpired, lost: lost.length, recordedByEngine: got.retention.recorded,
            kept: got.kept.size, trimmedBatches: got.trimmed.length, zombiesTimedOut: got.zombiesTimedOut.length,
          },
          retries: retriesOf(got.functions.map((f) => ({ id: f.id, ledger: f.controller.retries }))),
        };
      }));
      const outcome: RunOutcome = {
        run, seconds: (Date.now() - started) / 1000, queries: qs,
        lost: qs.reduce((n, q) => n + q.diff.lost, 0),
        duplicated: qs.reduce((n, q) => n + q.diff.duplicated, 0),
        mismatched: qs.reduce((n, q) => n + q.diff.mismatched, 0),
        missed: qs.reduce((n, q) => n + q.missed.length, 0),
        defences: qs.reduce((n, q) => n + q.retries.broken.length, 0),
      };
      outcomes.push(outcome);
      print(formatRun(outcome, options.runs));
      for (const q of qs) {
        for (const e of q.diff.examples) print(`    ${q.query}: ${e}`);
        // A planned fault that never happened is a failure of the run: always shown.
        for (const f of q.missed) {
          print(`    ${f.fn}: planned ${f.kind} @${f.at} never happened (this run met ${FAULT_POINT[f.kind]} ${f.met} times, the fault-free run ${f.faultFree})`);
        }
        // A zombie whose keys no newer batch wrote cannot show a missing sink fence: said, not hidden.
        if (q.zombies.unchallenged.length > 0) {
          print(`    ${q.query}: ${q.zombies.unchallenged.length} zombie(s) woke with no newer write of their keys (a missing sink fence could not show): ${q.zombies.unchallenged.join('; ')}`);
        }
        if (options.verbose && q.zombies.challenged > 0) print(`    ${q.query}: ${q.zombies.challenged} zombie(s) woke after a newer batch wrote one of their keys`);
        if (options.verbose) for (const f of q.injected) print(`    ${f.fn}: ${f.kind} @${f.at}: ${f.detail}`);
        for (const b of q.retries.broken) print(`    ${q.query}: fail-safe defence did not act: ${b}`);
        for (const b of q.retries.excused) print(`    ${q.query}: ${b}`);
      }
      print(`    fail-safe faults, how their request was sent again: ${formatRetryFigures(totalRetries(qs.map((q) => q.retries.figures)))}`);
      print(`    faults planned/happened: ${formatKinds(qs)}`);
      if (options.expirePlanned === true) {
        const sum = (k: 'kept' | 'trimmedBatches' | 'zombiesTimedOut' | 'recordedByEngine'): number => qs.reduce((n, q) => n + q.expired[k], 0);
        print(`    retention timeline: ${sum('trimmedBatches')} planned batches trimmed, ${sum('kept')} batches kept a copy, `
          + `${sum('recordedByEngine')} records recorded lost by the engine, ${sum('zombiesTimedOut')} frozen attempts timed out before their records expired`);
      }
    }
    const total = (k: 'lost' | 'duplicated' | 'mismatched' | 'missed'): number => outcomes.reduce((n, o) => n + o[k], 0);
    const faultsInjected = Object.values(byKind).reduce((n, c) => n + (c ?? 0), 0);
    const faultsPlanned = Object.values(plannedByKind).reduce((n, c) => n + (c ?? 0), 0);
    print(`faults: ${faultsPlanned} planned, ${faultsInjected} happened, ${total('missed')} never happened (${
      Object.entries(plannedByKind).map(([k, n]) => `${k} ${byKind[k as FaultKind] ?? 0}/${n}`).join(', ')})`);
    if (total('missed') > 0) print(`FAILED: ${total('missed')} planned faults never happened: those runs did not test what they claim`);
    const expired = outcomes.flatMap((o) => o.queries.map((q) => q.expired));
    const lostToRetention = expired.reduce((n, e) => n + e.lost, 0);
    print(`lost to retention, reported (skipped-then-expired): ${lostToRetention} records never committed, `
      + `${expired.reduce((n, e) => n + e.reported, 0)} reported expired in ${expired.reduce((n, e) => n + e.ranges, 0)} skipped ranges `
      + '(each: recorded, status unhealthy before and after, the re-drive\'s expired count and sequence range; nothing else missing)');
    const summaryLine = `runs=${options.runs} lost=${total('lost')} duplicated=${total('duplicated')} mismatched=${total('mismatched')}`;
    print(summaryLine);
    const defences = outcomes.reduce((n, o) => n + o.defences, 0);
    if (defences > 0) print(`FAILED: ${defences} fail-safe faults whose defence did not act (never sent again, or not in place where the engine retries in place)`);
    const ok = total('lost') + total('duplicated') + total('mismatched') + total('missed') + defences === 0 && memoryMatches;
    return {
      seed, runs: outcomes, lost: total('lost'), duplicated: total('duplicated'), mismatched: total('mismatched'), missed: total('missed'), ok,
      faultsInjected, faultsByKind: byKind, faultsPlannedByKind: plannedByKind, memory: { matches: memoryMatches, diff: memoryDiff, rows: memoryRows }, lostToRetention,
      records: records.length, summaryLine,
    };
  } finally {
    clients?.destroy();
    await emulators?.stop();
  }
}

/**
 * What a run's own records say, beyond its final contents: the history of its sink against its
 * commit log, and the on-failure destination (it must hold every poison record, each once per
 * query, and nothing else that the sink lacks).
 */
async function judgeRun(got: QueryRun, poison: ReadonlySet<string>): Promise<{ diff: Diff; poison: QueryOutcome['poison'] }> {
  const diff = await got.history.check(got.committed, got.retention.lossyBatches);
  addDiff(diff, got.history.unrecorded(got.listed));
  const deadLettered = new Set(got.discarded.filter((d) => poison.has(d)));
  const missing = [...poison].filter((p) => !deadLettered.has(p));
  if (missing.length > 0) { diff.lost += missing.length; diff.examples.push(`poison record not in the on-failure destination: ${missing[0]}`); }
  // A given-up batch that is not a recorded skipped range would be silent loss: nothing could re-drive it.
  const recorded = new Set<string>();
  for (const g of got.gaveUp) {
    const found = got.recordedSkips.some((r) => r.streamName === g.streamName && r.shardId === g.shardId && r.firstSequenceNumber === g.first && r.lastSequenceNumber === g.last);
    if (found) { for (const p of g.payloads) recorded.add(p); continue; }
    diff.lost += g.payloads.length;
    diff.examples.push(`batch given up on ${g.shardId} ${g.first}..${g.last} is not recorded as a skipped range`);
  }
  return {
    diff,
    poison: {
      planned: poison.size, deadLettered: deadLettered.size, others: got.discarded.filter((d) => !poison.has(d)).length,
      recordedAsSkipped: [...poison].filter((p) => recorded.has(p)).length, skippedRanges: got.recordedSkips.length,
    },
  };
}

/**
 * Every (partition, batch id) in the commit log of the stage that writes the query's sink:
 * `${partitionId}#${batchId}`. With a repartition stage that is stage 2, whose checkpoint
 * partitions are `state.<internal shard>` while its sink batches name the internal shard.
 */
/**
 * The planned batches a trim struck (`<partition>#<batch id>`): those whose planned range lost its
 * first record (retention-loss.ts plannedRangeTrimmed), read from the checkpoint's offset log.
 */
async function struckBatches(
  clients: AwsClients, table: string, functions: readonly { readonly streamName: string; readonly trimmed: readonly { readonly pk: string; readonly batchId: number }[] }[],
  expired: (streamName: string, shardId: string, sequenceNumber: string) => boolean,
): Promise<string[]> {
  const plan = async (pk: string, batchId: number): Promise<Record<string, unknown> | null> => {
    if (batchId < 0) return null;
    const out = await clients.dynamodb.send(new GetItemCommand({
      TableName: table, ConsistentRead: true, Key: { pk: { S: pk }, sk: { S: `offset#${String(batchId).padStart(12, '0')}` } },
    }));
    const entry = out.Item?.entry?.S;
    return entry ? (JSON.parse(entry) as { offsets: Record<string, unknown> }).offsets : null;
  };
  const struck: string[] = [];
  for (const { streamName, trimmed } of functions) {
    for (const t of trimmed) {
      const partition = t.pk.slice(t.pk.indexOf('#') + 1);
      const shardId = partition.slice(partition.lastIndexOf('.') + 1);
      const planned = await plan(t.pk, t.batchId);
      // A plan that is gone (purged) is taken as struck: the check stays strict.
      if (!planned || plannedRangeTrimmed(planned, await plan(t.pk, t.batchId - 1), (seq) => expired(streamName, shardId, seq))) struck.push(`${partition}#${t.batchId}`);
    }
  }
  return struck;
}

async function committedBatches(clients: AwsClients, table: string, queryName: string, hops: number): Promise<Set<string>> {
  // The last stage writes the sink: its checkpoint partitions are `state.<shard>` (stage 2) or
  // `stage<N>.<shard>` (later stages), its sink batches name the internal shard.
  const stagePrefix = hops === 0 ? null : hops === 1 ? 'state.' : `stage${hops + 1}.`;
  const out = new Set<string>();
  let start: Record<string, import('@aws-sdk/client-dynamodb').AttributeValue> | undefined;
  do {
    const page = await clients.dynamodb.send(new ScanCommand({ TableName: table, ConsistentRead: true, ExclusiveStartKey: start, ProjectionExpression: 'pk, sk' }));
    for (const item of page.Items ?? []) {
      const pk = item.pk?.S ?? '';
      const sk = item.sk?.S ?? '';
      if (!pk.startsWith(`${queryName}#`) || !sk.startsWith('commit#')) continue;
      const partition = pk.slice(queryName.length + 1);
      if (stagePrefix === null ? /^(state|stage\d+)\./.test(partition) : !partition.startsWith(stagePrefix)) continue;
      out.add(`${stagePrefix === null ? partition : partition.slice(stagePrefix.length)}#${Number(sk.slice('commit#'.length))}`);
    }
    start = page.LastEvaluatedKey;
  } while (start);
  return out;
}

/** The sink the scheduled function writes through, recording each attempt. */
function recordingSink(sink: Sink, history: SinkHistory): Sink {
  return withWrites(sink, async (batch: SinkBatch) => { history.attempt(batch); await sink.addBatch(batch); });
}

function formatKinds(qs: readonly QueryOutcome[]): string {
  const planned = new Map<string, number>();
  const happened = new Map<string, number>();
  for (const q of qs) {
    for (const f of q.injected) { happened.set(f.kind, (happened.get(f.kind) ?? 0) + 1); planned.set(f.kind, (planned.get(f.kind) ?? 0) + 1); }
    for (const f of q.missed) planned.set(f.kind, (planned.get(f.kind) ?? 0) + 1);
  }
  const poisonPlanned = qs.reduce((n, q) => n + q.poison.planned, 0);
  const poisonDone = qs.reduce((n, q) => n + q.poison.deadLettered, 0);
  const poisonRecorded = qs.reduce((n, q) => n + q.poison.recordedAsSkipped, 0);
  const ranges = qs.reduce((n, q) => n + q.poison.skippedRanges, 0);
  return [...[...planned].map(([k, n]) => `${k} ${happened.get(k) ?? 0}/${n}`),
    `poison-record ${poisonDone}/${poisonPlanned} (${poisonRecorded} in recorded skipped ranges; ${ranges} skipped ranges recorded)`].join(', ');
}

function sumStats(all: readonly EventSourceMappingStats[]): EventSourceMappingStats {
  const out = { invocations: 0, records: 0, deliveredRecords: 0, retries: 0, bisects: 0, failedBatches: 0, discardedRecords: 0, shardsCompleted: 0, errors: 0 };
  for (const s of all) for (const k of Object.keys(out) as (keyof typeof out)[]) out[k] += s[k];
  return out;
}

function formatRun(o: RunOutcome, runs: number): string {
  const injected = o.queries.reduce((n, q) => n + q.injected.length, 0);
  const planned = injected + o.queries.reduce((n, q) => n + q.missed.length, 0);
  const inv = o.queries.reduce((n, q) => n + q.stats.invocations, 0);
  const retries = o.queries.reduce((n, q) => n + q.stats.retries, 0);
  const bisects = o.queries.reduce((n, q) => n + q.stats.bisects, 0);
  const crashes = o.queries.reduce((n, q) => n + q.processesKilled, 0);
  const gaveUp = o.queries.reduce((n, q) => n + q.stats.failedBatches, 0);
  const perQuery = o.queries.map((q) => `${q.query}: ${q.rows} rows, ${q.history.writes} writes (${q.history.orphans} staged files left hidden), `
    + `${q.expired.ranges > 0 || q.expired.lost > 0 ? `${q.expired.lost} records lost to retention and reported (${q.expired.reported} expired in ${q.expired.ranges} skipped ranges, `
      + `${q.expired.recordedByEngine} in planned batches' expired-planned ranges), ` : ''}`
    + `${q.lateRowsCounted > 0 ? `${q.lateRowsCounted} late rows counted (watermark held back after an outage), ` : ''}`
    + `lost=${q.diff.lost} dup=${q.diff.duplicated} mismatch=${q.diff.mismatched}`).join('; ');
  return `run ${o.run}/${runs}: faults ${injected}/${planned} happened, ${crashes} processes killed, ${inv} invocations, ${retries} retries, ${bisects} bisects, `
    + `${gaveUp} batches given up | ${perQuery} | lost=${o.lost} duplicated=${o.duplicated} mismatched=${o.mismatched} missed=${o.missed} (${o.seconds.toFixed(1)} s)`;
}
