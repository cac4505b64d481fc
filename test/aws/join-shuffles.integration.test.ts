/**
 * A shuffle before each stateful operator that needs one, on the emulators through the real
 * handlers: orders ⋈ payments ⋈ shipments where the second join is on `amount = zone` (its own hop,
 * three stages), a join → count keyed by the join key (in the join's stage: two stages), a join →
 * count by amount (its own hop) and a windowed aggregate feeding a join (Spark 4's chained stateful
 * operators; three stages). Each on 1, 2 and 4 shards per stream (CHAIN_SHARDS overrides) with
 * random partition keys: the S3 files sink ends with the in-memory engine's rows. CHAIN_METRICS
 * lines give stages, hop traffic per 1,000 events and time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { compileQuery } from '../../lib/query/compiled-query.js';
import type { MultiSourceQueryDefinition } from '../../lib/query/query-definition.js';
import { inMemoryJoin, joinEvents } from '../support/join-queries.js';
import {
  aggregateThenJoin, inMemoryThree, joinThenCountByAmount, joinThenCountByJoinKey, joinThenJoinOnOtherKey, shipmentsByAmount,
} from '../support/chain-queries.js';
import { runChainOnEmulators, type ChainEvents } from '../support/chain-emulator-run.js';

const SHARD_COUNTS = (process.env.CHAIN_SHARDS ?? '1,2,4').split(',').map(Number);
const INTERNAL_SHARDS = Number(process.env.CHAIN_INTERNAL_SHARDS ?? 2);

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

const inTwo = (def: MultiSourceQueryDefinition, events: ChainEvents) => inMemoryJoin(def, events as ReturnType<typeof joinEvents>);
const inThree = (def: MultiSourceQueryDefinition, events: ChainEvents) => inMemoryThree(def, events as Parameters<typeof inMemoryThree>[1]);
const withShipments = (e: ReturnType<typeof joinEvents>): ChainEvents => ({ ...e, shipments: shipmentsByAmount(e.orders, 5) });

const shapes: [string, MultiSourceQueryDefinition, ChainEvents, typeof inTwo, number][] = [
  ['inner join → inner join on amount = zone (its own hop)', joinThenJoinOnOtherKey('shuffle-join-join'), withShipments(joinEvents(240, 11)), inThree, 3],
  ['inner join → windowed count by the join key (in the join\'s stage)', joinThenCountByJoinKey('shuffle-join-count-key'), joinEvents(360, 7), inTwo, 2],
  ['inner join → windowed count by amount (its own hop)', joinThenCountByAmount('shuffle-join-count-amount'), joinEvents(360, 7), inTwo, 3],
  ['windowed aggregate → inner join (Spark 4 chained operators)', aggregateThenJoin('shuffle-agg-join'), joinEvents(360, 9), inTwo, 3],
];

describe('a shuffle before each stateful operator that needs one, on the emulators', () => {
  for (const [name, query, events, inMemory, stages] of shapes) {
    it(`${name}: ${stages} stages, the in-memory answer on ${SHARD_COUNTS.join(', ')} shards per stream`, async () => {
      expect(compileQuery(query, { allowRepartition: true }).hops.length + 1).toBe(stages);
      const expected = await inMemory(query, events);
      expect(expected.length).toBeGreaterThan(10);
      await runChainOnEmulators(emulators, query, events, expected, SHARD_COUNTS, INTERNAL_SHARDS);
    }, 1_800_000);
  }
});
