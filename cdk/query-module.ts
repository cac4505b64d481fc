/**
 * Loads a query module at synth time, synchronously (construct constructors cannot await), and
 * validates its definition with the engine's own analyzer.
 *
 * The module is compiled with esbuild into one CommonJS file together with `validateQuery`, and
 * that file is required: the definition, the DataFrame classes its transform uses and the analyzer
 * that checks it come from one copy of the engine, exactly as in the Lambda bundle. (Importing the
 * module through a second loader would give the query a different copy of the engine's classes
 * than the analyzer's.) Works the same under tsx (`cdk synth`), vitest and plain Node.
 */
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { buildSync } from 'esbuild';
import type { StreamingQueryDefinition } from '../lib/query/query-definition.js';
import type { ValidatedQuery, ValidateOptions } from '../lib/query/validate-query.js';
import { PROJECT_ROOT, buildDirFor, importSpecifier, writeFileIfChanged } from './build-dir.js';

export interface LoadedQueryModule {
  /** Absolute path of the module. */
  readonly path: string;
  /** Its default export. */
  readonly definition: StreamingQueryDefinition;
  /** The engine's `validateQuery`, from the same compiled copy of the engine as the definition. */
  readonly validate: (options: ValidateOptions) => ValidatedQuery;
}

const VALIDATE_QUERY_MODULE = join(PROJECT_ROOT, 'lib', 'query', 'validate-query.ts');
const requireHere = createRequire(import.meta.url);

/** Resolves a query module path: absolute, or relative to the current directory (where `cdk` runs). */
export function resolveQueryModule(queryModule: string): string {
  const path = isAbsolute(queryModule) ? queryModule : resolve(process.cwd(), queryModule);
  if (!existsSync(path)) {
    throw new Error(`queryModule '${queryModule}' does not exist (resolved to ${path}); `
      + 'give a path, absolute or relative to the directory cdk runs in, to a module whose default export is a StreamingQueryDefinition.');
  }
  return path;
}

export function loadQueryModule(queryModulePath: string): LoadedQueryModule {
  const outfile = join(buildDirFor(queryModulePath), 'synth-loader.cjs');
  const built = buildSync({
    stdin: {
      contents: [
        `export { default as definition } from ${importSpecifier(queryModulePath)};`,
        `export { validateQuery } from ${importSpecifier(VALIDATE_QUERY_MODULE)};`,
      ].join('\n'),
      resolveDir: PROJECT_ROOT,
      sourcefile: 'synth-loader.ts',
      loader: 'ts',
    },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    // Packages (zod, ...) are required from node_modules at run time; only project code is compiled.
    packages: 'external',
    write: false,
    logLevel: 'silent',
  });
  const code = built.outputFiles[0]!.text;
  writeFileIfChanged(outfile, code);
  // A changed module is a changed file: drop the cached copy so a watch/re-synth sees the new query.
  delete requireHere.cache[outfile];
  const loaded = requireHere(outfile) as {
    definition?: unknown;
    validateQuery: (definition: StreamingQueryDefinition, options: ValidateOptions) => ValidatedQuery;
  };
  const definition = loaded.definition;
  if (!definition || typeof definition !== 'object') {
    throw new Error(`queryModule ${queryModulePath} has no default export; export the query with \`export default defineQuery({ ... })\`.`);
  }
  const typed = definition as StreamingQueryDefinition;
  return {
    path: queryModulePath,
    definition: typed,
    validate: (options) => loaded.validateQuery(typed, options),
  };
}
