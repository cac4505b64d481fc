/**
 * Where static DataFrames come from (`session.read`): objects (files, or S3 objects under a
 * prefix) and key-value tables (DynamoDB). The engine core defines this; lib/aws implements it on
 * S3 and DynamoDB (`awsStaticStorage`), and `localFileStorage` reads the local disk.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';

export interface StoredObject {
  /** The object's key or file path, for messages. */
  readonly key: string;
  readonly bytes: Uint8Array;
}

export interface StaticStorage {
  /**
   * The object at `location`, or every object under it when it is a prefix or folder, in key
   * order. Hidden ones (a name starting with `_` or `.`, as Spark skips `_SUCCESS`, `_sluice_staging/`) are left out.
   */
  readObjects(location: string): Promise<StoredObject[]>;
  /** Every item of a table, as plain values: numbers as number (integers beyond 2^53 as bigint). */
  scanTable(table: string): Promise<Record<string, unknown>[]>;
}

/** A path segment Spark's file index skips. */
export function isHiddenPath(path: string): boolean {
  return path.split('/').some((segment) => segment.startsWith('_') || segment.startsWith('.'));
}

/** Files on the local disk: a file, or every file under a folder (recursively). */
export const localFileStorage: StaticStorage = {
  async readObjects(location) {
    const info = await stat(location);
    const files: string[] = [];
    const walk = async (dir: string, relative: string): Promise<void> => {
      for (const entry of (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1))) {
        const rel = relative ? `${relative}/${entry.name}` : entry.name;
        if (isHiddenPath(rel)) continue;
        if (entry.isDirectory()) await walk(join(dir, entry.name), rel);
        else files.push(join(dir, entry.name));
      }
    };
    if (info.isDirectory()) await walk(location, '');
    else files.push(location);
    return Promise.all(files.map(async (key) => ({ key, bytes: new Uint8Array(await readFile(key)) })));
  },
  async scanTable(table) {
    throw new Error(`no table storage configured to scan '${table}'`);
  },
};
