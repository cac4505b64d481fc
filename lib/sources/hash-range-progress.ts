/**
 * What a stage-2 partition has applied from one source shard, per hash range of the rows' routing
 * keys. A stage-1 batch reaches the internal stream as records that each hold all of the batch's
 * rows in one hash range; the internal stream may be split or merged between two PutRecords calls
 * of the same batch, and stage 1 then sends the batch again by the new shard list, cut into other
 * records. Progress kept per (batch, part) could not tell which of the re-sent rows a parent had
 * applied; per hash range it can, as a row's hash says which range it belongs to, whatever record
 * it comes in. A reshard only divides or joins ranges (a split clips them to the child's range, a
 * merge puts its parents' side by side), so a child knows, for every hash, the last batch applied.
 *
 * Bounds are hex strings (JSON holds no bigint); both ends are included, as in Kinesis.
 */
export interface AppliedRange {
  readonly lo: string;
  readonly hi: string;
  /** Every batch up to this one is applied in the range (only `parts` of it, when given). */
  readonly batch: number;
  /** Sub-parts of `batch` applied so far: a single hash's rows too large for one record. */
  readonly parts?: readonly number[];
  /** The maximum event time over the batches complete in this range, null when none carried one. */
  readonly maxEventTimeMs: number | null;
}

export interface RangeProgress {
  /** The partition's own hash range (the shard the records were built for). */
  readonly span: readonly [string, string];
  /** Sorted and disjoint, inside `span`; a hash in no range has had nothing applied. */
  readonly ranges: readonly AppliedRange[];
  readonly idle: boolean;
}

export interface HashRange {
  readonly start: bigint;
  readonly end: bigint;
}

export const FULL_HASH_RANGE: HashRange = { start: 0n, end: (1n << 128n) - 1n };

export const toHex = (n: bigint): string => n.toString(16);
export const fromHex = (s: string): bigint => BigInt(`0x${s}`);
export const hexRange = (r: HashRange): [string, string] => [toHex(r.start), toHex(r.end)];
export const rangeOfHex = ([lo, hi]: readonly [string, string]): HashRange => ({ start: fromHex(lo), end: fromHex(hi) });

const maxOf = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.max(a, b));

interface Piece {
  readonly start: bigint;
  readonly end: bigint;
  /** What is applied there (null: nothing). */
  readonly applied: AppliedRange | null;
}

/** `[start, end]` cut along the applied ranges: each piece lies in one range or in none. */
function piecesOf(progress: RangeProgress | undefined, range: HashRange): Piece[] {
  const pieces: Piece[] = [];
  let at = range.start;
  for (const r of progress?.ranges ?? []) {
    const lo = fromHex(r.lo);
    const hi = fromHex(r.hi);
    if (hi < at || lo > range.end) continue;
    if (lo > at) pieces.push({ start: at, end: lo - 1n, applied: null });
    const end = hi < range.end ? hi : range.end;
    pieces.push({ start: lo > at ? lo : at, end, applied: r });
    at = end + 1n;
    if (at > range.end) break;
  }
  if (at <= range.end) pieces.push({ start: at, end: range.end, applied: null });
  return pieces;
}

function alreadyApplied(applied: AppliedRange | null, batch: number, part: number, parts: number): boolean {
  if (!applied || applied.batch < batch) return false;
  if (applied.batch > batch) return true;
  return applied.parts === undefined || (parts > 1 && applied.parts.includes(part));
}

/** A record of one batch for one hash range: what it holds and where it sits among the parts. */
export interface RangeRecord {
  readonly batch: number;
  readonly range: HashRange;
  /** The partition's range, which the record was built for. */
  readonly span: HashRange;
  readonly part: number;
  readonly parts: number;
  readonly maxEventTimeMs: number | null;
}

export type RangeVerdict =
  /** Every row was applied before (a PutRecords retry, a re-sent batch). */
  | { readonly kind: 'duplicate' }
  | { readonly kind: 'all' }
  /** Some hash ranges were applied before (a batch re-sent after a reshard): keep rows whose hash passes. */
  | { readonly kind: 'some'; readonly fresh: (hash: bigint) => boolean };

