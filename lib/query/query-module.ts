/**
 * What a query module is, for every tool that loads one (`sluice dev`, `sluice explain`, the CDK
 * construct): a module whose DEFAULT export is a query definition (`export default defineQuery(...)`).
 * One rule and one set of messages; each tool only chooses how to load the file.
 */
import { existsSync, statSync } from 'node:fs';
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

/** A module that threw while loading (syntax error, missing import): the file, then the cause. */
export function queryModuleLoadError(path: string, cause: unknown): IllegalArgumentError {
  const message = cause instanceof Error ? cause.message : String(cause);
  const code = (cause as { code?: unknown } | undefined)?.code;
  const cjs = code === 'ERR_REQUIRE_CYCLE_MODULE' || code === 'ERR_REQUIRE_ESM' || code === 'ERR_REQUIRE_ASYNC_MODULE';
  return new IllegalArgumentError(`query module ${path} failed to load: ${message}`, {
    code: 'QUERY_MODULE_LOAD_FAILED',
    cause,
    hint: cjs
      ? 'it was loaded as CommonJS, and Sluice is ESM: name it .mts, or put it under a package.json with "type": "module".'
      : 'fix that error in the module or in what it imports (`sluice explain <module>` loads it the same way, quickly).',
  });
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
