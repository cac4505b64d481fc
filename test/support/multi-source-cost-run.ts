/**
 * Both sides of a `sluice cost` comparison for a query over several streams: the estimate, then a
 * measured run of the real handlers on the emulators over the records the estimate ran in memory
 * (each source at its rate, `matchRate` of the later ones' join keys matching), put on the
 * deployment's streams with a source's `extra` records after them, and drained with the internal
 * mappings taking as many records per invocation as the estimate expects of hop 1.
 */
import type { CostEstimate } from '../../lib/aws/cost-estimate.js';
import { estimateMultiSourceCost } from '../../lib/aws/multi-source-cost.js';
import { syntheticInput } from '../../lib/aws/staged-cost-run.js';
import type { EmulatorSet } from '../../lib/local/emulators.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import { sourcesOf, type KinesisSourceSpec, type MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import type { ShardRecord } from '../../lib/sources/kinesis-shard-source.js';
import { deploy, type Deployment } from './aws-pipeline.js';
import { measureDrain, measureSteppedDrain, type MeasuredRun } from './measured-run.js';

export interface MultiSourceCostOptions {
  readonly rates: Readonly<Record<string, number>>;
  readonly shards: number;
  readonly batchSize: number;
  readonly keys: number;
  readonly matchRate: number;
  /** Seconds of input at the rates. */
  readonly seconds: number;
  /** Internal streams (hops) of the plan; default 1. */
  readonly hops?: number;
  /** Records put on a source's stream after the run's (not counted in `runRecords`). */
  /**
   * Put and drain one second of input at a time (measureSteppedDrain), each source's records dealt
   * to its shards in turn as the estimate deals them, the first `warmupSeconds` not counted; by
   * default all input is put at once and drained with the stages side by side, as Lambda runs them.
   */
  readonly stepped?: { readonly warmupSeconds: number };
  readonly extra?: (source: { name: string; spec: KinesisSourceSpec }, startMs: number) => ShardRecord[];
}

export interface MultiSourceCostRun {
  readonly estimate: CostEstimate;
  readonly d: Deployment;
  readonly run: MeasuredRun;
  /** Each source's records of the run (without the extra ones; stepped: all seconds, warm-up included). */
  readonly input: Map<string, ShardRecord[]>;
  /** The records counted (stepped: after the warm-up). */
  readonly runRecords: number;
  /** A cost line's monthly quantity. */
  quantity(component: string): number;
  /** The month's quantities to the run's records. */
  readonly scale: number;
}

export async function measureMultiSourceCost(
  emulators: EmulatorSet, definition: MultiSourceQueryDefinition, options: MultiSourceCostOptions,
): Promise<MultiSourceCostRun> {
  const { rates, shards, batchSize, keys, matchRate } = options;
  const estimate = await estimateMultiSourceCost(definition, {
    sourceRates: rates, shards, internalShards: shards, batchSize, keys, snapshotEvery: 3, matchRate,
  });
  const startMs = Date.now() - 600_000;
  const input = syntheticInput(compileQuery(definition, { allowRepartition: true }), { sourceRates: rates, keys, matchRate, startMs }, options.seconds);
  const d = await deploy(emulators, definition, shards, { repartitionShards: shards, expectedShardCount: undefined, ...(options.hops ? { hops: options.hops } : {}) });
  const drainOptions = { batchSize, internalBatchSize: Math.max(1, Math.round(estimate.hops[0]!.perBatch.records)) };
  const data = (r: ShardRecord): string => Buffer.from(r.dataBase64, 'base64').toString();
  let run: MeasuredRun;
  let counted = input;
  if (options.stepped) {
    const { warmupSeconds } = options.stepped;
    // Shard i's range starts at i / shards of the hash space (createStream's even split).
    const shardStart = (i: number): string => String(((2n ** 128n) * BigInt(i)) / BigInt(shards));
    const putSecond = async (second: number): Promise<void> => {
      for (const source of sourcesOf(definition)) {
        const rate = rates[source.name]!;
        const records = input.get(source.name)!.slice(Math.round(second * rate), Math.round((second + 1) * rate));
        const extra = second === options.seconds - 1 ? options.extra?.(source, startMs) ?? [] : [];
        await d.put([...records, ...extra].map((r, j) => ({ data: data(r), partitionKey: r.partitionKey, explicitHashKey: shardStart(j % shards) })), source.name);
      }
    };
    run = await measureSteppedDrain(d, { warmup: warmupSeconds, counted: options.seconds - warmupSeconds }, putSecond, drainOptions);
    counted = new Map([...input].map(([name, records]) => [name, records.slice(Math.round(warmupSeconds * rates[name]!))]));
  } else {
    for (const source of sourcesOf(definition)) {
      const records = [...input.get(source.name)!, ...(options.extra?.(source, startMs) ?? [])];
      await d.put(records.map((r) => ({ data: data(r), partitionKey: r.partitionKey })), source.name);
    }
    run = await measureDrain(d, drainOptions);
  }
  const runRecords = [...counted.values()].reduce((n, r) => n + r.length, 0);
  return {
    estimate, d, run, input, runRecords,
    quantity: (component) => estimate.lines.find((l) => l.component === component)!.quantity,
    scale: runRecords / (estimate.recordsPerSecond * 730 * 3600),
  };
}
