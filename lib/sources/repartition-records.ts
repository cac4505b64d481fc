/**
 * What crosses the repartition hop. Stage 1 sends, for each of its batches, one record to every
 * shard of the internal stream (split by hash range when large): the rows routed there, and the
 * batch's maximum event time, which is how every source shard's watermark reaches every state
 * partition, in order with its rows. A confirmed-idle source shard sends an `idle` record.
 *
 * Kinesis PutRecords may write a record twice, and stage 1 re-sends a batch it re-runs, so stage 2
 * applies each source shard's batch once per hash range (hash-range-progress.ts): what it applied
 * per source is part of its offsets, committed with its batches.
 */
import { longReplacer, longReviver, mayHoldTaggedValues } from '../core/long.js';
import {
  applyIdle, applyRange, clipTo, FULL_HASH_RANGE, hexRange, mergeRanges, rangeOfHex, rangeSummary, type HashRange, type RangeProgress,
} from './hash-range-progress.js';

type Summary = { readonly maxEventTimeMs: number | null; readonly idle: boolean };
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
   * The namespace that wrote the record, when it is not the query's own (a replay shadow,
   * lib/aws/query-namespace.ts): a replay shares the internal streams with the live run, and each
   * namespace's stage 2 applies only its own records (absent: the query's own namespace).
   */
  readonly ns?: string;
  /**
   * The hash-key range (hex, both ends included) whose rows of the batch this record holds, all of
   * them (with `parts`, a share: one hash's rows too large for one record). Absent from records
   * of older versions: the whole shard.
   */
  readonly hr?: readonly [string, string];
  /** The range of the shard the record was built for, when `hr` is only part of it. */
  readonly sr?: readonly [string, string];
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
  return record.redrive === undefined ? record.src : `${record.src}${REDRIVE_KEY_MARK}${record.redrive}`;
}

/**
 * Marks a re-drive's own progress entry, and a re-drive's own stage-1 partition
 * (`<shard>@redrive:<run>`, lib/aws/dead-letter-reprocess.ts): neither is part of any watermark.
 */
export const REDRIVE_KEY_MARK = '@redrive:';
export const isRedriveProgressKey = (key: string): boolean => key.includes(REDRIVE_KEY_MARK);

/** What a state partition has applied from one source shard, per hash range (hash-range-progress.ts). */
export type SourceProgress = RangeProgress;

/** The progress of offsets committed before progress was kept per hash range (read, never written). */
interface LegacySourceProgress {
  readonly batch: number;
  readonly parts: readonly number[];
  readonly complete: boolean;
  readonly maxEventTimeMs: number | null;
  readonly idle: boolean;
  /** The entry of re-driven records (RepartitionRecord.redrive): no part of the watermark. */
  readonly redriven?: boolean;
}

export type SourceProgressMap = Readonly<Record<string, SourceProgress>>;

/** Progress as stored, in either format, as hash ranges: a legacy entry covers the whole hash space. */
export function asRangeProgress(p: SourceProgress | LegacySourceProgress): RangeProgress {
  if ('ranges' in p) return p;
  return {
    span: hexRange(FULL_HASH_RANGE),
    ranges: [{ ...hexRangeFields(FULL_HASH_RANGE), batch: p.batch, ...(p.complete ? {} : { parts: p.parts }), maxEventTimeMs: p.maxEventTimeMs }],
    idle: p.idle,
  };
}

const hexRangeFields = (r: HashRange): { lo: string; hi: string } => ({ lo: hexRange(r)[0], hi: hexRange(r)[1] });

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

/**
 * Applies one record to the progress map. Returns the rows to process, or null when the record
 * was already applied (a duplicate). `hashOf` gives a row's routing hash: needed when a batch
 * re-sent after a reshard of the internal stream was partly applied before it.
 */
