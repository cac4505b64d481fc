/**
 * Where the construct finds the user's project and writes what it generates at synth time.
 *
 * The project is found the way `NodejsFunction` finds it, but from the query module rather than
 * the working directory: the nearest directory above the module holding a lockfile is the project
 * root (props `projectRoot` and `depsLockFilePath` override). Generated files (the Lambda entries)
 * go under the app's output directory (`cdk.out`; `<projectRoot>/cdk.out` when that is outside the
 * project, see entriesDirFor), never next to the user's sources or into `node_modules`.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The lockfiles NodejsFunction knows (it picks the package manager from the file's name). */
const LOCK_FILES = ['package-lock.json', 'yarn.lock', 'pnpm-lock.yaml', 'bun.lockb', 'bun.lock'];

export interface ProjectPaths {
  readonly projectRoot: string;
  readonly depsLockFilePath: string;
}

/** The project a query module belongs to; `error` builds the construct's error for a message. */
export function findProject(
  queryModulePath: string,
  given: { projectRoot?: string; depsLockFilePath?: string },
  error: (message: string) => Error,
): ProjectPaths {
  const moduleUnder = (projectRoot: string): void => {
    if (isOutside(projectRoot, queryModulePath)) {
      throw error(`queryModule ${queryModulePath} is not under projectRoot ${projectRoot}; the functions bundle it from there.`);
    }
  };
  if (given.depsLockFilePath !== undefined) {
    const depsLockFilePath = resolve(given.depsLockFilePath);
    if (!existsSync(depsLockFilePath)) throw error(`depsLockFilePath ${depsLockFilePath} does not exist.`);
    const projectRoot = resolve(given.projectRoot ?? dirname(depsLockFilePath));
    if (isOutside(projectRoot, depsLockFilePath)) throw error(`depsLockFilePath ${depsLockFilePath} is not under projectRoot ${projectRoot}.`);
    moduleUnder(projectRoot);
    return { projectRoot, depsLockFilePath };
  }
  if (given.projectRoot !== undefined) {
    // A lockfile above the given root would put the dependencies outside the project NodejsFunction bundles.
    const projectRoot = resolve(given.projectRoot);
    moduleUnder(projectRoot);
    const lockFile = lockFileIn(projectRoot);
    if (!lockFile) {
      throw error(`no lockfile (${LOCK_FILES.join(', ')}) in projectRoot ${projectRoot}. Install the project's dependencies there `
        + '(npm install writes package-lock.json), or set depsLockFilePath to a lockfile under projectRoot.');
    }
    return { projectRoot, depsLockFilePath: lockFile };
  }
  for (let dir = dirname(queryModulePath); ; dir = dirname(dir)) {
    const lockFile = lockFileIn(dir);
    if (lockFile) return { projectRoot: dir, depsLockFilePath: lockFile };
    if (dirname(dir) === dir) break;
  }
  throw error(`no lockfile (${LOCK_FILES.join(', ')}) in ${dirname(queryModulePath)} or any directory above it, so the project the query module `
    + `belongs to is unknown. Install the project's dependencies (npm install writes package-lock.json), or set depsLockFilePath.`);
}

function lockFileIn(dir: string): string | undefined {
  return LOCK_FILES.map((name) => join(dir, name)).find((path) => existsSync(path));
}

/**
 * The directory for the generated entries of one query module: under the app's output directory
 * when that is inside the project (as `cdk.out` is), because NodejsFunction bundles only entries
 * under its project root; else under `<projectRoot>/cdk.out`. The path depends on the module only,
 * so two stacks deploying one module share its entries.
 */
export function entriesDirFor(queryModulePath: string, projectRoot: string, appOutdir: string): string {
  const digest = createHash('sha256').update(queryModulePath).digest('hex').slice(0, 12);
  const base = queryModulePath.replace(/\\/g, '/').split('/').pop()!.replace(/\.[cm]?[jt]sx?$/, '').replace(/[^A-Za-z0-9_-]/g, '_');
  const outdir = isOutside(projectRoot, resolve(appOutdir)) ? join(projectRoot, 'cdk.out') : resolve(appOutdir);
  return join(outdir, 'sluice-entries', `${base}-${digest}`);
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

/**
 * Running from sluice's TypeScript sources (its repository, under tsx or vitest) rather than the
 * compiled package: bundles then resolve `sluice` to those sources too (the `sluice-source` export
 * condition), so a query and the engine that checks it are one copy of the code.
 */
export const FROM_SOURCES = import.meta.url.endsWith('.ts');
export const SOURCE_CONDITIONS: string[] = FROM_SOURCES ? ['sluice-source'] : [];

/** The directory of the sluice package this construct belongs to (its package.json). */
export const SLUICE_PACKAGE_DIR = findSluicePackage(dirname(fileURLToPath(import.meta.url)));

function findSluicePackage(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'sluice') return dir;
    if (dirname(dir) === dir) throw new Error(`sluice's package.json not found above ${from}`);
  }
}

function isOutside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '..' || rel.startsWith(`..${'/'}`) || rel.startsWith('..\\') || isAbsolute(rel);
}
