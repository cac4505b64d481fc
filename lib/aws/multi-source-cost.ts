/**
 * `sluice cost` for a query over several streams, each at its own rate: every stage run for real
 * in memory (staged-cost-run.ts), so each source stage, each hop's traffic and batch rate, the
 * join's state (both sides' buffered rows and their eviction) and the sink's writes are measured
 * from the plan at these rates, under the stated match-rate assumption.
 */
import { CURRENT_PRICES } from '../core/price-table.js';
import { compileQuery } from '../query/compiled-query.js';
import { isMultiSource, sourcesOf, type MultiSourceQueryDefinition, type QueryDefinition } from '../query/query-definition.js';
import { estimateMonthlyCost, MINUTES_PER_MONTH, SECONDS_PER_MONTH, type BatchUnits, type CostEstimate, type CostEstimateInput, type CostLine, type HopEstimate } from './cost-estimate.js';
import { joinKeyColumns, runStagesInMemory, type StageRates } from './staged-cost-run.js';

export interface MultiSourceCostInput extends Omit<CostEstimateInput, 'recordsPerSecond'> {
  readonly sourceRates: Readonly<Record<string, number>>;
  /** Of each later source's rows, the share whose join key matches a row of the first source (default 0.8). */
  readonly matchRate?: number;
  /** Seconds of input run in memory (default 16), of which the first third warms the state up. */
  readonly simulatedSeconds?: number;
}

export const DEFAULT_MATCH_RATE = 0.8;

/** A stage's per-second figures as one invocation's units (what the text output prints per batch). */
function perInvocation(s: StageRates): BatchUnits {
  const n = Math.max(s.invocations, 1e-9);
  return {
    records: s.inputRecords / n, batchesPerInvocation: s.batches / n, outputRows: s.outputRows / n,
    checkpointWriteUnits: s.checkpointWriteUnits / n, checkpointReadUnits: s.checkpointReadUnits / n,
    stateWriteUnits: s.stateWriteUnits / n, sinkWriteUnits: s.sinkWriteUnits / n, s3Puts: s.s3Puts / n, stateBytes: s.stateBytes,
  };
}

/**
 * The estimate for any query: one stage of a single stream as estimateMonthlyCost models it; a hop
 * or several, or several streams, run stage by stage in memory (so each hop's rate is what crosses
 * it, and each stage after a hop groups only the rows routed to its internal shard: estimateMonthlyCost
 * runs stage 2 on a stretch of the stream with every key in it, which at 500 records/s over 2
 * internal shards counted twice the sink writes that stage makes).
 */
export async function estimateQueryCost(definition: QueryDefinition, input: MultiSourceCostInput): Promise<CostEstimate> {
  if (isMultiSource(definition)) return estimateMultiSourceCost(definition, input);
  const hops = compileQuery(definition, { expectedShardCount: input.shards ?? 1, allowRepartition: true }).hops.length;
  if (hops >= 1) return estimateStagedCost(definition, input);
  return estimateMonthlyCost(definition, { ...input, recordsPerSecond: Object.values(input.sourceRates)[0]! });
}

export function estimateMultiSourceCost(definition: MultiSourceQueryDefinition, input: MultiSourceCostInput): Promise<CostEstimate> {
  return estimateStagedCost(definition, input);
}

