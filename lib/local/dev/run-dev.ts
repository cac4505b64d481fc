/**
 * `sluice dev`: a query run end to end on this machine, through the same code a deployment runs.
 *
 *   1. Start the embedded emulators (kinesis-mock, DynamoDB Local, s3rver; or AWS_ENDPOINT_URL).
 *   2. Create the stream (N shards), the checkpoint/state/sink tables and the S3 buckets.
 *   3. Put the events (a file, or generated sample sales with late rows and malformed records).
 *   4. Run the real Kinesis Lambda handler under a local event source mapping (Lambda's
 *      batching, retries and bisecting) until every shard is drained.
 *   5. Run the scheduled handler once: caught-up shards go idle, no-data batches close windows.
 * The query is compiled once and every handler reuses it, as a warm container does.
 *   6. Print every batch (progress and output table), a summary, and with --out the final sink
 *      contents and the dead letters.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { stringifyWithLongs } from '../../core/long.js';
import { isMultiSource, sourcesOf, type QueryDefinition } from '../../query/query-definition.js';
import { IllegalArgumentError } from '../../errors/sluice-error.js';
import { compileQuery } from '../../query/compiled-query.js';
import type { QueryStage } from '../../query/query-stage.js';
import { importQueryModule } from '../../query/query-module.js';
import { createAwsClients, type AwsClients } from '../../aws/clients.js';
import { createKinesisTriggerHandler, createRepartitionTriggerHandler, shardIdOf, type KinesisTriggerHandler } from '../../aws/kinesis-trigger-handler.js';
import { createScheduledTriggerHandler } from '../../aws/scheduled-trigger-handler.js';
import type { OutputMode } from '../../core/output-mode.js';
import type { StreamingQueryProgress } from '../../runtime/progress.js';
import type { ShardInvocationResult } from '../../query/shard-invocation.js';
import { sinkSupportsMode } from '../../sinks/sink-output-modes.js';
import type { Sink } from '../../sinks/sink.js';
import type { DeadLetterRecord } from '../../sources/dead-letter.js';
import { startEmulators, type EmulatorSet } from '../emulators.js';
import { copyCommittedSinkFiles } from './sink-files.js';
import { sinkPrefixOf } from '../../aws/aws-backends.js';
import { createStreamAndWait } from '../kinesis-admin.js';
import type { RuntimeConfig } from '../../runtime/runtime-config.js';
import { deliverToOnFailureHandler } from '../on-failure-destination.js';
import { createOnFailureHandler } from '../../aws/on-failure-handler.js';
import { LocalEventSourceMapping, type BatchFailureInfo } from '../event-source-mapping.js';
import { generateSalesEvents, type SampleRecord } from '../sample-events.js';
import { recordsFromInputBytes } from './input-file.js';
import { defaultSinkFor, hourlySalesQuery } from './default-query.js';
import {
  localDeployment, localRuntimeConfig, provisionLocal, putSampleRecords, quietObservability, readDeadLetterContents,
  readSinkContents, type SinkContents,
} from './local-stack.js';
import { CapturingSink, formatCost, formatProgressLine } from './report.js';
import { boardBatch, type ProgressBoard } from './ui/progress-board.js';
import { putAtRate } from './put-at-rate.js';

export interface DevOptions {
  /** A module whose default export is a StreamingQueryDefinition; default: hourly sales per store. */
  readonly queryModule?: string;
  /**
   * JSON Lines (or CSV lines for a csv source): one record per line. A query over several streams
   * takes one file per source, `<source>=<file>` (repeat the option).
   */
  readonly input?: string | readonly string[];
  readonly shards?: number;
  readonly out?: string;
  readonly batchSize?: number;
  readonly mode?: OutputMode;
  /** Seed of the generated sample events. */
  readonly seed?: number;
  /** Where the report goes (default stdout). */
  readonly print?: (line: string) => void;
  /** Register SIGINT/SIGTERM handlers that stop the emulators (the CLI does). */
  readonly handleSignals?: boolean;
  /** Print only the summary (not every batch). */
  readonly quiet?: boolean;
  /** Put the records at this many per second (default: each wave at once). */
  readonly ratePerSecond?: number;
  /** `--ui`: every batch, the dead letters and the run's status are published here. */
  readonly board?: ProgressBoard;
  /** Hears every committed batch's progress record (as the board and the report see it). */
  readonly onProgress?: (shard: string, stage: QueryStage, progress: StreamingQueryProgress) => void;
}

