/** One price table behind every dollar figure: the CLI's estimate, the dashboard, the benchmark. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CURRENT_PRICES, PRICES_2026_12_US_EAST_1, unitPrices } from '../../lib/core/price-table.js';
import { DEFAULT_DASHBOARD_PRICES } from '../../cdk/dashboard.js';
import { PRICES as BENCH_PRICES } from '../../bench/e2e-cost.bench.js';
import { readPrices } from '../../bin/commands/cost.js';
import { estimateMonthlyCost } from '../../lib/aws/cost-estimate.js';
import defaultQuery from '../../lib/local/dev/default-query.js';

describe('the price table', () => {
  it('prices Lambda on arm64, the architecture the construct deploys', () => {
    expect(CURRENT_PRICES).toBe(PRICES_2026_12_US_EAST_1);
    expect(CURRENT_PRICES.lambdaPerGbSecond).toBe(0.0000133334);
  });

  it('the dashboard and the benchmark use its prices', () => {
    const unit = unitPrices(CURRENT_PRICES);
    expect(DEFAULT_DASHBOARD_PRICES).toEqual({
      asOf: CURRENT_PRICES.version, dynamoDbWriteUnit: unit.dynamoDbWriteUnit, dynamoDbReadUnit: unit.dynamoDbReadUnit,
      s3Put: unit.s3Put, lambdaGbSecond: 0.0000133334, lambdaRequest: unit.lambdaRequest,
    });
    expect(BENCH_PRICES).toMatchObject({
      writeUnit: 0.625 / 1e6, readUnit: 0.125 / 1e6, s3Put: 0.005 / 1000, s3Get: 0.0004 / 1000, lambdaGbSecond: 0.0000133334, lambdaRequest: 0.2 / 1e6,
    });
  });

  it('sluice cost prices Lambda GB-seconds at the table\'s price, and --prices overrides it', async () => {
    const input = { recordsPerSecond: 100, memoryMb: 1024, invocationMs: 200 };
    const compute = (e: Awaited<ReturnType<typeof estimateMonthlyCost>>) => e.lines.find((l) => l.component === 'Lambda compute')!;
    const standard = compute(await estimateMonthlyCost(defaultQuery, input));
    expect(standard.usd).toBeCloseTo(standard.quantity * 0.0000133334, 9);

    const dir = mkdtempSync(join(tmpdir(), 'sluice-prices-'));
    const file = join(dir, 'prices.json');
    writeFileSync(file, JSON.stringify({ lambdaPerGbSecond: 0.0000166667 }));
    const overridden = readPrices(file);
    expect(overridden).toEqual({ ...CURRENT_PRICES, lambdaPerGbSecond: 0.0000166667, version: `${CURRENT_PRICES.version} with ${file}` });
    const x86 = compute(await estimateMonthlyCost(defaultQuery, { ...input, prices: overridden }));
    expect(x86.usd).toBeCloseTo(x86.quantity * 0.0000166667, 9);

    writeFileSync(file, JSON.stringify({ lambdaPerGbSecondX86: 1 }));
    expect(() => readPrices(file)).toThrow(/--prices: unknown price lambdaPerGbSecondX86/);
  });
});
