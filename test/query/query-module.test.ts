/**
 * One rule for a query module, whichever tool loads it: `sluice dev`/`sluice explain` import it
 * (importQueryModule), the construct compiles it at synth (cdk/query-module.ts). The same bad
 * modules get the same messages from both.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadQueryModule } from '../../cdk/query-module.js';
import { importQueryModule } from '../../lib/query/query-module.js';

const REPO = resolve(import.meta.dirname, '../..');
const fixture = (name: string): string => join(REPO, 'test/cdk/fixtures', name);

async function cliError(path: string): Promise<Error & { code?: string }> {
  try {
    await importQueryModule(path);
  } catch (error) {
    return error as Error & { code?: string };
  }
  throw new Error(`expected ${path} to be refused`);
}

function synthError(path: string): Error & { code?: string } {
  try {
    loadQueryModule(path, REPO);
  } catch (error) {
    return error as Error & { code?: string };
  }
  throw new Error(`expected ${path} to be refused`);
}

describe('loading a query module: one rule for the CLI and the construct', () => {
  it('both load a good module to the same definition', async () => {
    const viaCli = await importQueryModule(join(REPO, 'examples/hourly-sales-live.ts'));
    const viaSynth = loadQueryModule(join(REPO, 'examples/hourly-sales-live.ts'), REPO).definition;
    expect(viaSynth.name).toBe(viaCli.name);
    expect(viaSynth.sink).toEqual(viaCli.sink);
  });

  it.each([
    ['no-default-export.ts', 'NOT_A_QUERY_MODULE', /has no default export \(named exports: name\)\.\n {2}How to fix: default-export the query/],
    ['default-export-not-a-query.ts', 'NOT_A_QUERY_MODULE', /has a default export that is a function \(hourlySalesQuery\); call it and export its result, not a query definition/],
    ['throws-on-load.ts', 'QUERY_MODULE_LOAD_FAILED', /throws-on-load\.ts failed to load: the query configuration file is missing\n {2}at \/.*\/throws-on-load\.ts:4:7, line 4: throw new Error\('the query configuration file is missing'\);\n/],
    ['throws-in-helper.ts', 'QUERY_MODULE_LOAD_FAILED', /throws-in-helper\.ts failed to load: TABLE_NAME is not set\n {2}at \/.*\/throws-in-helper\.ts:5:9, line 5: throw new Error\('TABLE_NAME is not set'\);\n/],
  ])('%s: %s, the same message from both', async (file, code, message) => {
    const [cli, synth] = [await cliError(fixture(file)), synthError(fixture(file))];
    expect([cli.code, synth.code]).toEqual([code, code]);
    expect(cli.message).toMatch(message);
    expect(synth.message).toBe(cli.message);
  });

  it('a syntax error: the compiler names the line, and the message shows its code', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-broken-'));
    try {
      writeFileSync(join(dir, 'broken.mts'), "const table = 'sales';\nconst delay = ;\nexport default table;\n");
      const error = await cliError(join(dir, 'broken.mts'));
      expect(error.code).toBe('QUERY_MODULE_LOAD_FAILED');
      expect(error.message).toMatch(/\n {2}at \/.*\/broken\.mts:2:\d+, line 2: const delay = ;\n/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a missing file: named, with where it was looked for', async () => {
    const error = await cliError('no/such/query.ts');
    expect(error.code).toBe('QUERY_MODULE_NOT_FOUND');
    expect(error.message).toContain(`query module 'no/such/query.ts' not found (resolved to ${join(process.cwd(), 'no/such/query.ts')})`);
  });
});