export interface DevSummary {
  readonly batches: number;
  /** Spark's no-data batches (run because the watermark moved; they read nothing). */
  readonly noDataBatches: number;
  /** Records put on the stream. */
  readonly recordsPut: number;
  readonly inputRows: number;
  readonly outputRows: number;
  readonly lateRowsDropped: number;
  readonly deadLetters: readonly DeadLetterRecord[];
  readonly sink: SinkContents;
  readonly invocations: number;
  /** Lines of `--input` not put (Kinesis would refuse them), with why. */
  readonly skippedInput: readonly { readonly line: number; readonly reason: string }[];
}

/** A record to put: generated sample events, or one line of `--input` (bytes). */
type DevRecord = Pick<SampleRecord, 'partitionKey' | 'wave' | 'kind'> & { readonly data: string | Uint8Array };

function withMode(definition: QueryDefinition, mode: OutputMode | undefined, print: (line: string) => void): QueryDefinition {
  if (!mode || mode === definition.outputMode) return definition;
  const fits = sinkSupportsMode(definition.sink.kind, mode);
  const sink = fits ? definition.sink : defaultSinkFor(mode);
  if (!fits) print(`note: --mode ${mode} does not fit the ${definition.sink.kind} sink; using ${sink.kind} instead`);
  return { ...definition, outputMode: mode, sink };
}

const plural = (n: number, word: string, many = `${word}s`): string => `${n} ${n === 1 ? word : many}`;

