/**
 * The short GetRecords page's defence: a KinesisShardReader call that meets a short page reads on
 * from the page's NextShardIterator until it has what it was asked for. A call that returns after
 * a short page without reading on hands the engine fewer records than the shard holds: a planned
 * batch re-run over part of its records (refused at best, or taken for retention loss), a drain
 * that plans less than it could and thinks the shard idle. The answer often survives (the retry
 * reads again), so each short page is followed to the end of the reader call that met it.
 *
 * The reader calls are wrapped once, process-wide (the simulated containers share the class);
 * AsyncLocalStorage ties a GetRecords request to the call it belongs to, as one container may
 * read several shards at once. A call that throws is not judged: it returned nothing.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { KinesisShardReader } from '../../aws/kinesis-shard-reader.js';

/** What a reader call was asked for: the planned batch's last record, or a number of records. */
export type ReadGoal = { readonly until: bigint } | { readonly limit: number };

export interface ShortPage {
  readonly at: number;
  /** The Limit the reader asked for, and the one the fault gave the request. */
  readonly asked: number;
  readonly given: number;
  readonly sequenceNumbers: readonly bigint[];
  readonly nextIterator: string | undefined;
  readonly millisBehindLatest: number;
  /** Where the verdict goes (the container's fault controller's ledger). */
  readonly report: (detail: string) => void;
}

export interface ReaderCall {
  readonly what: string;
  readonly goal: ReadGoal;
  readonly shorts: ShortPage[];
  /** The iterators GetRecords was sent with during the call. */
  readonly readFrom: Set<string>;
}

const calls = new AsyncLocalStorage<ReaderCall>();

/** The reader call the current request belongs to, if any. */
export const currentReaderCall = (): ReaderCall | undefined => calls.getStore();

/**
 * Why a short page cut `call` short, or undefined when the call read on from it or needed no
 * more: its records reached the planned last one, the call had its limit, the shard ended (no
 * next iterator), or an empty page at the tip (nothing more to read).
 */
export function cutShort(call: ReaderCall, page: ShortPage, returned: number): string | undefined {
  if (page.given >= page.asked || page.nextIterator === undefined || call.readFrom.has(page.nextIterator)) return undefined;
  if ('until' in call.goal) {
    const until = call.goal.until;
    if (page.sequenceNumbers.some((s) => s >= until)) return undefined;
  } else if (returned >= call.goal.limit) return undefined;
  if (page.sequenceNumbers.length === 0 && page.millisBehindLatest === 0) return undefined;
  return `${call.what}: a short page (Limit ${page.given} for ${page.asked}, ${page.sequenceNumbers.length} records) `
    + `ended the read with ${returned} records, not read on from its next iterator`;
}

/** Runs one reader call (what it was asked for: `goal`), judging every short page it meets when it returns `records`. */
export async function withinReaderCall<T>(what: string, goal: ReadGoal, run: () => Promise<T>, records: (result: T) => readonly unknown[]): Promise<T> {
  const call: ReaderCall = { what, goal, shorts: [], readFrom: new Set() };
  return calls.run(call, async () => {
    const result = await run();
    const returned = records(result).length;
    for (const page of call.shorts) {
      const why = cutShort(call, page, returned);
      if (why) page.report(why);
    }
    return result;
  });
}

let wrapped = false;

/** Wraps KinesisShardReader's `read` and `readAfter` (once) so every short page is judged at the call's end. */
export function watchShortPages(): void {
  if (wrapped) return;
  wrapped = true;
  const proto = KinesisShardReader.prototype;
  const read = proto.read;
  const readAfter = proto.readAfter;
  proto.read = function (shardId, first, last) {
    return withinReaderCall(`read ${shardId} ${first}..${last}`, { until: BigInt(last) }, () => read.call(this, shardId, first, last), (r) => r);
  };
  proto.readAfter = function (shardId, after, limit = 10_000, startAtMs) {
    return withinReaderCall(`readAfter ${shardId} ${after ?? 'start'} limit ${limit}`, { limit },
      () => readAfter.call(this, shardId, after, limit, startAtMs), (p) => p.records);
  };
}
