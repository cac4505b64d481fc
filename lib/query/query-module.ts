/**
 * What a query module is, for every tool that loads one (`sluice dev`, `sluice explain`, the CDK
 * construct): a module whose DEFAULT export is a query definition (`export default defineQuery(...)`).
 * One rule and one set of messages; each tool only chooses how to load the file.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { QueryDefinition } from './query-definition.js';
import { IllegalArgumentError } from '../errors/sluice-error.js';

const EXPORT_HINT = 'default-export the query: `export default defineQuery({ name, source, transform, outputMode, sink })` '
  + "with `import { defineQuery } from 'sluice'`.";

/** The module's absolute path: `given` absolute, or relative to `base` (the directory the tool runs in). */
export function resolveQueryModulePath(given: string, base: string = process.cwd()): string {
  const path = isAbsolute(given) ? given : resolve(base, given);
  if (!existsSync(path) || !statSync(path).isFile()) {
    throw new IllegalArgumentError(`query module '${given}' not found (resolved to ${path}).`, {
      code: 'QUERY_MODULE_NOT_FOUND',
      hint: `give the path of a .ts/.js module, absolute or relative to ${base}, whose default export is the query.`,
    });
  }
  return path;
}

/** A line and column (1-based) in the query module. */
export interface ModuleLocation {
  readonly line: number;
  readonly column: number;
}

/** Where in `path` the error was raised: the innermost stack frame in that file (the loader maps TypeScript lines). */
export function locationInStack(error: unknown, path: string): ModuleLocation | null {
  const stack = (error as { stack?: unknown } | undefined)?.stack;
  if (typeof stack !== 'string') return null;
  for (const frame of stack.split('\n').slice(1)) {
    const at = frame.lastIndexOf(`${path}:`);
    if (at < 0) continue;
    const match = /^:(\d+):(\d+)/.exec(frame.slice(at + path.length));
    if (match) return { line: Number(match[1]), column: Number(match[2]) };
  }
  // A syntax error has no frame in the module; the compiler's message names it (tsx writes .mts as .ts).
  const stem = path.replace(/\.[cm]?[jt]sx?$/, '').replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const compiled = new RegExp(`${stem}\\.[cm]?[jt]sx?:(\\d+):(\\d+)`).exec(stack);
  return compiled ? { line: Number(compiled[1]), column: Number(compiled[2]) } : null;
}

/**
 * A module that threw while loading (syntax error, missing import, a throw at top level): the
 * file, the cause, and the line of the module it came from with that line's code. `location`
 * defaults to the stack's frame in the module (the CLI's loader); the construct maps its bundle's.
 */
export function queryModuleLoadError(path: string, cause: unknown, location: ModuleLocation | null = locationInStack(cause, path)): IllegalArgumentError {
  const message = cause instanceof Error ? cause.message : String(cause);
  const code = (cause as { code?: unknown } | undefined)?.code;
  const cjs = code === 'ERR_REQUIRE_CYCLE_MODULE' || code === 'ERR_REQUIRE_ESM' || code === 'ERR_REQUIRE_ASYNC_MODULE';
  return new IllegalArgumentError(`query module ${path} failed to load: ${message}${location ? `\n  at ${describeLocation(path, location)}` : ''}`, {
    code: 'QUERY_MODULE_LOAD_FAILED',
    cause,
    hint: cjs
      ? 'it was loaded as CommonJS, and Sluice is ESM: name it .mts, or put it under a package.json with "type": "module".'
      : 'fix that error in the module or in what it imports (`sluice explain <module>` loads it the same way, quickly).',
  });
}

/** `query.ts:7:3, line 7: helper();` (the code of that line, cut if long). */
function describeLocation(path: string, { line, column }: ModuleLocation): string {
  let code = '';
  try {
    code = readFileSync(path, 'utf8').split(/\r?\n/)[line - 1]?.trim() ?? '';
  } catch {
    // The location alone still says where.
  }
  const shown = code.length > 100 ? `${code.slice(0, 100)}...` : code;
  return `${path}:${line}:${column}${shown ? `, line ${line}: ${shown}` : ''}`;
}

/** The definition a loaded module exports, or an error saying what was found and what to export. */
export function queryDefinitionOf(exports: Readonly<Record<string, unknown>>, path: string): QueryDefinition {
  let candidate = exports.default;
  // A module compiled to CommonJS puts the default export one level down.
  if (isObject(candidate) && 'default' in candidate && !('transform' in candidate)) candidate = candidate.default;
  if (isObject(candidate) && typeof candidate.transform === 'function' && typeof candidate.name === 'string') {
    return candidate as unknown as QueryDefinition;
  }
  const named = Object.keys(exports).filter((k) => k !== 'default' && k !== '__esModule');
  const found = candidate === undefined
    ? `no default export${named.length ? ` (named exports: ${named.join(', ')})` : ''}`
    : `a default export that is ${describe(candidate)}, not a query definition`;
  throw new IllegalArgumentError(`query module ${path} has ${found}.`, { code: 'NOT_A_QUERY_MODULE', hint: EXPORT_HINT });
}

/** Imports a query module with the running process's loader (the CLI registers a TypeScript one). */
export async function importQueryModule(given: string, base?: string): Promise<QueryDefinition> {
  const path = resolveQueryModulePath(given, base);
  let exports: Record<string, unknown>;
  try {
    exports = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (error) {
    throw queryModuleLoadError(path, error);
  }
  return queryDefinitionOf(exports, path);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'function') return `a function (${value.name || 'anonymous'}); call it and export its result`;
  if (Array.isArray(value)) return 'an array';
  if (isObject(value)) {
    const keys = Object.keys(value);
    return `an object with ${keys.length ? `keys ${keys.slice(0, 8).join(', ')}` : 'no keys'}`;
  }
  return `a ${typeof value} (${JSON.stringify(value)})`;
}