export async function runDev(options: DevOptions = {}): Promise<DevSummary> {
  const print = options.print ?? ((line: string) => process.stdout.write(`${line}\n`));
  // The run's narrative; --quiet keeps only the summary (and errors).
  const say = options.quiet ? (_line: string): void => {} : print;
  const board = options.board;
  const status = (text: string, done = false): void => board?.publish({ type: 'status', text, done });
  if (options.ratePerSecond !== undefined && !(options.ratePerSecond > 0 && Number.isFinite(options.ratePerSecond))) {
    throw new Error(`--rate must be a positive number of records per second, got ${options.ratePerSecond}`);
  }
  const shards = options.shards ?? 2;
  const batchSize = options.batchSize ?? 25;
  if (!Number.isInteger(shards) || shards < 1 || shards > 50) throw new Error(`--shards must be an integer from 1 to 50, got ${options.shards}`);
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 10_000) throw new Error(`--batch-size must be an integer from 1 to 10000, got ${options.batchSize}`);

  const loaded = options.queryModule ? await importQueryModule(options.queryModule) : hourlySalesQuery(options.mode ?? 'update');
  const definition = options.queryModule ? withMode(loaded, options.mode, print) : loaded;
  // Refused shapes are reported before anything starts. A query whose state is not keyed by the
  // stream's partition key runs with repartition stages (one internal stream per hop).
  const query = compileQuery(definition, { expectedShardCount: shards, allowRepartition: true });
  const { columns, needsRepartition } = query;
  const sources = sourcesOf(definition);
  const inputFiles = inputFilesOf(definition, options.input);

  // Each source stream's records (a one-stream query: the one stream).
  const inputs: { source: string; records: readonly DevRecord[] }[] = [];
  let origin: string;
  const inputNotes: string[] = [];
  let skippedInput: DevSummary['skippedInput'] = [];
  if (inputFiles) {
    const origins: string[] = [];
    for (const { name, spec } of sources) {
      const file = inputFiles.get(name)!;
      if (!existsSync(file)) throw new Error(`input file ${file} not found`);
      // Bytes, not text: invalid UTF-8 must reach the decoder (and its dead letters) unchanged.
      const input = recordsFromInputBytes(readFileSync(file), spec, options.seed ?? 1);
      inputs.push({ source: name, records: input.records.map((r) => ({ ...r, kind: 'event' as const })) });
      inputNotes.push(...input.notes);
      skippedInput = [...skippedInput, ...input.skipped];
      origins.push(`${sources.length > 1 ? `${name}: ` : ''}${file} (${plural(input.records.length, 'record')}${input.skipped.length ? `, ${input.skipped.length} skipped` : ''})`);
    }
    origin = origins.join(', ');
  } else {
    const generated = generateSalesEvents({ seed: options.seed ?? 3 });
    inputs.push({ source: sources[0]!.name, records: generated });
    const late = generated.filter((r) => r.kind === 'late').length;
    const bad = generated.filter((r) => r.kind === 'malformed').length;
    origin = `generated sample sales (${plural(generated.length, 'record')}: ${late} late, ${bad} malformed; seed ${options.seed ?? 3})`;
  }
  const records = inputs.flatMap((i) => i.records);

  say(`sluice dev: query '${definition.name}' (${definition.outputMode} mode → ${definition.sink.kind} sink), ${plural(shards, 'shard')}, batch size ${batchSize}`);
  say(`events: ${origin}${options.ratePerSecond ? `, put at ${options.ratePerSecond} records/s` : ''}`);
  for (const note of inputNotes) say(`  note: ${note}`);
  board?.publish({ type: 'query', name: definition.name, outputMode: definition.outputMode, sink: definition.sink.kind, shards });
  status('starting the emulators');
  const startedAt = Date.now();
  let emulators: EmulatorSet | undefined;
  let clients: AwsClients | undefined;
  const mappings: LocalEventSourceMapping[] = [];
  let stopping: Promise<void> | undefined;
  const stopAll = (): Promise<void> => {
    stopping ??= (async () => {
      await Promise.allSettled(mappings.map((m) => m.stop()));
      clients?.destroy();
      await emulators?.stop();
    })();
    return stopping;
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    print(`\n${signal}: stopping the emulators`);
    void stopAll().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  if (options.handleSignals) { process.once('SIGINT', onSignal); process.once('SIGTERM', onSignal); }

  try {
    emulators = await startEmulators();
    say(emulators.external
      ? `emulators: using ${emulators.endpoints.kinesis} (AWS_ENDPOINT_URL)`
      : `emulators: kinesis-mock ${emulators.endpoints.kinesis}, DynamoDB Local ${emulators.endpoints.dynamodb}, s3rver ${emulators.endpoints.s3} (${Date.now() - startedAt} ms)`);
    clients = createAwsClients(emulators.clientOptions);
    // On an external LocalStack, earlier runs' resources may still exist: use fresh names.
    const deployment = localDeployment(emulators.external ? `dev-${Date.now().toString(36)}` : 'dev');
    // One stream per source (the first is the deployment's), one internal stream per hop, as the construct deploys them.
    const sourceStreams = new Map(sources.map((s, i) => [s.name, i === 0 ? deployment.streamName : `${deployment.streamName}-${s.name}`]));
    const internalStreams = query.hops.map((h) => (h.index === 0 ? `${deployment.streamName}-repartition` : `${deployment.streamName}-repartition-${h.index + 1}`));
    const config: RuntimeConfig = {
      ...localRuntimeConfig(deployment, { shards, idleShardTimeoutMs: 0 }),
      ...(internalStreams.length > 0 ? { repartitionStreamName: internalStreams[0] } : {}),
      ...(internalStreams.length > 1 ? { repartitionStreamNames: internalStreams } : {}),
      ...(isMultiSource(definition) ? { sourceStreams: Object.fromEntries(sourceStreams) } : {}),
    };
    await provisionLocal(clients, deployment, shards);
    for (const name of [...[...sourceStreams.values()].slice(1), ...internalStreams]) await createStreamAndWait(clients.kinesis, name, shards);
    const streamList = [...sourceStreams.entries()].map(([source, stream]) => `${stream}${sources.length > 1 ? ` (${source})` : ''}`).join(', ');
    say(`created: stream${sources.length > 1 ? 's' : ''} ${streamList} (${plural(shards, 'shard')}${sources.length > 1 ? ' each' : ''})${internalStreams.length ? `, internal repartition stream${internalStreams.length > 1 ? 's' : ''} ${internalStreams.join(', ')} (${plural(shards, 'shard')})` : ''}, tables ${deployment.checkpointTable} / ${deployment.stateTable} / ${deployment.sinkTable}, buckets ${deployment.sinkBucket} / ${deployment.deadLetterBucket}`);
    if (query.stages.length > 1) {
      say(`stages: ${query.stages.map((st) => `stage ${st.index + 1}${st.sourceName && sources.length > 1 ? ` (${st.sourceName})` : ''} ${st.writes === 'sink' ? '→ sink' : `→ internal stream ${st.outputHop!.index + 1}`}`).join('; ')}`);
    }

    const totals = {
      batches: 0, noData: 0, deadLetterOnly: 0, byTick: 0, stage1: 0, inputRows: 0, routed: 0, outputRows: 0, late: 0, nullEventTime: 0,
      deadLettered: 0, writeUnits: 0, readUnits: 0, s3Puts: 0, byStage: new Map<number, number>(),
    };
    // One per handler (the Kinesis one, then the scheduled one): each keeps its batches' tables.
    const capturers: CapturingSink[] = [];
    const decorateSink = (sink: Sink): Sink => { const c = new CapturingSink(sink); capturers.push(c); return c; };
    const reportFrom = (via: 'mapping' | 'tick') => (shardId: string, result: ShardInvocationResult): void => {
      const label = result.stage.label(shardId);
      const routes = result.stage.writes === 'internal-stream';
      const fromSource = result.stage.reads === 'source-stream';
      const hop = result.stage.outputHop;
      const routedTo = hop ? ` (routed by ${hop.routingColumns.length ? `[${hop.routingColumns.join(', ')}]` : 'nothing: one partition'} to internal stream ${hop.index + 1})` : '';
      for (const p of result.progress) {
        say('');
        say(`${formatProgressLine(label, p)}${routedTo}`);
        const captured = routes ? undefined : capturers.map((c) => c.take(shardId, p.batchId)).find((t) => t !== undefined);
        if (captured) say(captured.table);
        board?.publish(boardBatch(label, result.stage, p, captured?.output));
        options.onProgress?.(label, result.stage, p);
        totals.batches++;
        // Spark's no-data batch reads nothing; a batch of only undecodable records dead-letters them all.
        if (p.numInputRows === 0) { if (p.numDeadLetteredRows > 0) totals.deadLetterOnly++; else totals.noData++; }
        if (via === 'tick') totals.byTick++;
        totals.deadLettered += p.numDeadLetteredRows;
        totals.byStage.set(result.stage.index + 1, (totals.byStage.get(result.stage.index + 1) ?? 0) + 1);
        if (!routes) count(p);
        else if (fromSource) { totals.stage1++; totals.inputRows += p.numInputRows; totals.routed += p.sink.numOutputRows; }
        else count(p, false);
      }
      if (result.error) print(`[${label}] batch failed, will be retried from ${result.firstUncommittedSequenceNumber ?? 'the pending batch'}: ${result.error.message}`);
    };
    const count = (p: StreamingQueryProgress, final = true): void => {
      if (!needsRepartition) totals.inputRows += p.numInputRows;
      if (final) totals.outputRows += p.sink.numOutputRows;
      totals.late += p.stateOperators.reduce((n, op) => n + op.numRowsDroppedByWatermark, 0);
      totals.nullEventTime += p.numRowsNullEventTime;
      totals.writeUnits += p.cost.dynamoDbWriteUnits ?? 0;
      totals.readUnits += p.cost.dynamoDbReadUnits ?? 0;
      totals.s3Puts += p.cost.s3Puts ?? 0;
    };

    // The handlers' own logs are off; their errors (an invocation that could not start) are shown.
    const observability = quietObservability(definition.name, (message, error) => {
      if (/batch failed/.test(message)) return; // already printed from the invocation's result
      print(`handler: ${message}${error instanceof Error ? `: ${error.message}` : ''}`);
    });
    // Lambda runs concurrent invocations (one per shard here) in separate containers: one handler
    // instance per shard, so that each has its own clients and cost meter, as in AWS.
    const failures: BatchFailureInfo[] = [];
    // As deployed: the on-failure function records each given-up range (`sluice status` shows it, `sluice redrive --skipped` re-reads it).
    const onFailureHandler = createOnFailureHandler(query, { config, clientOptions: emulators!.clientOptions, observability });
    const mappingFor = (streamName: string, create: typeof createKinesisTriggerHandler, stage: QueryStage): LocalEventSourceMapping => {
      const handlers = new Map<string, KinesisTriggerHandler>();
      const handlerFor = (shardId: string): KinesisTriggerHandler => {
        let h = handlers.get(shardId);
        if (!h) handlers.set(shardId, (h = create(query, { config, clientOptions: emulators!.clientOptions, observability, onInvocation: reportFrom('mapping'), decorateSink })));
        return h;
      };
      return new LocalEventSourceMapping({
        kinesis: clients!.kinesis,
        streamName,
        handler: (event, context) => handlerFor(shardIdOf(event.Records[0]!))(event, context),
        batchSize,
        bisectBatchOnFunctionError: true,
        maximumRetryAttempts: 3,
        pollIntervalMs: 50,
        shardDiscoveryIntervalMs: 200,
        retryBackoffMs: 50,
        onFailure: async (info) => {
          failures.push(info);
          print(`[${stage.label(info.shardId)}] gave up on records ${info.startSequenceNumber}..${info.endSequenceNumber} after retries: ${info.reason}`);
          await deliverToOnFailureHandler(onFailureHandler, info);
        },
      });
    };
    for (const [source, stream] of sourceStreams) mappings.push(mappingFor(stream, createKinesisTriggerHandler, query.sourceStageOf(source)));
    internalStreams.forEach((stream, i) => mappings.push(mappingFor(stream, createRepartitionTriggerHandler, query.stageReadingHop(i))));
    await Promise.all(mappings.map((m) => m.start()));
    const drainAll = async (): Promise<void> => {
      // Stage 1 feeds stage 2: drain until a whole round invoked nothing.
      for (let invoked = -1; ;) {
        await Promise.all(mappings.map((m) => m.drain({ idleMs: 300, timeoutMs: 300_000 })));
        const now = mappings.reduce((n, m) => n + m.stats.invocations, 0);
        if (now === invoked) return;
        invoked = now;
      }
    };
    const waves = [...new Set(records.map((r) => r.wave))].sort((a, b) => a - b);
    const put = async (source: string, chunk: readonly DevRecord[]): Promise<void> => { await putSampleRecords(clients!, sourceStreams.get(source)!, chunk); };
    const showDeadLetters = async (): Promise<void> => { if (board) board.publishDeadLetters(await readDeadLetterContents(clients!, config)); };
    for (const wave of waves) {
      const batch = records.filter((r) => r.wave === wave);
      say('');
      say(`== wave ${wave}: put ${plural(batch.length, 'record')}${wave > 1 ? ' (after the records before it were processed: late rows, if the watermark moved past them)' : ''}; `
        + `the event source mapping invokes the Kinesis handler${needsRepartition ? `, and the repartition handler on the internal stream${internalStreams.length > 1 ? 's' : ''}` : ''} ==`);
      status(`wave ${wave} of ${waves.length}: putting ${plural(batch.length, 'record')}`);
      for (const input of inputs) {
        const ofWave = input.records.filter((r) => r.wave === wave);
        if (options.ratePerSecond) await putAtRate((chunk) => put(input.source, chunk), ofWave, options.ratePerSecond);
        else await put(input.source, ofWave);
      }
      status(`wave ${wave} of ${waves.length}: processing`);
      await drainAll();
      await showDeadLetters();
    }
    const stats = mappings.map((m) => m.stats).reduce((a, b) => ({
      ...a, invocations: a.invocations + b.invocations, retries: a.retries + b.retries, bisects: a.bisects + b.bisects,
    }));
    await Promise.all(mappings.map((m) => m.stop()));

    say('');
    say('== scheduled handler (tick): caught-up shards go idle; no-data batches close what the watermark passed ==');
    status('scheduled tick: no-data batches');
    const tick = createScheduledTriggerHandler(query, { config, clients, observability, onInvocation: reportFrom('tick'), decorateSink });
    // One tick per stage: each forwards its watermark over its hop, which the next tick's stage reads.
    for (let round = 0; round < query.stages.filter((st) => st.reads === 'internal-stream').length + 1; round++) {
      const tickSummary = await tick({ mode: 'tick' });
      for (const s of tickSummary.shards) {
        if (round > 0 && s.batches === 0) continue;
        say(`[${s.label}] tick: ${s.caughtUp ? 'caught up (idle)' : 'not caught up'}, ${s.batches} ${s.batches === 1 ? 'batch' : 'batches'}${s.batches === 0 ? ' (nothing to close)' : ''}${s.error ? `, error: ${s.error}` : ''}`);
      }
    }

    const [read, deadLetters] = await Promise.all([readSinkContents(clients, definition, config), readDeadLetterContents(clients, config)]);
    // DynamoDB items come back with their attributes in no particular order: use the query's.
    const sink = { ...read, rows: read.rows.map((row) => inColumnOrder(row, columns)) };
    say('');
    print('== summary ==');
    for (const line of summaryLines({
      totals, records: records.length, waves: waves.length, invocations: stats.invocations, retries: stats.retries, bisects: stats.bisects,
      givenUp: failures.length, needsRepartition, outputMode: definition.outputMode, byStage: totals.byStage,
    })) print(line);
    print(`cost (sum of the batches' progress): ${formatCost({ dynamoDbWriteUnits: totals.writeUnits, dynamoDbReadUnits: totals.readUnits, s3Puts: totals.s3Puts })}`);
    if (skippedInput.length) print(`input lines not put: ${skippedInput.map((s) => `line ${s.line} (${s.reason})`).join('; ')}`);
    print(`dead letters: ${deadLetters.length} (s3://${config.deadLetterBucket}/${config.deadLetterPrefix})`);
    for (const d of deadLetters) {
      print(`  ${d.shardId} #${d.sequenceNumber} key=${d.partitionKey}: ${d.reason}`);
      print(`    data: ${truncate(Buffer.from(d.dataBase64, 'base64').toString('utf8'), 100)}`);
    }
    print(`sink: ${sink.location} holds ${plural(sink.rows.length, 'row')}${sinkNote(definition.outputMode, sink.kind, totals.outputRows, sink.rows.length)}`);
    await showDeadLetters();
    if (options.out) {
      const dir = resolve(options.out);
      mkdirSync(dir, { recursive: true });
      const sinkFile = sink.kind === 's3-files' ? 'sink-files.jsonl' : sink.kind === 's3-snapshot' ? 'sink-snapshot.jsonl' : 'sink-dynamodb.jsonl';
      writeFileSync(resolve(dir, sinkFile), jsonLines(sink.rows));
      writeFileSync(resolve(dir, 'dead-letters.jsonl'), jsonLines(deadLetters.map((d) => ({
        ...d, data: Buffer.from(d.dataBase64, 'base64').toString('utf8'),
      }))));
      print(`wrote ${resolve(dir, sinkFile)} (${plural(sink.rows.length, 'row')}) and ${resolve(dir, 'dead-letters.jsonl')} (${deadLetters.length})`);
      if (definition.sink.kind === 's3-files') {
        const files = await copyCommittedSinkFiles(clients.s3, config.sinkBucket!, sinkPrefixOf(definition, config), dir);
        print(`copied ${plural(files.length, 'committed sink file')} to ${resolve(dir, 'sink-files')}`);
      }
    }
    print(`done in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
    status(`done in ${((Date.now() - startedAt) / 1000).toFixed(1)} s: ${plural(totals.batches, 'batch', 'batches')}, ${totals.inputRows} input rows, ${deadLetters.length} dead letters`, true);
    return {
      batches: totals.batches, noDataBatches: totals.noData, recordsPut: records.length, inputRows: totals.inputRows, outputRows: totals.outputRows, lateRowsDropped: totals.late,
      deadLetters, sink, invocations: stats.invocations, skippedInput,
    };
  } finally {
    if (options.handleSignals) { process.removeListener('SIGINT', onSignal); process.removeListener('SIGTERM', onSignal); }
    await stopAll();
  }
}

interface SummaryFigures {
  readonly totals: {
    readonly batches: number; readonly noData: number; readonly deadLetterOnly: number; readonly byTick: number; readonly stage1: number;
    readonly inputRows: number; readonly routed: number; readonly outputRows: number; readonly late: number; readonly deadLettered: number;
    /** Rows whose event time was NULL (progress's numRowsNullEventTime): a window() drops them, as Spark does. */
    readonly nullEventTime?: number;
  };
  readonly records: number;
  readonly waves: number;
  readonly invocations: number;
  readonly retries: number;
  readonly bisects: number;
  readonly givenUp: number;
  readonly needsRepartition: boolean;
  readonly outputMode: OutputMode;
  /** Batches per stage number (1: the source streams' shards); absent: stage 1 and stage 2 as the totals give them. */
  readonly byStage?: ReadonlyMap<number, number>;
}

/** The summary's counts, each with what it is made of, so that every number adds up on the page. */
export function summaryLines(f: SummaryFigures): string[] {
  const t = f.totals;
  const lines: string[] = [];
  const accounted = t.inputRows + t.deadLettered;
  lines.push(`records put: ${f.records}${f.waves > 1 ? ` in ${f.waves} waves` : ''} = ${t.inputRows} read as input rows + ${t.deadLettered} dead-lettered`
    + (accounted !== f.records ? ` (${f.records - accounted} not read: ${f.givenUp ? `in ${plural(f.givenUp, 'batch', 'batches')} given up after retries` : 'see the messages above'})` : ''));
  const byMapping = t.batches - t.byTick;
  const withInput = t.batches - t.noData - t.deadLetterOnly;
  const idle = f.invocations - byMapping;
  lines.push(`batches: ${t.batches} committed = ${withInput} with input rows`
    + `${t.deadLetterOnly > 0 ? ` + ${t.deadLetterOnly} whose records were all dead-lettered` : ''}`
    + ` + ${t.noData} no-data batch${t.noData === 1 ? '' : 'es'} (run because the watermark moved: they close windows and drop expired state)`);
  lines.push(`  run by: ${byMapping} in ${plural(f.invocations, 'Lambda invocation')} of the event source mapping`
    + ` (an invocation runs its records' batch, then a no-data batch if the watermark moved; ${plural(f.retries, 'retry', 'retries')}, ${plural(f.bisects, 'bisect')}`
    + `${idle > 0 ? `; ${idle} invocation${idle === 1 ? '' : 's'} committed no batch: a failed attempt or records already committed` : ''})`
    + ` + ${t.byTick} by the scheduled tick`);
  if (f.needsRepartition) {
    const later = [...(f.byStage ?? new Map([[2, t.batches - t.stage1]])).entries()].filter(([stage]) => stage > 1).sort(([a], [b]) => a - b);
    lines.push(`  stages: ${t.stage1} batches of stage 1 (decode, route rows by state key: ${t.routed} rows routed)`
      + later.map(([stage, n], i) => ` + ${n} of stage ${stage}${i === later.length - 1 ? ' (state and sink)' : ' (state, rows routed on)'}`).join(''));
  }
  lines.push(`rows: ${t.inputRows} in, ${t.outputRows} out, ${t.late} late rows dropped by the watermark`
    + (t.nullEventTime ? `, ${plural(t.nullEventTime, 'row')} with a NULL event time (dropped by window(), numRowsNullEventTime in progress)` : '')
    + ` (out: rows the batches wrote to the sink, ${f.outputMode === 'update' ? 'a key again in every batch that changed it' : f.outputMode === 'complete' ? 'the whole result in every batch' : 'each row once, when final'})`);
  return lines;
}

/**
 * `--input` as one file per source: a one-stream query takes a plain path; a query over several
 * streams takes `<source>=<file>` for each of its sources. Null: no input (generated sample sales,
 * which only a one-stream query can take).
 */
export function inputFilesOf(definition: QueryDefinition, input: string | readonly string[] | undefined): Map<string, string> | null {
  const given = input === undefined ? [] : typeof input === 'string' ? [input] : [...input];
  const sources = sourcesOf(definition).map((s) => s.name);
  if (!isMultiSource(definition)) {
    if (given.length > 1) throw new IllegalArgumentError(`query '${definition.name}' reads one stream: give one --input file, not ${given.length}.`, { code: 'DEV_INPUT_INVALID' });
    return given.length === 0 ? null : new Map([[sources[0]!, given[0]!]]);
  }
  const usage = `give each source its events: ${sources.map((s) => `--input ${s}=<file>`).join(' ')}`;
  if (given.length === 0) {
    throw new IllegalArgumentError(`query '${definition.name}' reads several streams (${sources.join(', ')}): the sample sales fit none of them; ${usage}.`, {
      code: 'DEV_INPUT_MISSING', hint: usage,
    });
  }
  const files = new Map<string, string>();
  for (const entry of given) {
    const at = entry.indexOf('=');
    const name = at > 0 ? entry.slice(0, at) : '';
    if (!sources.includes(name)) {
      throw new IllegalArgumentError(`--input ${entry} names no source of query '${definition.name}' (its sources: ${sources.join(', ')}); ${usage}.`, { code: 'DEV_INPUT_INVALID', hint: usage });
    }
    if (files.has(name)) throw new IllegalArgumentError(`--input names source '${name}' twice.`, { code: 'DEV_INPUT_INVALID', hint: usage });
    files.set(name, entry.slice(at + 1));
  }
  const missing = sources.filter((s) => !files.has(s));
  if (missing.length > 0) throw new IllegalArgumentError(`no --input for source${missing.length > 1 ? 's' : ''} ${missing.join(', ')} of query '${definition.name}'; ${usage}.`, { code: 'DEV_INPUT_MISSING', hint: usage });
  return files;
}

function sinkNote(mode: OutputMode, kind: SinkContents['kind'], outputRows: number, held: number): string {
  if (mode === 'update' && outputRows !== held) return ` (the latest of ${outputRows} upserts, one row per key)`;
  if (mode === 'complete' && kind === 's3-snapshot') return ' (the last batch\'s complete result)';
  return '';
}

function inColumnOrder(row: Record<string, unknown>, columns: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const c of columns) if (c in row) out[c] = row[c];
  for (const [k, v] of Object.entries(row)) if (!(k in out)) out[k] = v;
  return out;
}

function jsonLines(rows: readonly unknown[]): string {
  return rows.map((r) => stringifyWithLongs(r)).join('\n') + (rows.length > 0 ? '\n' : '');
}

function truncate(text: string, n: number): string {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}
