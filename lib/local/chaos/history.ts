/**
 * The whole history of a query's sink, not only its final contents: every value a reader could
 * have seen at some moment, checked against what the committed batches allow.
 *
 * Recorded during a run (by the fault middleware and the sink wrapper, in every container,
 * zombies and the scheduled function included):
 * - attempts: each `addBatch` call, with its (partition, batch id) and rows;
 * - physical writes that succeeded: DynamoDB sink items (they carry `_partition` and `_batchId`);
 *   for the S3 files sink (format version 2) staged files, manifest entries, rejected-row files,
 *   and every visible data file: a copy of a staged file (the reveal) or a direct PUT;
 * - at the end, the commit log: which (partition, batch id) committed.
 *
 * What the committed batches allow:
 * 1. every attempt of one batch writes the same rows (a re-run is a replay, never a new answer);
 * 2. every value written to a DynamoDB item is the row its committed batch holds for that key, and
 *    per key and partition the batch ids of the values a reader sees never go back (a zombie's
 *    older value over a newer one is a rollback);
 * 3. S3: every VISIBLE data file (`<prefix><col>=<v>/…/part-<shard>-<batch>.<ext>`, what a table
 *    reader lists) belongs to a committed batch and holds exactly that batch's rows of its folder
 *    (less the rows the sink rejected); every file a committed batch's manifest entry names became
 *    visible (a reveal that never happened loses its rows for a table reader); at the end a manifest
 *    entry names a committed batch only (the manifest reader in lib/aws/sink-readers.ts serves it).
 * Staged files of a batch that never committed are hidden (`_sluice_staging/`, `.staged`): they are
 * counted apart, not errors.
 */
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { DYNAMODB_SINK_RESERVED } from '../../aws/dynamodb-upsert-sink.js';
import { parquetRowsAsJson } from '../../aws/parquet-reader.js';
import type { S3FilesManifestEntry } from '../../aws/s3-files-sink.js';
import { parseJsonWithLongs, parseLongDigits } from '../../core/long.js';
import { toExternalRow } from '../../sinks/external-row.js';
import type { SinkBatch } from '../../sinks/sink.js';
import { canonicalJson, emptyDiff, type Diff } from './compare.js';

interface Attempt { readonly partitionId: string; readonly batchId: number; readonly rows: readonly string[] }
interface ItemWrite { readonly seq: number; readonly partitionId: string; readonly batchId: number; readonly key: string; readonly row: string }
interface StagedFile { readonly partitionId: string; readonly batchId: number; readonly bytes: Uint8Array; readonly format: string }
/** A visible data file as it appeared (copied from a staged file, or put directly). */
interface VisibleWrite {
  readonly seq: number;
  readonly key: string;
  readonly partitionId: string;
  readonly batchId: number;
  /** The staged file it was copied from (undefined: put directly, or copied from a file never recorded). */
  readonly source?: StagedFile;
  readonly bytes?: Uint8Array;
  readonly format: string;
}
interface ManifestWrite { readonly seq: number; readonly partitionId: string; readonly batchId: number; readonly entry?: S3FilesManifestEntry }

export interface HistoryFigures {
  /** Physical sink writes recorded (items, staged and visible data files, manifest entries). */
  readonly writes: number;
  readonly attempts: number;
  /** Staged S3 files of batches that never committed (hidden from every reader). */
  readonly orphans: number;
}

const STAGED = /_sluice_staging\/partition=([^/]+)\/(\d+)\/\d+\.(jsonl|parquet)\.staged$/;
const MANIFEST = /_sluice_metadata\/partition=([^/]+)\/(\d+)\.json$/;
const REJECTED = /_sluice_rejected\/partition=([^/]+)\/(\d+)\.jsonl$/;
/** A visible data file, relative to the sink's prefix: Hive folders (none under `_`), then the file. */
const VISIBLE = /^(?!_)(?:[^/]+=[^/]*\/)*part-(.+)-(\d{12})\.(jsonl|parquet)$/;

/** The JSON value of a DynamoDB number: longs beyond 2^53 exact (as the sink wrote them). */
const dynamoDbNumber = (n: string): unknown => (/^-?\d+$/.test(n) ? parseLongDigits(n) ?? Number(n) : Number(n));

