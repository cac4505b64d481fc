/**
 * Where the construct writes what it generates at synth time: small TypeScript entry files for
 * the Lambda bundles and the compiled query loader. They live under `.sluice/cdk-build/` in the
 * project (git-ignored with the rest of `.sluice/`), inside the project so that esbuild and Node
 * resolve `node_modules` from them, and at paths derived from the query module's path only, so
 * two stacks (or two test apps) deploying the same module share one entry and one bundle.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root: the directory above `cdk/`, which holds package-lock.json. */
export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export const BUILD_ROOT = join(PROJECT_ROOT, '.sluice', 'cdk-build');

/** A directory for everything generated from one query module. */
export function buildDirFor(queryModulePath: string): string {
  const digest = createHash('sha256').update(queryModulePath).digest('hex').slice(0, 12);
  const base = queryModulePath.replace(/\\/g, '/').split('/').pop()!.replace(/\.[cm]?[jt]sx?$/, '').replace(/[^A-Za-z0-9_-]/g, '_');
  return join(BUILD_ROOT, `${base}-${digest}`);
}

/**
 * Writes `contents` to `path` unless it already holds exactly that. The write goes to a temporary
 * file renamed into place, so a concurrent synth (parallel test workers) never reads half a file.
 */
export function writeFileIfChanged(path: string, contents: string): void {
  if (existsSync(path) && readFileSync(path, 'utf8') === contents) return;
  mkdirSync(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.${Date.now()}.tmp`;
  writeFileSync(temporary, contents);
  renameSync(temporary, path);
}

/** An import specifier for an absolute path, as esbuild and Node accept it on every platform. */
export function importSpecifier(absolutePath: string): string {
  return JSON.stringify(absolutePath.replace(/\\/g, '/'));
}
