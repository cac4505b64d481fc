/** `sluice cost <query-module> --rate N/s`: a monthly estimate before deploying (lib/aws/cost-estimate.ts). */
import { readFileSync } from 'node:fs';
import { type Command, InvalidArgumentError } from 'commander';
import { DEFAULT_MATCH_RATE, estimateQueryCost } from '../../lib/aws/multi-source-cost.js';
import { CURRENT_PRICES, type PriceTable } from '../../lib/core/price-table.js';
import { importQueryModule } from '../../lib/query/query-module.js';
import { isMultiSource, sourcesOf, type QueryDefinition } from '../../lib/query/query-definition.js';
import { positiveInt, print, table } from './common.js';

/** `1000/s`, `60000/min`, `3600000/h` or a bare number (per second). */
export function parseRate(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(?:\/(s|sec|second|m|min|minute|h|hour))?$/.exec(value.trim());
  if (!m || Number(m[1]) <= 0) throw new InvalidArgumentError('--rate must be records per second, e.g. 1000/s (or N/min, N/h).');
  const per = { s: 1, sec: 1, second: 1, m: 60, min: 60, minute: 60, h: 3600, hour: 3600 }[(m[2] ?? 's') as 's'];
  return Number(m[1]) / per;
}

/** `--rate 1000/s` (one stream) or `--rate orders=1000/s,payments=200/s` (a rate per source). */
export type RateOption = number | Readonly<Record<string, number>>;

export function parseRateOption(value: string): RateOption {
  if (!value.includes('=')) return parseRate(value);
  const rates: Record<string, number> = {};
  for (const part of value.split(',')) {
    const [name, rate, ...rest] = part.split('=');
    if (!name?.trim() || rate === undefined || rest.length > 0) throw new InvalidArgumentError(`--rate: '${part}' is not source=N/s (e.g. orders=1000/s,payments=200/s).`);
    if (name.trim() in rates) throw new InvalidArgumentError(`--rate: source '${name.trim()}' is given twice.`);
    rates[name.trim()] = parseRate(rate);
  }
  return rates;
}

/** The rate of each of the query's sources, or why the option does not fit the query (a usage error). */
export function ratesFor(definition: QueryDefinition, rate: RateOption): { rates: Record<string, number> } | { error: string } {
  const names = sourcesOf(definition).map((s) => s.name);
  if (typeof rate === 'number') {
    if (names.length === 1) return { rates: { [names[0]!]: rate } };
    return { error: `--rate: query '${definition.name}' reads ${names.length} streams; give each its rate, e.g. --rate ${names.map((n) => `${n}=1000/s`).join(',')}.` };
  }
  if (!isMultiSource(definition)) {
    const given = Object.values(rate);
    if (given.length === 1) return { rates: { [names[0]!]: given[0]! } };
    return { error: `--rate: query '${definition.name}' reads one stream; give one rate, e.g. --rate 1000/s.` };
  }
  const unknown = Object.keys(rate).filter((n) => !names.includes(n));
  if (unknown.length > 0) return { error: `--rate: query '${definition.name}' has no source ${unknown.map((n) => `'${n}'`).join(', ')} (its sources: ${names.join(', ')}).` };
  const missing = names.filter((n) => !(n in rate));
  if (missing.length > 0) return { error: `--rate: no rate for source${missing.length > 1 ? 's' : ''} ${missing.map((n) => `'${n}'`).join(', ')} of query '${definition.name}' (give one per source: ${names.map((n) => `${n}=N/s`).join(',')}).` };
  return { rates: { ...rate } };
}

/** A share from 0 to 1 (`--match-rate 0.8`). */
export function shareOf(flag: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1) throw new InvalidArgumentError(`${flag} must be a share from 0 to 1, e.g. 0.8.`);
    return n;
  };
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

/** Three significant digits, without trailing zeros. */
const fig = (n: number): string => String(Number(n.toPrecision(3)));
const usd = (n: number): string => (n >= 0.01 || n === 0 ? `$${n.toFixed(2)}` : `$${n.toPrecision(2)}`);