async function rowsOf(bytes: Uint8Array, format: string): Promise<Record<string, unknown>[]> {
  if (format === 'parquet') return parquetRowsAsJson(bytes);
  return Buffer.from(bytes).toString('utf8').split('\n').filter((l) => l.length > 0).map((l) => parseJsonWithLongs(l) as Record<string, unknown>);
}

export class SinkHistory {
  private seq = 0;
  readonly attempts: Attempt[] = [];
  readonly items: ItemWrite[] = [];
  /** The last content put at each staged key (a re-run puts the same key again). */
  readonly staged = new Map<string, StagedFile>();
  private stagedPuts = 0;
  readonly visible: VisibleWrite[] = [];
  readonly manifests: ManifestWrite[] = [];
  /** Rows the sink rejected, per `${partitionId}#${batchId}` (the last file written). */
  readonly rejected = new Map<string, readonly string[]>();
  /** Every key under the prefix a recorded write put or copied there. */
  private readonly recordedKeys = new Set<string>();

  /**
   * @param keyColumns the columns identifying a result row
   * @param sinkPrefix the S3 sink's full key prefix (with its trailing `/`); '' for a DynamoDB sink
   */
  constructor(readonly keyColumns: readonly string[], readonly sinkPrefix: string) {}

  keyOf(row: Record<string, unknown>): string {
    return canonicalJson(this.keyColumns.map((c) => row[c] ?? null));
  }

  attempt(batch: SinkBatch): void {
    this.attempts.push({
      partitionId: batch.partitionId, batchId: batch.batchId,
      rows: batch.rows.map((r) => canonicalJson(toExternalRow(r, batch.schema))),
    });
  }

  dynamoDbWrite(item: Record<string, AttributeValue> | undefined): void {
    if (!item) return;
    const native = unmarshall(item, { wrapNumbers: dynamoDbNumber as (n: string) => number }) as Record<string, unknown>;
    const partitionId = String(native._partition);
    const batchId = Number(native._batchId);
    for (const name of DYNAMODB_SINK_RESERVED) delete native[name];
    this.items.push({ seq: this.seq++, partitionId, batchId, key: this.keyOf(native), row: canonicalJson(native) });
  }

  /**
   * For an upsert (DynamoDB) sink: whether a batch newer than `batch`, of its partition, already
   * wrote one of the keys `batch` writes, so that `batch` written now must be refused by the sink's
   * fence (else rule 2 reports the key going back). Undefined for an S3 sink (no keys overwritten).
   */
  newerWriteOfKeys(batch: SinkBatch): boolean | undefined {
    if (this.sinkPrefix) return undefined;
    const keys = new Set(batch.rows.map((r) => this.keyOf(parseJsonWithLongs(canonicalJson(toExternalRow(r, batch.schema))) as Record<string, unknown>)));
    return this.items.some((w) => w.partitionId === batch.partitionId && w.batchId > batch.batchId && keys.has(w.key));
  }

  /** A PutObject that succeeded. */
  s3Put(key: string, body: string | Uint8Array): void {
    if (!this.sinkPrefix || !key.startsWith(this.sinkPrefix)) return;
    this.recordedKeys.add(key);
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    const relative = key.slice(this.sinkPrefix.length);
    const staged = STAGED.exec(relative);
    if (staged) {
      this.stagedPuts++;
      this.staged.set(key, { partitionId: decodeURIComponent(staged[1]!), batchId: Number(staged[2]), bytes, format: staged[3]! });
      return;
    }
    const manifest = MANIFEST.exec(relative);
    if (manifest) {
      let entry: S3FilesManifestEntry | undefined;
      try { entry = JSON.parse(Buffer.from(bytes).toString('utf8')) as S3FilesManifestEntry; } catch { entry = undefined; }
      this.manifests.push({ seq: this.seq++, partitionId: decodeURIComponent(manifest[1]!), batchId: Number(manifest[2]), ...(entry ? { entry } : {}) });
      return;
    }
    const rejected = REJECTED.exec(relative);
    if (rejected) {
      const rows = Buffer.from(bytes).toString('utf8').split('\n').filter((l) => l.length > 0)
        .map((l) => canonicalJson((parseJsonWithLongs(l) as { row?: unknown }).row ?? null));
      this.rejected.set(`${decodeURIComponent(rejected[1]!)}#${Number(rejected[2])}`, rows);
      return;
    }
    const visible = VISIBLE.exec(relative);
    if (visible) {
      this.visible.push({ seq: this.seq++, key, partitionId: decodeURIComponent(visible[1]!), batchId: Number(visible[2]), bytes, format: visible[3]! });
    }
  }