/**
 * Applies `record` to `progress`: the new progress, and which of its rows are new. A row's hash
 * alone says whether it was applied, so a re-sent batch cut differently is applied exactly once.
 */
export function applyRange(progress: RangeProgress | undefined, record: RangeRecord): { progress: RangeProgress; verdict: RangeVerdict } {
  const current = clipTo(progress, record.span);
  const pieces = piecesOf(current, record.range);
  const fresh = pieces.filter((p) => !alreadyApplied(p.applied, record.batch, record.part, record.parts));
  if (fresh.length === 0) return { progress: current, verdict: { kind: 'duplicate' } };
  const updated: AppliedRange[] = fresh.map((p) => {
    const before = p.applied;
    const parts = record.parts > 1 ? [...(before?.batch === record.batch ? before.parts ?? [] : []), record.part] : undefined;
    const complete = parts === undefined || parts.length >= record.parts;
    const carried = before?.maxEventTimeMs ?? null;
    return {
      lo: toHex(p.start), hi: toHex(p.end), batch: record.batch,
      ...(complete ? {} : { parts }),
      // A batch's event time counts once all its rows in the range are in.
      maxEventTimeMs: complete ? maxOf(carried, record.maxEventTimeMs) : carried,
    };
  });
  const next: RangeProgress = { span: current.span, ranges: normalize(replace(current.ranges, updated)), idle: false };
  if (fresh.length === pieces.length) return { progress: next, verdict: { kind: 'all' } };
  const freshRanges = fresh.map((p) => ({ start: p.start, end: p.end }));
  return { progress: next, verdict: { kind: 'some', fresh: (hash) => freshRanges.some((r) => hash >= r.start && hash <= r.end) } };
}

/** A source shard's idle record (its last committed batch): the source sends nothing until it has rows. */
export function applyIdle(progress: RangeProgress | undefined, batch: number, span: HashRange, maxEventTimeMs: number | null): RangeProgress | null {
  if (progress) {
    const latest = Math.max(...progress.ranges.map((r) => r.batch), Number.NEGATIVE_INFINITY);
    return batch < latest ? null : { ...progress, idle: true };
  }
  return { span: hexRange(span), ranges: [{ ...hexRangeObject(span), batch, maxEventTimeMs }], idle: true };
}

const hexRangeObject = (r: HashRange): { lo: string; hi: string } => ({ lo: toHex(r.start), hi: toHex(r.end) });

/** What the watermark sees: the event time of the batches complete over the whole span. */
export function rangeSummary(progress: RangeProgress): { maxEventTimeMs: number | null; idle: boolean } {
  const span = rangeOfHex(progress.span);
  const pieces = piecesOf(progress, span);
  if (pieces.some((p) => p.applied === null)) return { maxEventTimeMs: null, idle: progress.idle };
  let min: number | undefined;
  for (const p of pieces) {
    const t = p.applied!.maxEventTimeMs;
    if (t === null) return { maxEventTimeMs: null, idle: progress.idle };
    min = min === undefined ? t : Math.min(min, t);
  }
  return { maxEventTimeMs: min ?? null, idle: progress.idle };
}

/** The progress restricted to `span` (a split child's range; also a partition's own range once known). */
export function clipTo(progress: RangeProgress | undefined, span: HashRange): RangeProgress {
  if (!progress) return { span: hexRange(span), ranges: [], idle: false };
  const [lo, hi] = hexRange(span);
  if (progress.span[0] === lo && progress.span[1] === hi) return progress;
  const ranges = piecesOf(progress, span).filter((p) => p.applied !== null).map((p) => ({ ...p.applied!, lo: toHex(p.start), hi: toHex(p.end) }));
  return { span: [lo, hi], ranges: normalize(ranges), idle: progress.idle };
}

/**
 * A child's progress from its parents': each parent's ranges clipped to the child's span, side by
 * side (their spans are disjoint). A hash no parent applied stays unapplied, so its rows are taken
 * when stage 1 sends them again. Idle when every parent that heard of the source had it idle.
 */
