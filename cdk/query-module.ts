/**
 * Loads a query module at synth time, synchronously (construct constructors cannot await), and
 * validates its definition with the engine's own analyzer.
 *
 * The module is compiled with esbuild into one CommonJS program together with sluice's
 * `validateQuery`, both resolved from the module's project: the definition, the DataFrame classes
 * its transform uses and the analyzer that checks it are one copy of the engine, exactly as in the
 * Lambda bundle. (Importing the module through a second loader would give the query a different
 * copy of the engine's classes than the analyzer's.) A package is resolved from the file that
 * imports it, as Node would: sluice's own dependencies (zod) are compiled in from sluice's
 * location, whatever versions the project holds; the project's other packages stay external and
 * are required from the project. Nothing is written to disk.
 */
import { buildSync, type Message } from 'esbuild';
import { readFileSync } from 'node:fs';
import { createRequire, SourceMap } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import type { QueryDefinition } from '../lib/query/query-definition.js';
import type { ValidatedQuery, ValidateOptions } from '../lib/query/validate-query.js';
import { queryDefinitionOf, queryModuleLoadError, type ModuleLocation } from '../lib/query/query-module.js';
import { SLUICE_PACKAGE_DIR, SOURCE_CONDITIONS, importSpecifier } from './project.js';

export interface LoadedQueryModule {
  /** Absolute path of the module. */
  readonly path: string;
  /** Its default export. */
  readonly definition: QueryDefinition;
  /** The engine's `validateQuery`, from the same compiled copy of the engine as the definition. */
  readonly validate: (options: ValidateOptions) => ValidatedQuery;
}

export function loadQueryModule(queryModulePath: string, projectRoot: string): LoadedQueryModule {
  let code: string;
  let sourceMap: SourceMap | null = null;
  try {
    const built = buildSync({
      stdin: {
        contents: [
          `export * as module from ${importSpecifier(queryModulePath)};`,
          "export { validateQuery } from 'sluice';",
        ].join('\n'),
        resolveDir: dirname(queryModulePath),
        sourcefile: 'sluice-synth-loader.ts',
        loader: 'ts',
      },
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node20',
      conditions: SOURCE_CONDITIONS,
      external: externalPackages(projectRoot),
      write: false,
      logLevel: 'silent',
      // Only to map a load-time error to the module's line (never written).
      sourcemap: 'external',
      outfile: join(dirname(queryModulePath), 'sluice-synth-loader.js'),
    });
    code = built.outputFiles.find((f) => f.path.endsWith('.js'))!.text;
    const map = built.outputFiles.find((f) => f.path.endsWith('.map'));
    sourceMap = map ? new SourceMap(JSON.parse(map.text) as ConstructorParameters<typeof SourceMap>[0]) : null;
  } catch (error) {
    const errors = (error as { errors?: Message[] }).errors;
    const detail = errors?.length ? errors.map(formatMessage).join('\n') : error;
    throw queryModuleLoadError(queryModulePath, errors?.length ? new Error(String(detail)) : error);
  }
  let loaded: { module: Record<string, unknown>; validateQuery: (d: QueryDefinition, o: ValidateOptions) => ValidatedQuery };
  try {
    loaded = evaluateCommonJs(code, queryModulePath) as typeof loaded;
  } catch (error) {
    throw queryModuleLoadError(queryModulePath, error, sourceMap ? locationInBundle(error, sourceMap, queryModulePath) : null);
  }
  const definition = queryDefinitionOf(loaded.module, queryModulePath);
  return { path: queryModulePath, definition, validate: (options) => loaded.validateQuery(definition, options) };
}

/** Lines V8 puts before a `new Function` body: `function anonymous(<params>\n) {\n`. */
const FUNCTION_PREAMBLE_LINES = 2;

/** The module's line of the innermost bundle frame that maps into it (the CLI's loader gives this from its own stack). */
function locationInBundle(error: unknown, map: SourceMap, queryModulePath: string): ModuleLocation | null {
  const stack = (error as { stack?: unknown } | undefined)?.stack;
  if (typeof stack !== 'string') return null;
  const mapDir = dirname(queryModulePath);
  for (const frame of stack.split('\n').slice(1)) {
    const match = /<anonymous>:(\d+):(\d+)\)?$/.exec(frame);
    if (!match) continue;
    const entry = map.findEntry(Number(match[1]) - 1 - FUNCTION_PREAMBLE_LINES, Number(match[2]) - 1) as
      { originalSource?: string; originalLine?: number; originalColumn?: number };
    if (entry.originalSource === undefined || resolve(mapDir, entry.originalSource.replace(/^file:\/\//, '')) !== queryModulePath) continue;
    return { line: entry.originalLine! + 1, column: entry.originalColumn! + 1 };
  }
  return null;
}

/** Runs a CommonJS program whose `require` looks in the query module's project, then in sluice's. */
function evaluateCommonJs(code: string, queryModulePath: string): unknown {
  const fromProject = createRequire(queryModulePath);
  const fromSluice = createRequire(join(SLUICE_PACKAGE_DIR, 'package.json'));
  const requireModule = (id: string): unknown => {
    try {
      return fromProject(id);
    } catch (error) {
      if ((error as { code?: string }).code !== 'MODULE_NOT_FOUND') throw error;
      return fromSluice(id);
    }
  };
  const module = { exports: {} as unknown };
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- the program esbuild just compiled
  const run = new Function('exports', 'require', 'module', '__filename', '__dirname', code) as
    (e: unknown, r: unknown, m: unknown, f: string, d: string) => void;
  run(module.exports, requireModule, module, queryModulePath, dirname(queryModulePath));
  return module.exports;
}

/**
 * The project's packages, required from the project when the program runs; except those sluice
 * itself depends on, which are compiled in and so resolved from the file that imports them, as
 * Node would: sluice's code gets its own zod whatever version the project holds. (esbuild's
 * synchronous API takes no plugin that could decide by importer.)
 */
function externalPackages(projectRoot: string): string[] {
  const sluiceDependencies = new Set(Object.keys(manifestOf(SLUICE_PACKAGE_DIR).dependencies ?? {}));
  const project = manifestOf(projectRoot);
  const names = new Set<string>();
  for (const field of ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies'] as const) {
    for (const name of Object.keys(project[field] ?? {})) {
      if (name !== 'sluice' && !sluiceDependencies.has(name)) names.add(name);
    }
  }
  return [...names].flatMap((name) => [name, `${name}/*`]);
}

type Manifest = Partial<Record<'dependencies' | 'devDependencies' | 'peerDependencies' | 'optionalDependencies', Record<string, string>>>;

function manifestOf(dir: string): Manifest {
  try {
    return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;
  } catch {
    return {};
  }
}

function formatMessage(message: Message): string {
  const where = message.location ? `${message.location.file}:${message.location.line}:${message.location.column}: ` : '';
  return `${where}${message.text}`;
}