export function registerCostCommand(program: Command): void {
  program
    .command('cost')
    .description('a monthly cost estimate for a query module at a given input rate, by component '
      + '(Lambda, DynamoDB state/checkpoint/sink, S3, Kinesis, EventBridge)')
    .argument('<query-module>', 'a module whose default export is a StreamingQueryDefinition')
    .requiredOption('--rate <n/s>', 'input records per second (N/s, N/min or N/h); per source for a query over several streams: orders=N/s,payments=N/s', parseRateOption)
    .option('--keys <n>', 'distinct partition-key values (e.g. stores)', positiveInt('--keys'), 100)
    .option('--shards <n>', 'Kinesis shards', positiveInt('--shards'), 1)
    .option('--internal-shards <n>', 'shards of each internal stream of a repartitioned query (default: --shards)', positiveInt('--internal-shards'))
    .option('--batch-size <n>', 'the event source mapping\'s batch size (the construct\'s default is 100)', positiveInt('--batch-size'), 100)
    .option('--memory <mb>', 'function memory', positiveInt('--memory'), 1024)
    .option('--duration-ms <n>', 'average Kinesis-trigger invocation duration', positiveInt('--duration-ms'), 200)
    .option('--match-rate <share>', `a join over several streams: the share of each later stream's rows whose join key matches a row of the first (0-1, default ${DEFAULT_MATCH_RATE})`, shareOf('--match-rate'))
    .option('--prices <file>', `JSON overriding prices of the table (${CURRENT_PRICES.version})`)
    .option('--json', 'print JSON instead of text')
    .action(async (queryModule: string, opts: {
      rate: RateOption; matchRate?: number; keys: number; shards: number; internalShards?: number; batchSize: number; memory: number; durationMs: number; prices?: string; json?: boolean;
    }, command: Command) => {
      const prices = opts.prices ? readPrices(opts.prices) : CURRENT_PRICES;
      const definition = await importQueryModule(queryModule);
      const resolved = ratesFor(definition, opts.rate);
      if ('error' in resolved) command.error(resolved.error, { exitCode: 2, code: 'sluice.cost.rate' });
      const { rates } = resolved as { rates: Record<string, number> };
      const common = {
        keys: opts.keys, shards: opts.shards, internalShards: opts.internalShards, batchSize: opts.batchSize,
        memoryMb: opts.memory, invocationMs: opts.durationMs, prices,
      };
      const estimate = await estimateQueryCost(definition, { ...common, sourceRates: rates, ...(opts.matchRate !== undefined ? { matchRate: opts.matchRate } : {}) });
      const rateText = Object.entries(rates).map(([n, r]) => (isMultiSource(definition) ? `${n} ${r}` : `${r}`)).join(', ');
      print(opts, estimate, () => [
        `query ${estimate.query}: ${rateText} records/s on ${opts.shards} shard(s), ${opts.keys} keys, `
          + `${fig(estimate.perBatch.records)} records per batch (prices: ${estimate.prices})`,
        table(['stage', 'component', 'per month', 'unit', 'USD'], estimate.lines.map((l) => [String(l.stage), l.component, l.quantity.toPrecision(4), l.unit, usd(l.usd)])),
        `total ${usd(estimate.totalUsd)} per month`,
        `per batch: ${fig(estimate.perBatch.checkpointWriteUnits)} checkpoint WCU, ${estimate.perBatch.stateWriteUnits.toFixed(2)} state WCU, `
          + `${fig(estimate.perBatch.sinkWriteUnits)} sink WCU, ${fig(estimate.perBatch.checkpointReadUnits)} RCU, ${fig(estimate.perBatch.outputRows)} output rows`,
        ...estimate.hops.map((h) => `hop ${h.hop}: ${h.recordsPerSecond.toPrecision(3)} records/s on ${h.internalShards} internal shard(s), `
          + `${fig(h.perBatch.records)} records per stage ${h.hop + 1} invocation, ${fig(h.perBatch.stateWriteUnits)} state WCU, ${fig(h.perBatch.sinkWriteUnits)} sink WCU, ${fig(h.perBatch.outputRows)} output rows`),
        ...(estimate.assumptions ?? []).map((a) => `assumed: ${a}`),
        ...(estimate.notEstimated?.length ? [`not estimated (left out of the total): ${estimate.notEstimated.join('; ')}`] : []),
      ].join('\n'));
    });
}