export function applyRepartitionRecord(
  progress: Record<string, SourceProgress>, record: RepartitionRecord, hashOf?: (row: readonly unknown[]) => bigint,
): readonly (readonly unknown[])[] | null {
  const key = redriveProgressKey(record);
  const stored = progress[key] as SourceProgress | LegacySourceProgress | undefined;
  const current = stored === undefined ? undefined : asRangeProgress(stored);
  const range = record.hr ? rangeOfHex(record.hr) : current ? rangeOfHex(current.span) : FULL_HASH_RANGE;
  const span = record.sr ? rangeOfHex(record.sr) : record.hr ? range : current ? rangeOfHex(current.span) : FULL_HASH_RANGE;
  if (record.kind === 'idle') {
    const next = applyIdle(current === undefined ? undefined : clipTo(current, span), record.batch, span, record.maxEventTimeMs);
    if (!next) return null;
    progress[key] = next;
    return [];
  }
  const { progress: next, verdict } = applyRange(current, {
    batch: record.batch, range, span, part: record.part, parts: record.parts, maxEventTimeMs: record.maxEventTimeMs,
  });
  if (verdict.kind === 'duplicate') return null;
  progress[key] = next;
  if (verdict.kind === 'all') return record.rows;
  if (!hashOf) throw new Error(`repartition record of ${record.src} batch ${record.batch} was partly applied before, and its rows cannot be hashed here`);
  return record.rows.filter((row) => verdict.fresh(hashOf(row)));
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
export function sourcesWatermarkMs(progress: Readonly<Record<string, SourceProgress | LegacySourceProgress>>, delayMs: number, knownSources: readonly (string | SourceShard)[] = []): number {
  const shards = new Map(knownSources.map((s) => (typeof s === 'string' ? [s, [] as readonly string[]] : [s.id, s.parents ?? []])));
  const summaries: Record<string, Summary> = Object.fromEntries(Object.entries(progress).filter(([id]) => !isRedriveProgressKey(id)).map(([id, p]) => [id, rangeSummary(asRangeProgress(p))]));
  const effective = new Map<string, Summary>(Object.entries(summaries));
  // What a shard not heard from yet carries from its parents (null: nothing known, it holds at 0).
  const inherited = (id: string, seen: ReadonlySet<string>): Summary | null => {
    const parents = shards.get(id) ?? [];
    if (parents.length === 0 || seen.has(id)) return null;
    const carried = parents.map((p) => summaries[p] ?? inherited(p, new Set([...seen, id])));
    if (carried.some((c) => c === null)) return null;
    const times = carried.map((c) => c!.maxEventTimeMs).filter((t): t is number => t !== null);
    return { maxEventTimeMs: times.length > 0 ? Math.max(...times) : null, idle: carried.every((c) => c!.idle) };
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
  const watermark = (p: Summary): number => (p.maxEventTimeMs === null ? 0 : Math.max(0, p.maxEventTimeMs - delayMs));
  const live = entries.filter((p) => !p.idle);
  return live.length === 0 ? Math.max(...entries.map(watermark)) : Math.min(...live.map(watermark));
}

/**
 * What a child shard of the internal stream starts from after a reshard: its parents' applied
 * progress per source shard, restricted to its hash range (a split) or side by side (a merge).
 * Per hash range, nothing is guessed: where one parent applied a batch and the other did not yet
 * (stage 1 resharded between its PutRecords calls), the child takes the re-sent rows of the
 * second parent's range and skips the first's.
 */
export function mergeSourceProgress(
  parents: readonly { readonly sources: Readonly<Record<string, SourceProgress | LegacySourceProgress>> | null; readonly range: HashRange }[], span: HashRange,
): Record<string, SourceProgress> {
  const sources = new Set(parents.flatMap((p) => Object.keys(p.sources ?? {})));
  const merged: Record<string, SourceProgress> = {};
  for (const src of sources) {
    // A parent's entry never reaches past its own range (an older entry says the whole hash space).
    const ranges = parents.flatMap((p) => (p.sources?.[src] === undefined ? [] : [clipTo(asRangeProgress(p.sources[src]!), p.range)]));
    merged[src] = mergeRanges(ranges, span);
  }
  return merged;
}
