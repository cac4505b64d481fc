/**
 * Deterministic sample events for `sluice dev` and the chaos harness: hourly sales per store, the
 * shape of seed 003 (`{ "store_id": "north", "product": "tea", "amount": 12.25, "ts": "2024-05-01T14:40:00Z" }`).
 *
 * Everything comes from a seeded PRNG, so the same options give the same records byte for byte.
 * Amounts are multiples of 0.25: their sums are exact in binary floating point whatever the order
 * of addition, so results do not depend on where batch boundaries fall (which faults change).
 */
import type { KinesisSourceSpec } from '../query/query-definition.js';
import { sourceSchemaOf } from '../query/validate-query.js';

/** One Kinesis record to put: the payload text and its partition key. */
export interface SampleRecord {
  readonly data: string;
  readonly partitionKey: string;
  /** Records of wave 2 are put after wave 1 is processed (late rows arriving late). */
  readonly wave: number;
  /** What the record is meant to show. */
  readonly kind: 'event' | 'late' | 'malformed';
}

/** mulberry32: a small, fast, seedable PRNG (uniform in [0, 1)). */
export function createPrng(seed: number): () => number {
  let a = (seed >>> 0) || 0x9e3779b9;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const randomInt = (rnd: () => number, lo: number, hi: number): number => lo + Math.floor(rnd() * (hi - lo + 1));
export const pick = <T>(rnd: () => number, items: readonly T[]): T => items[Math.floor(rnd() * items.length)]!;

/** A random-looking partition key (for records whose declared key column cannot be read). */
export function randomPartitionKey(rnd: () => number): string {
  return `pk-${Math.floor(rnd() * 0xffffffff).toString(16).padStart(8, '0')}`;
}

export interface SalesEventOptions {
  readonly seed?: number;
  readonly stores?: readonly string[];
  /** Event-time start (ISO, UTC). */
  readonly start?: string;
  readonly hours?: number;
  /** Average events per store and hour. */
  readonly eventsPerStoreHour?: number;
  /**
   * How far (minutes) an event may be older than the newest event put before it. Below the
   * query's 15-minute watermark delay, no on-time event can ever be dropped, on any shard, in any
   * interleaving of the shards.
   */
  readonly maxDisorderMinutes?: number;
  /** Rows far behind the watermark, put in wave 2 (after everything else was processed). */
  readonly lateRows?: number;
  /** Undecodable records mixed into wave 1 (the first is bad JSON, the others have wrong types). */
  readonly malformed?: number;
}

export const DEFAULT_STORES = ['north', 'south', 'east', 'west', 'central'] as const;
/** Every event also names a product (queries keyed by it need a repartition stage: the stream is partitioned by store). */
export const DEFAULT_PRODUCTS = ['coffee', 'tea', 'cake', 'sandwich'] as const;

const iso = (ms: number): string => new Date(ms).toISOString().replace('.000Z', 'Z');

/**
 * Sales events in (almost) event-time order, a few late rows in wave 2 and a few malformed
 * records; partition key = `store_id`.
 */
export function generateSalesEvents(options: SalesEventOptions = {}): SampleRecord[] {
  const rnd = createPrng(options.seed ?? 3);
  const stores = options.stores ?? DEFAULT_STORES;
  const startMs = Date.parse(options.start ?? '2024-05-01T12:00:00Z');
  const hours = options.hours ?? 4;
  const perStoreHour = options.eventsPerStoreHour ?? 6;
  const disorderMs = (options.maxDisorderMinutes ?? 10) * 60_000;
  const endMs = startMs + hours * 3_600_000;

  // Event times: per store and hour, a Poisson-ish count spread over the hour, to the minute.
  const events: { store: string; product: string; amount: number; tsMs: number }[] = [];
  for (let h = 0; h < hours; h++) {
    for (const store of stores) {
      const n = Math.max(1, perStoreHour + randomInt(rnd, -2, 2));
      for (let i = 0; i < n; i++) {
        const tsMs = startMs + h * 3_600_000 + randomInt(rnd, 0, 59) * 60_000;
        events.push({ store, product: '', amount: randomInt(rnd, 4, 240) / 4, tsMs });
      }
    }
  }
  // Drawn separately, so that the other fields stay what they were before products existed.
  const productRnd = createPrng((options.seed ?? 3) ^ 0x5eed);
  const product = (): string => pick(productRnd, DEFAULT_PRODUCTS);
  for (const e of events) e.product = product();
  // Put order: by event time plus a random delay of at most `disorderMs`. An event put after
  // another is then at most `disorderMs` older than it (tsE + dE >= tsF + dF, 0 <= d <= disorderMs).
  const keyed = events.map((e) => ({ e, order: e.tsMs + Math.floor(rnd() * (disorderMs + 1)) }));
  keyed.sort((a, b) => a.order - b.order || a.e.tsMs - b.e.tsMs || (a.e.store < b.e.store ? -1 : a.e.store > b.e.store ? 1 : 0));
  events.splice(0, events.length, ...keyed.map((k) => k.e));
  const records: SampleRecord[] = events.map((e) => ({
    data: JSON.stringify({ store_id: e.store, product: e.product, amount: e.amount, ts: iso(e.tsMs) }),
    partitionKey: e.store,
    wave: 1,
    kind: 'event',
  }));

  // Malformed records at seeded positions of wave 1.
  const malformed = options.malformed ?? 2;
  for (let m = 0; m < malformed; m++) {
    const position = randomInt(rnd, Math.floor(records.length / 4), records.length);
    const store = pick(rnd, stores);
    const record: SampleRecord = m === 0
      ? { data: `{"store_id": "${store}", "amount": 12.5, "ts": "2024-05-01T1`, partitionKey: randomPartitionKey(rnd), wave: 1, kind: 'malformed' }
      : { data: JSON.stringify({ store_id: store, product: product(), amount: 'a lot', ts: iso(startMs + randomInt(rnd, 0, hours * 60 - 1) * 60_000) }), partitionKey: store, wave: 1, kind: 'malformed' };
    records.splice(position, 0, record);
  }

  // Late rows: event times in the first hour, put after everything else (the watermark is then
  // near the end of the data on every shard, hours past them).
  const late = options.lateRows ?? 3;
  // Distinct stores (while there are enough): Spark counts late rows after the partial
  // aggregation, so two late rows of one (hour, store) would count as one.
  const lateStores = stores.map((s) => [rnd(), s] as const).sort((a, b) => a[0] - b[0]).map(([, s]) => s);
  for (let l = 0; l < late; l++) {
    const store = lateStores[l % lateStores.length]!;
    const tsMs = startMs + randomInt(rnd, 0, 45) * 60_000;
    records.push({ data: JSON.stringify({ store_id: store, product: product(), amount: randomInt(rnd, 4, 240) / 4, ts: iso(tsMs) }), partitionKey: store, wave: 2, kind: 'late' });
  }
  // On-time events in wave 2, in the hour after the data (15 to 24 minutes past it, so never
  // behind one another's watermark): their shard's watermark moves past the last hour of wave 1,
  // and once every shard is idle, the others' windows of that hour close too.
  if (late > 0) {
    for (const store of lateStores.slice(-2)) {
      records.push({
        data: JSON.stringify({ store_id: store, product: product(), amount: randomInt(rnd, 4, 240) / 4, ts: iso(endMs + randomInt(rnd, 15, 24) * 60_000) }),
        partitionKey: store, wave: 2, kind: 'event',
      });
    }
  }
  return records;
}

/**
 * Records from a JSON Lines (or CSV) file's lines: the partition key is the value of the source's
 * declared partition-key column when it can be read, else random (seeded).
 */
export function recordsFromLines(lines: readonly string[], source: KinesisSourceSpec, seed = 1): SampleRecord[] {
  const rnd = createPrng(seed);
  const keyOf = partitionKeyReader(source);
  const out: SampleRecord[] = [];
  for (const raw of lines) {
    const line = raw.replace(/\r$/, '');
    if (line.trim() === '') continue;
    out.push({ data: line, partitionKey: keyOf(line) ?? randomPartitionKey(rnd), wave: 1, kind: 'event' });
  }
  return out;
}

/** The value of the source's declared partition-key column in one record's text, if it can be read. */
export function partitionKeyReader(source: KinesisSourceSpec): (line: string) => string | undefined {
  const key = source.partitionKey?.toLowerCase();
  const format = source.format ?? 'json';
  const schema = sourceSchemaOf(source);
  const keyIndex = key === undefined ? -1 : schema.findIndex((f) => f.name.toLowerCase() === key);
  return (line) => {
    if (key === undefined) return undefined;
    if (format === 'json') {
      try {
        const parsed: unknown = JSON.parse(line);
        if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
          const entry = Object.entries(parsed as Record<string, unknown>).find(([k]) => k.toLowerCase() === key);
          if (entry && entry[1] !== null && entry[1] !== undefined && typeof entry[1] !== 'object') return String(entry[1]);
        }
      } catch { /* malformed: random key, the record is dead-lettered anyway */ }
    } else if (format === 'csv' && keyIndex >= 0) {
      const field = line.split(source.csvDelimiter ?? ',')[keyIndex];
      if (field !== undefined && field !== '') return field.replace(/^"(.*)"$/, '$1');
    }
    return undefined;
  };
}
