/**
 * The layering of lib/ (.dependency-cruiser.cjs): imports point down the layers, no cycles, no AWS
 * SDK in the engine core, cdk/ sees only the deployment contract. Checked on the real tree, and on
 * a small tree with one violation of each kind, so the check itself is known to bite.
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, type ICruiseResult, type IConfiguration } from 'dependency-cruiser';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const config = createRequire(import.meta.url)(join(ROOT, '.dependency-cruiser.cjs')) as IConfiguration;

async function violations(baseDir: string, paths: string[]): Promise<string[]> {
  const { output } = await cruise(paths, {
    ...config.options,
    ruleSet: { forbidden: config.forbidden },
    validate: true,
    baseDir,
    outputType: 'json',
    tsConfig: undefined,
  }, { extensions: ['.ts', '.js', '.cjs', '.mjs'], extensionAlias: { '.js': ['.ts', '.js'] } });
  const result = (typeof output === 'string' ? JSON.parse(output) : output) as ICruiseResult;
  return result.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`);
}

describe('layering', () => {
  it('lib, cdk, bin and functions break no rule', async () => {
    expect(await violations(ROOT, ['lib', 'cdk', 'bin', 'functions'])).toEqual([]);
  }, 120_000);

  const fixture = mkdtempSync(join(tmpdir(), 'sluice-layering-'));
  afterAll(() => rmSync(fixture, { recursive: true, force: true }));

  it('catches an upward import, a cycle, lib importing cdk, and cdk reaching into the engine', async () => {
    const files: Record<string, string> = {
      'lib/plan/node.ts': "import { run } from '../runtime/runner.js';\nexport const node = run;\n",
      'lib/runtime/runner.ts': "import { node } from '../plan/node.js';\nexport const run = () => node;\n",
      'lib/execution/exec.ts': "import { SluiceQuery } from '../../cdk/construct.js';\nexport const exec = SluiceQuery;\n",
      'cdk/construct.ts': "import { run } from '../lib/runtime/runner.js';\nexport const SluiceQuery = run;\n",
    };
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(fixture, path)), { recursive: true });
      writeFileSync(join(fixture, path), text);
    }
    const found = await violations(fixture, ['lib', 'cdk']);
    expect(found).toEqual(expect.arrayContaining([
      'no-upward-from-plan-sql: lib/plan/node.ts -> lib/runtime/runner.ts',
      'lib-imports-no-cdk-or-cli: lib/execution/exec.ts -> cdk/construct.ts',
      'cdk-imports-the-deployment-contract-only: cdk/construct.ts -> lib/runtime/runner.ts',
    ]));
    expect(found.some((v) => v.startsWith('no-circular: lib/'))).toBe(true);
  }, 120_000);
});
