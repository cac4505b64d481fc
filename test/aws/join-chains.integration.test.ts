/**
 * Chains of stateful operators over several source streams on the emulators (kinesis-mock, DynamoDB
 * Local, s3rver), through the real handlers: orders ⋈ payments then a windowed sum (three stages,
 * two internal streams), an aggregate or a deduplication over a union of the two streams, and
 * orders ⋈ payments ⋈ shipments on one key (join → join, three streams into one stage 2), and
 * payments ⟕ orders ⟕ shipments on a NULL-safe key (the second join behind its own hop). Each
 * on 2 and 4 shards per stream (CHAIN_SHARDS overrides) with random partition keys: the S3 files
 * sink ends with the in-memory engine's rows. Each run logs CHAIN_METRICS (records, batches, hop
 * traffic, time) for the closing note.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import type { MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import { inMemoryJoin, joinEvents } from '../support/join-queries.js';
import {
  inMemoryThree, joinThenJoin, joinThenWindowedSum, shipmentsFor, unionThenDedup, unionThenWindowedCount,
} from '../support/chain-queries.js';
import { runChainOnEmulators } from '../support/chain-emulator-run.js';
import { nullSafeEvents, nullSafeOuterJoins } from '../support/null-key-join.js';

const SHARD_COUNTS = (process.env.CHAIN_SHARDS ?? '2,4').split(',').map(Number);
const INTERNAL_SHARDS = Number(process.env.CHAIN_INTERNAL_SHARDS ?? 2);

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

type Events = Record<string, readonly object[]>;
const withShipments = (e: ReturnType<typeof joinEvents>): Events => ({ ...e, shipments: shipmentsFor(e.orders, 5) });

const shapes: [string, MultiSourceQueryDefinition, Events, (def: MultiSourceQueryDefinition, events: Events) => Promise<string[]>][] = [
  ['inner join → windowed sum (append → S3 files), three stages', joinThenWindowedSum('chain-join-sum'), joinEvents(360, 7), inTwo],
  ['windowed count over a union of the two streams (append → S3 files)', unionThenWindowedCount('chain-union-count'), joinEvents(240, 11), inTwo],
  ['deduplication within the watermark over a union of the two streams (append → S3 files)', unionThenDedup('chain-union-dedup'), joinEvents(240, 11), inTwo],
  ['left outer join → inner join with a third stream on one key (append → S3 files)', joinThenJoin('chain-join-join', 'left_outer'), withShipments(joinEvents(240, 11)), inThree],
  // The second join compares order_id <=> sid: padded payments meet NULL-sid shipments only behind its own hop.
  ['left outer join → left outer join on order_id <=> sid, NULL keys (append → S3 files)', nullSafeOuterJoins('chain-null-safe'), { ...nullSafeEvents(120, 5) }, inThree],
];

function inTwo(def: MultiSourceQueryDefinition, events: Events): Promise<string[]> {
  return inMemoryJoin(def, events as ReturnType<typeof joinEvents>);
}

function inThree(def: MultiSourceQueryDefinition, events: Events): Promise<string[]> {
  return inMemoryThree(def, events as Parameters<typeof inMemoryThree>[1]);
}

describe('chains of stateful operators over two streams, on the emulators', () => {
  for (const [name, query, events, inMemory] of shapes) {
    it(`${name}: the in-memory answer on ${SHARD_COUNTS.join(', ')} shards per stream`, async () => {
      const expected = await inMemory(query, events);
      expect(expected.length).toBeGreaterThan(2);
      await runChainOnEmulators(emulators, query, events, expected, SHARD_COUNTS, INTERNAL_SHARDS);
    }, 1_800_000);
  }
});
