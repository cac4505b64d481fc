/**
 * The package's public surface, from package.json "exports": every subpath has its source (the
 * sluice-source condition), its build output and declarations; no two subpaths export the same
 * name, values or types (a user importing from two of them never meets two different `X`s).
 * The packed tarball is checked end to end in packed-app.integration.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const REPO = resolve(import.meta.dirname, '../..');
type Target = { 'sluice-source': string; types: string; default: string };
const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
  exports: Record<string, Target | string>; bin: Record<string, string>; files: string[]; private?: boolean;
  peerDependencies: Record<string, string>; dependencies: Record<string, string>;
};
const subpaths = Object.entries(pkg.exports).filter((e): e is [string, Target] => typeof e[1] === 'object');

/** Every name a module exports (values and types), through the type checker. */
function exportedNames(): Map<string, string[]> {
  const files = subpaths.map(([, t]) => join(REPO, t['sluice-source']));
  const program = ts.createProgram(files, { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noEmit: true, skipLibCheck: true, customConditions: ['sluice-source'] });
  const checker = program.getTypeChecker();
  const names = new Map<string, string[]>();
  for (const [subpath, target] of subpaths) {
    const source = program.getSourceFile(join(REPO, target['sluice-source']))!;
    const symbol = checker.getSymbolAtLocation(source)!;
    for (const exported of checker.getExportsOfModule(symbol)) {
      names.set(exported.name, [...(names.get(exported.name) ?? []), subpath]);
    }
  }
  return names;
}

describe('package.json exports', () => {
  it('sluice, sluice/cdk, sluice/testing, sluice/lambda; each with sources, types and JavaScript under dist/', () => {
    expect(subpaths.map(([p]) => p)).toEqual(['.', './cdk', './testing', './lambda']);
    for (const [, target] of subpaths) {
      // Condition order matters: the first matching condition wins.
      expect(Object.keys(target)).toEqual(['sluice-source', 'types', 'default']);
      expect(target.types).toMatch(/^\.\/dist\/.*\.d\.ts$/);
      expect(target.default).toBe(target.types.replace(/\.d\.ts$/, '.js'));
      expect(target.types.replace('./dist/', './').replace(/\.d\.ts$/, '.ts')).toBe(target['sluice-source']);
    }
    expect(pkg.private).toBeUndefined();
    expect(pkg.files).toEqual(['dist', 'README.md']);
    expect(pkg.bin).toEqual({ sluice: 'dist/bin/sluice.js' });
    expect(Object.keys(pkg.peerDependencies)).toEqual(expect.arrayContaining(['aws-cdk-lib', 'constructs']));
    expect(Object.keys(pkg.dependencies)).toEqual(expect.arrayContaining(['esbuild', 'tsx']));
  });

  it('no name is exported by two subpaths (values and types)', () => {
    const names = exportedNames();
    const shared = [...names].filter(([, paths]) => paths.length > 1).map(([name, paths]) => `${name}: ${paths.join(', ')}`);
    expect(shared).toEqual([]);
    // The runtime handle keeps Spark's name; the construct has its own.
    expect(names.get('StreamingQuery')).toEqual(['.']);
    expect(names.get('SluiceQuery')).toEqual(['./cdk']);
    expect(names.get('defineQuery')).toEqual(['.']);
    expect(names.get('testStream')).toEqual(['./testing']);
    expect(names.get('createKinesisTriggerHandler')).toEqual(['./lambda']);
  });
});