  /** A CopyObject that succeeded (the files sink's reveal of a staged file). */
  s3Copy(from: string, to: string): void {
    if (!this.sinkPrefix || !to.startsWith(this.sinkPrefix)) return;
    this.recordedKeys.add(to);
    const visible = VISIBLE.exec(to.slice(this.sinkPrefix.length));
    if (!visible) return;
    const source = this.staged.get(from);
    this.visible.push({
      seq: this.seq++, key: to, partitionId: decodeURIComponent(visible[1]!), batchId: Number(visible[2]), format: visible[3]!, ...(source ? { source } : {}),
    });
  }

  /** The last manifest entry recorded per batch. */
  private lastManifests(): Map<string, ManifestWrite> {
    const out = new Map<string, ManifestWrite>();
    for (const m of this.manifests) out.set(`${m.partitionId}#${m.batchId}`, m);
    return out;
  }

  figures(committed: ReadonlySet<string> = new Set()): HistoryFigures {
    const hidden = [...this.staged.values()].filter((f) => !committed.has(`${f.partitionId}#${f.batchId}`)).length;
    return {
      writes: this.items.length + this.stagedPuts + this.visible.length + this.manifests.length, attempts: this.attempts.length, orphans: hidden,
    };
  }

  /**
   * The sink's objects at the end (`listed`, every key under the prefix) that no recorded write
   * put there: an orphan the history never saw (a writer the harness does not watch, or a file
   * put by a path it does not know), so nothing above judged it. Each is a mismatch.
   */
  unrecorded(listed: readonly string[]): Diff {
    const diff = emptyDiff();
    for (const key of listed) {
      if (!key.startsWith(this.sinkPrefix) || this.recordedKeys.has(key)) continue;
      diff.mismatched++;
      if (diff.examples.length < 6) diff.examples.push(`history: ${key} is in the sink, but no recorded write put it there`);
    }
    return diff;
  }