export function mergeRanges(parents: readonly RangeProgress[], span: HashRange): RangeProgress {
  const ranges = parents.flatMap((p) => clipTo(p, span).ranges);
  ranges.sort((a, b) => (fromHex(a.lo) < fromHex(b.lo) ? -1 : 1));
  for (let i = 1; i < ranges.length; i++) {
    if (fromHex(ranges[i]!.lo) <= fromHex(ranges[i - 1]!.hi)) {
      throw new Error(`the parents of a merged shard both applied hash keys ${ranges[i]!.lo}..${ranges[i - 1]!.hi}`);
    }
  }
  return { span: hexRange(span), ranges: normalize(ranges), idle: parents.length > 0 && parents.every((p) => p.idle) };
}

function replace(ranges: readonly AppliedRange[], updated: readonly AppliedRange[]): AppliedRange[] {
  const out: AppliedRange[] = [];
  for (const r of ranges) {
    let pieces: { start: bigint; end: bigint }[] = [{ start: fromHex(r.lo), end: fromHex(r.hi) }];
    for (const u of updated) {
      const [ulo, uhi] = [fromHex(u.lo), fromHex(u.hi)];
      pieces = pieces.flatMap((p) => {
        if (uhi < p.start || ulo > p.end) return [p];
        const left = ulo > p.start ? [{ start: p.start, end: ulo - 1n }] : [];
        const right = uhi < p.end ? [{ start: uhi + 1n, end: p.end }] : [];
        return [...left, ...right];
      });
    }
    for (const p of pieces) out.push({ ...r, lo: toHex(p.start), hi: toHex(p.end) });
  }
  out.push(...updated);
  return out;
}

/** Sorted, with neighbours that hold the same progress joined. */
function normalize(ranges: readonly AppliedRange[]): AppliedRange[] {
  const sorted = [...ranges].sort((a, b) => (fromHex(a.lo) < fromHex(b.lo) ? -1 : 1));
  const out: AppliedRange[] = [];
  for (const r of sorted) {
    const last = out[out.length - 1];
    if (last && fromHex(last.hi) + 1n === fromHex(r.lo) && last.batch === r.batch && last.parts === undefined && r.parts === undefined
      && last.maxEventTimeMs === r.maxEventTimeMs) {
      out[out.length - 1] = { ...last, hi: r.hi };
    } else out.push(r);
  }
  return out;
}

/** Batches of one source shard that `planned` applied in a hash range and `held` did not (`held` lacks them). */
export interface MissingBatches {
  readonly lo: string;
  readonly hi: string;
  /** The first batch missing (the one after `held`'s, or `held`'s own when only some of its parts are in). */
  readonly fromBatch: number;
  readonly toBatch: number;
}

/**
 * Where `planned` is ahead of `held` (both the same partition's progress for one source shard):
 * the batches a planned stage-2 batch would have applied that the records it still holds do not.
 * Stage-1 batch ids start at 0, so a hash `held` never applied misses everything up to `planned`'s.
 */
export function missingBatches(held: RangeProgress | undefined, planned: RangeProgress): MissingBatches[] {
  const out: MissingBatches[] = [];
  for (const r of planned.ranges) {
    for (const p of piecesOf(held, rangeOfHex([r.lo, r.hi]))) {
      const h = p.applied;
      if (h && (h.batch > r.batch || (h.batch === r.batch && (h.parts === undefined || (r.parts !== undefined && h.parts.length >= r.parts.length))))) continue;
      const fromBatch = h === null ? 0 : h.parts === undefined ? h.batch + 1 : h.batch;
      if (fromBatch > r.batch) continue; // an idle record's batch (none committed yet): no rows
      const last = out[out.length - 1];
      if (last && last.fromBatch === fromBatch && last.toBatch === r.batch && fromHex(last.hi) + 1n === p.start) {
        out[out.length - 1] = { ...last, hi: toHex(p.end) };
      } else out.push({ lo: toHex(p.start), hi: toHex(p.end), fromBatch, toBatch: r.batch });
    }
  }
  return out;
}
