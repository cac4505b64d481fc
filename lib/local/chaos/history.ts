/**
 * The whole history of a query's sink, not only its final contents: every value a reader could
 * have seen at some moment, checked against what the committed batches allow.
 *
 * Recorded during a run (by the fault middleware and the sink wrapper, in every container,
 * zombies and the scheduled function included):
 * - attempts: each `addBatch` call, with its (partition, batch id) and rows;
 * - physical writes that succeeded: DynamoDB sink items (they carry `_partition` and `_batchId`),
 *   S3 data objects (orphans too: a data object whose manifest never came) and manifest entries;
 * - at the end, the commit log: which (partition, batch id) committed.
 *
 * What the committed batches allow:
 * 1. every attempt of one batch writes the same rows (a re-run is a replay, never a new answer);
 * 2. every value written to a DynamoDB item is the row its committed batch holds for that key, and
 *    per key and partition the batch ids of the values a reader sees never go back (a zombie's
 *    older value over a newer one is a rollback);
 * 3. every S3 data object holds exactly its committed batch's rows (orphans included: a reader that
 *    lists data objects would see them); a manifest entry names a committed batch only.
 * Orphan data objects (no manifest entry at the end) are counted apart: readers of the manifest,
 * Spark's contract for a file sink, never see them.
 */
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { DYNAMODB_SINK_RESERVED } from '../../aws/dynamodb-upsert-sink.js';
import { toExternalRow } from '../../sinks/external-row.js';
import type { SinkBatch } from '../../sinks/sink.js';
import { canonicalJson, emptyDiff, type Diff } from './compare.js';

interface Attempt { readonly partitionId: string; readonly batchId: number; readonly rows: readonly string[] }
interface ItemWrite { readonly seq: number; readonly partitionId: string; readonly batchId: number; readonly key: string; readonly row: string }
interface ObjectWrite { readonly seq: number; readonly key: string; readonly partitionId: string; readonly batchId: number; readonly rows: readonly string[] }

export interface HistoryFigures {
  /** Physical sink writes recorded (items, data objects, manifest entries). */
  readonly writes: number;
  readonly attempts: number;
  /** S3 data objects no manifest names at the end (invisible to manifest readers). */
  readonly orphans: number;
}

export class SinkHistory {
  private seq = 0;
  readonly attempts: Attempt[] = [];
  readonly items: ItemWrite[] = [];
  readonly dataObjects: ObjectWrite[] = [];
  readonly manifests: { readonly seq: number; readonly partitionId: string; readonly batchId: number }[] = [];

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
    const native = unmarshall(item, { wrapNumbers: (n: string) => Number(n) }) as Record<string, unknown>;
    const partitionId = String(native._partition);
    const batchId = Number(native._batchId);
    for (const name of DYNAMODB_SINK_RESERVED) delete native[name];
    this.items.push({ seq: this.seq++, partitionId, batchId, key: this.keyOf(native), row: canonicalJson(native) });
  }

  s3Put(key: string, body: string): void {
    if (!this.sinkPrefix || !key.startsWith(this.sinkPrefix)) return;
    const data = /\/?data\/partition=([^/]+)\/batch=(\d+)\.jsonl$/.exec(key);
    if (data) {
      const rows = body.split('\n').filter((l) => l.length > 0).map((l) => canonicalJson(JSON.parse(l)));
      this.dataObjects.push({ seq: this.seq++, key, partitionId: decodeURIComponent(data[1]!), batchId: Number(data[2]), rows });
      return;
    }
    const manifest = /_sluice_metadata\/partition=([^/]+)\/(\d+)\.json$/.exec(key);
    if (manifest) this.manifests.push({ seq: this.seq++, partitionId: decodeURIComponent(manifest[1]!), batchId: Number(manifest[2]) });
  }

  figures(): HistoryFigures {
    const named = new Set(this.manifests.map((m) => `${m.partitionId}#${m.batchId}`));
    const orphans = new Set(this.dataObjects.filter((d) => !named.has(`${d.partitionId}#${d.batchId}`)).map((d) => d.key)).size;
    return { writes: this.items.length + this.dataObjects.length + this.manifests.length, attempts: this.attempts.length, orphans };
  }

  /**
   * Every recorded write against the committed batches.
   * @param committed `${partitionId}#${batchId}` of every batch in the commit log at the end
   */
  check(committed: ReadonlySet<string>): Diff {
    const diff = emptyDiff();
    const note = (text: string): void => { if (diff.examples.length < 6) diff.examples.push(`history: ${text}`); };
    const id = (p: string, b: number): string => `${p}#${b}`;

    // 1. One answer per batch: the first attempt's rows; every other attempt must equal them.
    const answer = new Map<string, readonly string[]>();
    for (const a of this.attempts) {
      const known = answer.get(id(a.partitionId, a.batchId));
      if (!known) { answer.set(id(a.partitionId, a.batchId), a.rows); continue; }
      const d = multisetDifference(known, a.rows);
      if (d > 0) { diff.mismatched += d; note(`batch ${a.partitionId}/${a.batchId} re-ran with ${d} different rows`); }
    }
    const rowOf = new Map<string, string[]>();
    for (const [batch, rows] of answer) {
      for (const row of rows) {
        const k = `${batch}|${this.keyOf(JSON.parse(row) as Record<string, unknown>)}`;
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

    // 3. S3: data objects (orphans included) and manifest entries.
    for (const o of this.dataObjects) {
      const batch = id(o.partitionId, o.batchId);
      const want = answer.get(batch);
      if (!want) { diff.mismatched += o.rows.length; note(`data object ${o.key} written by no sink attempt`); continue; }
      const d = multisetDifference(want, o.rows);
      if (d > 0) { diff.mismatched += d; note(`data object ${o.key} differs from batch ${o.partitionId}/${o.batchId} in ${d} rows`); }
    }
    for (const m of this.manifests) {
      if (!committed.has(id(m.partitionId, m.batchId))) { diff.mismatched++; note(`manifest entry of uncommitted batch ${m.partitionId}/${m.batchId}`); }
    }
    return diff;
  }
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
