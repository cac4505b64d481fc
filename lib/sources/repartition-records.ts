/**
 * What crosses the repartition hop. Stage 1 sends, for each of its batches, one record to every
 * shard of the internal stream (split in parts when large): the rows routed there, and the
 * batch's maximum event time, which is how every source shard's watermark reaches every state
 * partition, in order with its rows. A confirmed-idle source shard sends an `idle` record.
 *
 * Kinesis PutRecords may write a record twice, and stage 1 re-sends a batch it re-runs, so stage 2
 * applies each (source shard, batch, part) once: what it applied per source is part of its
 * offsets, committed with its batches.
 */
import { longReplacer, longReviver, mayHoldTaggedValues } from '../core/long.js';
export const REPARTITION_RECORD_VERSION = 1;
/** An idle record's batch for a source shard that has committed nothing yet. */
export const NO_BATCH_COMMITTED = -1;

export interface RepartitionRecord {
  readonly v: number;
  readonly kind: 'rows' | 'idle';
  /** The source shard (stage-1 partition). */
  readonly src: string;
  /** The stage-1 batch id (for `idle`: the last committed one, NO_BATCH_COMMITTED when none is). */
  readonly batch: number;
  readonly part: number;
  readonly parts: number;
  /**
   * Maximum event time (ms) over the whole stage-1 batch, null without rows or watermark; on a
   * later hop, the watermark the sending stage ran the batch with.
   */
  readonly maxEventTimeMs: number | null;
  /** Rows in stage-1 output order, engine values (timestamps in epoch micros). */
  readonly rows: readonly (readonly unknown[])[];
  /** The rows are partial aggregates (`[max event time, ...keys, ...buffers]`), not the hop's rows. */
  readonly partial?: boolean;
  /**
   * The internal shard the record was built for. A record that lands elsewhere (stage 1 routed by a
   * shard list from before a reshard, and Kinesis put it in a child) is ignored there; stage 1
   * notices, and sends the batch again by the new shard list.
   */
  readonly to?: string;
  /**
   * The hop input (source stream) the rows belong to, when stage 2 reads several (a join, several
   * streams); absent for the single input of a one-stream cut.
   */
  readonly in?: string;
  /**
   * Put back by `sluice redrive --skipped` from a skipped range of the internal stream (the range's
   * id): stage 2 has moved past the record's batch since, so it applies the record under its own
   * progress entry (`redriveProgressKey`), once, and the watermark ignores that entry (the rows
   * arrive late, and are treated as late rows).
   */
  readonly redrive?: string;
}

/** The progress entry a record is applied under: its source shard, or the re-drive's own. */
export function redriveProgressKey(record: Pick<RepartitionRecord, 'src' | 'redrive'>): string {
  return record.redrive === undefined ? record.src : `${record.src}@redrive:${record.redrive}`;
}

/** What a state partition has applied from one source shard. */
export interface SourceProgress {
  readonly batch: number;
  /** Parts of `batch` applied so far. */
  readonly parts: readonly number[];
  readonly complete: boolean;
  readonly maxEventTimeMs: number | null;
  readonly idle: boolean;
  /** The entry of re-driven records (RepartitionRecord.redrive): no part of the watermark. */
  readonly redriven?: boolean;
}

export type SourceProgressMap = Readonly<Record<string, SourceProgress>>;

export function encodeRepartitionRecord(record: RepartitionRecord): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(record, longReplacer));
}

export function decodeRepartitionRecord(data: Uint8Array): RepartitionRecord {
  const text = new TextDecoder().decode(data);
  // Only a record that carries a tagged value (a long beyond 2^53, a decimal, binary, a map) pays for the reviver.
  const parsed = (mayHoldTaggedValues(text) ? JSON.parse(text, longReviver) : JSON.parse(text)) as RepartitionRecord;
  if (parsed.v !== REPARTITION_RECORD_VERSION || (parsed.kind !== 'rows' && parsed.kind !== 'idle')) {
    throw new Error(`not a Sluice repartition record (version ${String(parsed.v)})`);
  }
  return parsed;
}

const maxOf = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.max(a, b));

/**
 * Applies one record to the progress map. Returns the rows to process, or null when the record
 * was already applied (a duplicate).
 */
