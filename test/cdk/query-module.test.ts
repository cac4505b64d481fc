/**
 * The synth-time loader (cdk/query-module.ts) compiles the user's module together with sluice;
 * sluice's own code must run with sluice's dependencies even when the user's project holds other
 * versions of them (a project on zod 3 must not hand its zod to sluice's `defineQuery`).
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadQueryModule } from '../../cdk/query-module.js';

const REPO = resolve(import.meta.dirname, '../..');

describe('the synth-time loader resolves packages from the file that imports them', () => {
  const project = mkdtempSync(join(tmpdir(), 'sluice-project-'));
  afterAll(() => rmSync(project, { recursive: true, force: true }));

  it("sluice's code gets sluice's zod, not the project's", () => {
    const write = (path: string, text: string): void => {
      mkdirSync(join(project, path, '..'), { recursive: true });
      writeFileSync(join(project, path), text);
    };
    write('package.json', JSON.stringify({ name: 'app', type: 'module', dependencies: { sluice: '*', zod: '3.25.0' } }));
    mkdirSync(join(project, 'node_modules'), { recursive: true });
    symlinkSync(REPO, join(project, 'node_modules', 'sluice'), 'dir');
    // The project's "zod": any use by sluice would fail the load.
    write('node_modules/zod/package.json', JSON.stringify({ name: 'zod', version: '3.25.0', main: 'index.js' }));
    write('node_modules/zod/index.js', "exports.z = new Proxy({}, { get: () => { throw new Error('the project\\'s zod'); } });\nexports.projectZod = true;\n");
    write('query.ts', [
      "import { col, defineQuery } from 'sluice';",
      "export default defineQuery({ name: 'q', source: { schema: 'a long' }, transform: (e) => e.select(col('a')), outputMode: 'append', sink: { kind: 's3-files' } });",
      '',
    ].join('\n'));

    const loaded = loadQueryModule(join(project, 'query.ts'), project);
    expect(loaded.definition.name).toBe('q');
    expect(loaded.validate({ expectedShardCount: 1 }).columns).toEqual(['a']);
  });
});