async function estimateStagedCost(definition: QueryDefinition, input: MultiSourceCostInput): Promise<CostEstimate> {
  // A single stream's one source takes the rate given, whatever it is called.
  const sourceRates = isMultiSource(definition) ? input.sourceRates : { [sourcesOf(definition)[0]!.name]: Object.values(input.sourceRates)[0]! };
  const prices = input.prices ?? CURRENT_PRICES;
  const shards = input.shards ?? 1;
  const internalShards = input.internalShards ?? shards;
  const memoryMb = input.memoryMb ?? 1024;
  const invocationMs = input.invocationMs ?? 200;
  const matchRate = input.matchRate ?? DEFAULT_MATCH_RATE;
  const seconds = input.simulatedSeconds ?? 16;
  const query = compileQuery(definition, { expectedShardCount: shards, allowRepartition: true });
  const stages = await runStagesInMemory(query, {
    sourceRates, shards, internalShards, batchSize: input.batchSize ?? 100, keys: input.keys ?? 100,
    snapshotEvery: input.snapshotEvery ?? 20, matchRate, seconds, warmupSeconds: Math.floor(seconds / 3),
  });
  const month = (perSecond: number): number => perSecond * SECONDS_PER_MONTH;
  const ticks = MINUTES_PER_MONTH;
  const line = (stage: number, component: string, quantity: number, unit: string, usdPerUnit: number): CostLine => ({ stage, component, quantity, unit, usd: quantity * usdPerUnit });
  const lines: CostLine[] = [];
  const stageLines = (s: StageRates, inputPayloadUnits: number): CostLine[] => {
    const prefix = s.source ? (isMultiSource(definition) ? `${s.source}: ` : '') : `stage ${s.stage} `;
    return [
      line(s.stage, `${prefix}Lambda requests`, month(s.invocations), 'requests', prices.lambdaPerMillionRequests / 1e6),
      line(s.stage, `${prefix}Lambda compute`, (month(s.invocations) * invocationMs) / 1000 * (memoryMb / 1024), 'GB-seconds', prices.lambdaPerGbSecond),
      line(s.stage, `${prefix}DynamoDB state writes`, month(s.stateWriteUnits), 'write units', prices.dynamoDbPerMillionWriteUnits / 1e6),
      // Per tick, each shard's idle check writes one row and reads its commit, offsets and idle state.
      line(s.stage, `${prefix}DynamoDB checkpoint writes`, month(s.checkpointWriteUnits) + ticks * s.shards, 'write units', prices.dynamoDbPerMillionWriteUnits / 1e6),
      line(s.stage, `${prefix}DynamoDB checkpoint reads`, month(s.checkpointReadUnits) + ticks * 4 * s.shards, 'read units', prices.dynamoDbPerMillionReadUnits / 1e6),
      line(s.stage, `${prefix}DynamoDB sink writes`, month(s.sinkWriteUnits), 'write units', prices.dynamoDbPerMillionWriteUnits / 1e6),
      line(s.stage, `${prefix}DynamoDB storage (state)`, s.stateBytes / 1024 ** 3, 'GB-months', prices.dynamoDbPerGbMonth),
      line(s.stage, `${prefix}S3 requests`, month(s.s3Puts), 'PUTs', prices.s3PerThousandPuts / 1000),
      line(s.stage, `${prefix}Kinesis shard-hours`, s.shards * 730, 'shard-hours', prices.kinesisPerShardHour),
      line(s.stage, `${prefix}Kinesis PUT payload units`, inputPayloadUnits, '25 KB units', prices.kinesisPerMillionPutPayloadUnits / 1e6),
    ];
  };
  const sourceStages = stages.filter((s) => s.source);
  for (const s of sourceStages) lines.push(...stageLines(s, month(sourceRates[s.source!]!)));
  lines.push(
    line(1, 'scheduled Lambda requests', ticks, 'requests', prices.lambdaPerMillionRequests / 1e6),
    line(1, 'scheduled Lambda compute', ticks * 0.5 * (memoryMb / 1024), 'GB-seconds', prices.lambdaPerGbSecond),
    line(1, 'EventBridge schedule', ticks, 'events', prices.eventBridgePerMillionEvents / 1e6),
  );
  const hops: HopEstimate[] = [];
  for (const s of stages.filter((x) => !x.source).sort((a, b) => a.stage - b.stage)) {
    // What crossed into this stage: the records its senders put on the hop.
    const senders = s.stage === 2 ? sourceStages : stages.filter((x) => x.stage === s.stage - 1);
    const crossing = senders.reduce((a, x) => a + x.hopRecords, 0);
    lines.push(...stageLines(s, month(senders.reduce((a, x) => a + x.hopPayloadUnits, 0))));
    hops.push({ hop: s.stage - 1, internalShards, recordsPerSecond: crossing, invocationsPerMonth: month(s.invocations), perBatch: perInvocation(s) });
  }
  const joins = joinKeyColumns(query);
  const assumptions = joins.size > 0
    ? [`join: ${Math.round(matchRate * 100)}% of the rows of ${[...joins.keys()].slice(1).join(', ')} match a row of ${[...joins.keys()][0]} `
      + `(--match-rate); state and output from ${seconds} s of input run in memory: a join keeping rows longer than that stores more `
      + '(storage), and its evictions, not seen yet, add their keys to the deltas (snapshots follow the deltas, not the state\'s size)']
    : [`state and output from ${seconds} s of input run in memory`];
  return {
    query: definition.name, prices: prices.version, shards,
    recordsPerSecond: Object.values(sourceRates).reduce((a, b) => a + b, 0),
    invocationsPerMonth: sourceStages.reduce((a, s) => a + month(s.invocations), 0),
    perBatch: perInvocation(sourceStages[0]!), hops, lines, totalUsd: lines.reduce((a, l) => a + l.usd, 0),
    assumptions, stages,
  };
}
