/** `sluice cost <query-module> --rate N/s`: a monthly estimate before deploying (lib/aws/cost-estimate.ts). */
import { readFileSync } from 'node:fs';
import { type Command, InvalidArgumentError } from 'commander';
import { estimateMonthlyCost } from '../../lib/aws/cost-estimate.js';
import { CURRENT_PRICES, type PriceTable } from '../../lib/core/price-table.js';
import { importQueryModule } from '../../lib/query/query-module.js';
import { isMultiSource } from '../../lib/query/query-definition.js';
import { IllegalArgumentError } from '../../lib/errors/sluice-error.js';
import { positiveInt, print, table } from './common.js';

/** `1000/s`, `60000/min`, `3600000/h` or a bare number (per second). */
export function parseRate(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(?:\/(s|sec|second|m|min|minute|h|hour))?$/.exec(value.trim());
  if (!m || Number(m[1]) <= 0) throw new InvalidArgumentError('--rate must be records per second, e.g. 1000/s (or N/min, N/h).');
  const per = { s: 1, sec: 1, second: 1, m: 60, min: 60, minute: 60, h: 3600, hour: 3600 }[(m[2] ?? 's') as 's'];
  return Number(m[1]) / per;
}

/** `--prices file.json`: the current table with the file's prices in place of its own. */
export function readPrices(path: string): PriceTable {
  let overrides: Partial<PriceTable>;
  try {
    overrides = JSON.parse(readFileSync(path, 'utf8')) as Partial<PriceTable>;
  } catch (error) {
    throw new InvalidArgumentError(`--prices: cannot read ${path}: ${(error as Error).message}`);
  }
  const unknown = Object.keys(overrides).filter((k) => !(k in CURRENT_PRICES));
  if (unknown.length > 0) throw new InvalidArgumentError(`--prices: unknown price ${unknown.join(', ')} (known: ${Object.keys(CURRENT_PRICES).join(', ')}).`);
  return { ...CURRENT_PRICES, ...overrides, version: overrides.version ?? `${CURRENT_PRICES.version} with ${path}` };
}

const usd = (n: number): string => (n >= 0.01 || n === 0 ? `$${n.toFixed(2)}` : `$${n.toPrecision(2)}`);

export function registerCostCommand(program: Command): void {
  program
    .command('cost')
    .description('a monthly cost estimate for a query module at a given input rate, by component '
      + '(Lambda, DynamoDB state/checkpoint/sink, S3, Kinesis, EventBridge)')
    .argument('<query-module>', 'a module whose default export is a StreamingQueryDefinition')
    .requiredOption('--rate <n/s>', 'input records per second (N/s, N/min or N/h)', parseRate)
    .option('--keys <n>', 'distinct partition-key values (e.g. stores)', positiveInt('--keys'), 100)
    .option('--shards <n>', 'Kinesis shards', positiveInt('--shards'), 1)
    .option('--batch-size <n>', 'the event source mapping\'s batch size (the construct\'s default is 100)', positiveInt('--batch-size'), 100)
    .option('--memory <mb>', 'function memory', positiveInt('--memory'), 1024)
    .option('--duration-ms <n>', 'average Kinesis-trigger invocation duration', positiveInt('--duration-ms'), 200)
    .option('--prices <file>', `JSON overriding prices of the table (${CURRENT_PRICES.version})`)
    .option('--json', 'print JSON instead of text')
    .action(async (queryModule: string, opts: {
      rate: number; keys: number; shards: number; batchSize: number; memory: number; durationMs: number; prices?: string; json?: boolean;
    }) => {
      const prices = opts.prices ? readPrices(opts.prices) : CURRENT_PRICES;
      const definition = await importQueryModule(queryModule);
      if (isMultiSource(definition)) {
        throw new IllegalArgumentError(`query '${definition.name}' reads several streams (${Object.keys(definition.sources).join(', ')}); sluice cost estimates one-stream queries.`, {
          code: 'MULTI_SOURCE_COST_UNSUPPORTED', hint: 'estimate each stream\'s side as a one-stream query for now.',
        });
      }
      const estimate = await estimateMonthlyCost(definition, {
        recordsPerSecond: opts.rate, keys: opts.keys, shards: opts.shards, batchSize: opts.batchSize,
        memoryMb: opts.memory, invocationMs: opts.durationMs, prices,
      });
      print(opts, estimate, () => [
        `query ${estimate.query}: ${opts.rate} records/s on ${opts.shards} shard(s), ${opts.keys} keys, `
          + `${estimate.perBatch.records} records per batch (prices: ${estimate.prices})`,
        table(['component', 'per month', 'unit', 'USD'], estimate.lines.map((l) => [l.component, l.quantity.toPrecision(4), l.unit, usd(l.usd)])),
        `total ${usd(estimate.totalUsd)} per month`,
        `per batch: ${estimate.perBatch.checkpointWriteUnits} checkpoint WCU, ${estimate.perBatch.stateWriteUnits.toFixed(2)} state WCU, `
          + `${estimate.perBatch.sinkWriteUnits} sink WCU, ${estimate.perBatch.checkpointReadUnits} RCU, ${estimate.perBatch.outputRows} output rows`,
      ].join('\n'));
    });
}