export function applyRepartitionRecord(progress: Record<string, SourceProgress>, record: RepartitionRecord): readonly (readonly unknown[])[] | null {
  const key = redriveProgressKey(record);
  const current = progress[key];
  if (record.kind === 'idle') {
    if (current && record.batch < current.batch) return null;
    progress[key] = current
      ? { ...current, idle: true }
      : { batch: record.batch, parts: [], complete: true, maxEventTimeMs: record.maxEventTimeMs, idle: true };
    return [];
  }
  if (current && (record.batch < current.batch || (record.batch === current.batch && (current.complete || current.parts.includes(record.part))))) {
    return null;
  }
  const parts = current && current.batch === record.batch ? [...current.parts, record.part] : [record.part];
  const complete = parts.length >= record.parts;
  // A batch's event time counts once all its parts are in: until then some of its rows are not.
  progress[key] = {
    batch: record.batch,
    parts,
    complete,
    maxEventTimeMs: complete ? maxOf(current?.maxEventTimeMs ?? null, record.maxEventTimeMs) : current?.maxEventTimeMs ?? null,
    idle: false,
    ...(record.redrive === undefined ? {} : { redriven: true }),
  };
  return record.rows;
}

/** A shard of the source stream, with the shards it replaced when a reshard created it. */
export interface SourceShard {
  readonly id: string;
  readonly parents?: readonly string[];
}

/**
 * The watermark a state partition runs with: the minimum over live source shards of their max
 * event time minus the delay; when all are idle, the maximum (Spark's rule for one query).
 * `knownSources` are the source stream's shards: one not heard from yet counts as live at 0,
 * unless a reshard created it: then it carries its parents' event time (a watermark carries over
 * a split or merge, as in a one-stage query), and a parent, closed, is represented by its children.
 */
export function sourcesWatermarkMs(progress: SourceProgressMap, delayMs: number, knownSources: readonly (string | SourceShard)[] = []): number {
  const shards = new Map(knownSources.map((s) => (typeof s === 'string' ? [s, [] as readonly string[]] : [s.id, s.parents ?? []])));
  const effective = new Map<string, SourceProgress>(Object.entries(progress).filter(([, p]) => p.redriven !== true));
  // What a shard not heard from yet carries from its parents (null: nothing known, it holds at 0).
  const inherited = (id: string, seen: ReadonlySet<string>): SourceProgress | null => {
    const parents = shards.get(id) ?? [];
    if (parents.length === 0 || seen.has(id)) return null;
    const carried = parents.map((p) => progress[p] ?? inherited(p, new Set([...seen, id])));
    if (carried.some((c) => c === null)) return null;
    const times = carried.map((c) => c!.maxEventTimeMs).filter((t): t is number => t !== null);
    return { batch: NO_BATCH_COMMITTED, parts: [], complete: true, maxEventTimeMs: times.length > 0 ? Math.max(...times) : null, idle: carried.every((c) => c!.idle) };
  };
  for (const id of shards.keys()) {
    if (effective.has(id)) continue;
    const carried = inherited(id, new Set());
    if (carried === null) return 0; // rows it has not sent may belong to any window
    effective.set(id, carried);
  }
  // A parent's rows all came before its children's: its children stand for it from now on.
  for (const [id, parents] of shards) {
    for (const p of parents) {
      const parent = effective.get(p);
      const child = effective.get(id);
      if (!parent || !child) continue;
      if (parent.maxEventTimeMs !== null && (child.maxEventTimeMs === null || child.maxEventTimeMs < parent.maxEventTimeMs)) {
        effective.set(id, { ...child, maxEventTimeMs: parent.maxEventTimeMs });
      }
    }
  }
  for (const parents of shards.values()) for (const p of parents) effective.delete(p);
  const entries = [...effective.values()];
  if (entries.length === 0) return 0;
  const watermark = (p: SourceProgress): number => (p.maxEventTimeMs === null ? 0 : Math.max(0, p.maxEventTimeMs - delayMs));
  const live = entries.filter((p) => !p.idle);
  return live.length === 0 ? Math.max(...entries.map(watermark)) : Math.min(...live.map(watermark));
}

/**
 * What a child shard of the internal stream starts from after a reshard: its parents' applied
 * progress, per source shard. After a split, each child has seen what its parent saw. After a
 * merge, the parents agree on every source batch stage 1 committed (it sends a batch to every
 * shard before committing it); where they differ, stage 1 was re-sending an uncommitted batch, and
 * the parent that had it decides (see docs/architecture.md, Resharding: the one case not covered).
 */
export function mergeSourceProgress(parents: readonly (SourceProgressMap | null)[]): Record<string, SourceProgress> {
  const merged: Record<string, SourceProgress> = {};
  for (const progress of parents) {
    for (const [src, p] of Object.entries(progress ?? {})) {
      const current = merged[src];
      if (!current || p.batch > current.batch || (p.batch === current.batch && p.complete && !current.complete)) merged[src] = p;
      else if (p.batch === current.batch && !p.idle && current.idle) merged[src] = { ...current, idle: false };
    }
  }
  return merged;
}