  /**
   * Every recorded write against the committed batches.
   * @param committed `${partitionId}#${batchId}` of every batch in the commit log at the end
   * @param lossy batches that recorded planned records lost to retention (retention-loss.ts): an
   *   attempt before the trim and one after it see different records, so each attempt's rows are
   *   an answer a reader may have seen (the final contents are still checked against the answer
   *   without the lost records)
   */
  async check(committed: ReadonlySet<string>, lossy: ReadonlySet<string> = new Set()): Promise<Diff> {
    const diff = emptyDiff();
    const note = (text: string): void => { if (diff.examples.length < 6) diff.examples.push(`history: ${text}`); };
    const id = (p: string, b: number): string => `${p}#${b}`;

    // 1. One answer per batch: the first attempt's rows; every other attempt must equal them.
    const answer = new Map<string, readonly string[]>();
    const otherAnswers = new Map<string, (readonly string[])[]>();
    for (const a of this.attempts) {
      const batch = id(a.partitionId, a.batchId);
      const known = answer.get(batch);
      if (!known) { answer.set(batch, a.rows); continue; }
      const d = multisetDifference(known, a.rows);
      if (d > 0 && lossy.has(batch)) otherAnswers.set(batch, [...otherAnswers.get(batch) ?? [], a.rows]);
      else if (d > 0) { diff.mismatched += d; note(`batch ${a.partitionId}/${a.batchId} re-ran with ${d} different rows`); }
    }
    const rowOf = new Map<string, string[]>();
    for (const [batch, rows] of [...answer, ...[...otherAnswers].flatMap(([b, list]) => list.map((rows) => [b, rows] as const))]) {
      for (const row of rows) {
        const k = `${batch}|${this.keyOf(parseJsonWithLongs(row) as Record<string, unknown>)}`;
        const list = rowOf.get(k) ?? [];
        list.push(row);
        rowOf.set(k, list);
      }
    }

    // 2. DynamoDB items, in the order the writes succeeded.
    const newest = new Map<string, number>();
    for (const w of this.items) {
      const batch = id(w.partitionId, w.batchId);
      if (!committed.has(batch)) { diff.mismatched++; note(`uncommitted batch ${w.partitionId}/${w.batchId} wrote ${w.key}=${w.row}`); continue; }
      const allowed = rowOf.get(`${batch}|${w.key}`) ?? [];
      if (!allowed.includes(w.row)) {
        diff.mismatched++;
        note(`batch ${w.partitionId}/${w.batchId} wrote ${w.row}; its committed answer for ${w.key} is ${allowed[0] ?? 'no row'}`);
      }
      const at = `${w.partitionId}|${w.key}`;
      const before = newest.get(at) ?? -1;
      if (w.batchId < before) { diff.mismatched++; note(`${w.key} went back from batch ${before} to ${w.batchId} (${w.partitionId})`); }
      newest.set(at, Math.max(before, w.batchId));
    }

    // 3. S3: every visible data file, every committed batch's reveal, the manifest at the end.
    const manifests = this.lastManifests();
    const partitionOf = new Map<string, Readonly<Record<string, unknown>>>();
    for (const m of manifests.values()) for (const f of m.entry?.files ?? []) partitionOf.set(f.key, f.partition ?? {});
    for (const v of this.visible) {
      const batch = id(v.partitionId, v.batchId);
      const bytes = v.bytes ?? v.source?.bytes;
      if (!bytes) { diff.mismatched++; note(`visible file ${v.key} copied from a staged file never written`); continue; }
      const folder = partitionOf.get(v.key) ?? {};
      const got = (await rowsOf(bytes, v.format)).map((r) => canonicalJson({ ...r, ...folder }));
      if (!committed.has(batch)) { diff.mismatched += got.length; note(`visible file ${v.key} of uncommitted batch ${v.partitionId}/${v.batchId}`); continue; }
      if (v.source && id(v.source.partitionId, v.source.batchId) !== batch) {
        diff.mismatched += got.length;
        note(`visible file ${v.key} was copied from batch ${v.source.partitionId}/${v.source.batchId}'s staged file`);
        continue;
      }
      const want = answer.get(batch);
      if (!want) { diff.mismatched += got.length; note(`visible file ${v.key} written by no sink attempt`); continue; }
      const d = Math.min(...[want, ...otherAnswers.get(batch) ?? []].map((rows) => multisetDifference(rowsInFolder(rows, folder, this.rejected.get(batch) ?? []), got)));
      if (d > 0) { diff.mismatched += d; note(`visible file ${v.key} differs from batch ${v.partitionId}/${v.batchId} in ${d} rows`); }
    }
    const revealed = new Set(this.visible.map((v) => v.key));
    for (const [batch, m] of manifests) {
      if (!committed.has(batch)) { diff.mismatched++; note(`manifest entry of uncommitted batch ${m.partitionId}/${m.batchId}`); continue; }
      for (const f of m.entry?.files ?? []) {
        if (!revealed.has(f.key)) { diff.lost += f.rows; note(`committed batch ${m.partitionId}/${m.batchId}: ${f.key} never became visible (${f.rows} rows)`); }
      }
    }
    return diff;
  }
}

/** The rows of `batchRows` whose partition columns hold the folder's values, less the rejected ones. */
function rowsInFolder(batchRows: readonly string[], folder: Readonly<Record<string, unknown>>, rejected: readonly string[]): string[] {
  const columns = Object.entries(folder).map(([c, v]) => [c, canonicalJson(v)] as const);
  const out = batchRows.filter((text) => {
    if (columns.length === 0) return true;
    const row = parseJsonWithLongs(text) as Record<string, unknown>;
    return columns.every(([c, v]) => canonicalJson(row[c] ?? null) === v);
  });
  for (const r of rejected) {
    const at = out.indexOf(r);
    if (at >= 0) out.splice(at, 1);
  }
  return out;
}

/** How many rows of the larger side the other side has no equal copy for. */
export function multisetDifference(a: readonly string[], b: readonly string[]): number {
  const counts = new Map<string, number>();
  for (const v of a) counts.set(v, (counts.get(v) ?? 0) + 1);
  let unmatched = 0;
  for (const v of b) {
    const n = counts.get(v) ?? 0;
    if (n > 0) counts.set(v, n - 1); else unmatched++;
  }
  const left = [...counts.values()].reduce((s, n) => s + n, 0);
  return Math.max(left, unmatched);
}
