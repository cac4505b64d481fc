/**
 * Dependencies between the engine's upper layers point one way: runtime ← api ← query. The
 * runtime never imports the API (no side-effect registration patches a cycle), and neither the
 * runtime nor the API imports the deployable query above them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const LIB = join(import.meta.dirname, '..', '..', 'lib');

/** Every relative import of every .ts file under lib/<folder>, as a lib-relative folder name. */
function importsOf(folder: string): { file: string; target: string }[] {
  const out: { file: string; target: string }[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) {
        const text = readFileSync(path, 'utf8');
        for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'(\.[^']+)'/g)) {
          const target = relative(LIB, join(dir, m[1]!)).split(/[\\/]/)[0]!;
          out.push({ file: relative(LIB, path), target });
        }
      }
    }
  };
  walk(join(LIB, folder));
  return out;
}

describe('layering of runtime, api and query', () => {
  it('lib/runtime imports neither lib/api nor lib/query', () => {
    expect(importsOf('runtime').filter((i) => i.target === 'api' || i.target === 'query')).toEqual([]);
  });

  it('lib/api does not import lib/query', () => {
    expect(importsOf('api').filter((i) => i.target === 'query')).toEqual([]);
  });

  it('lib/query imports no AWS adapter, local tooling or SDK', () => {
    expect(importsOf('query').filter((i) => i.target === 'aws' || i.target === 'local')).toEqual([]);
    for (const { file } of importsOf('query')) {
      expect(readFileSync(join(LIB, file), 'utf8')).not.toMatch(/from '(@aws-sdk|aws-cdk-lib|aws-lambda)/);
    }
  });
});
