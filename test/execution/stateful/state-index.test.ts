import { describe, expect, it } from 'vitest';
import { MemoryStateStoreProvider } from '../../../lib/state/memory-state-store.js';
import { DynamoDbStateStoreProvider, StateCache } from '../../../lib/aws/dynamodb-state-store.js';
import type { StateStore, StateStoreProvider } from '../../../lib/state/state-store.js';
import { KeyedState, stateKeys } from '../../../lib/execution/stateful/keyed-state.js';
import { MemoryDynamoDb } from '../../conformance/memory-dynamodb.js';

const id = { operatorId: 0, storeName: 'default' };

/** The store as a batch sees it, failing if anything lists the whole state. */
function noScan(store: StateStore<unknown>): StateStore<unknown> {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'entries') return () => { throw new Error('the batch scanned the whole state'); };
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

const providers: [string, () => StateStoreProvider][] = [
  ['memory', () => new MemoryStateStoreProvider()],
  ['DynamoDB (warm cache)', () => new DynamoDbStateStoreProvider({
    client: new MemoryDynamoDb().asClient(), table: 'state', queryName: 'q', partitionId: 'p0', cache: new StateCache(),
  })],
];

describe.each(providers)('the kept timer and TTL index (%s store)', (_name, provider) => {
  it('finds due timers and expired values without listing the state, and survives an aborted batch', async () => {
    const p = provider();
    let store = await p.open<unknown>(id, 0);
    let state = new KeyedState(store, 1_000);
    for (let i = 0; i < 100; i++) {
      const key = `k${i}`;
      state.registerTimer(key, [key], 10_000 + i * 100);
      state.put(stateKeys.value('v', key), [[key], i, i < 10 ? 5_000 : null]);
    }
    expect(state.earliestTimerMs()).toBe(10_000);
    expect(state.earliestExpiryMs()).toBe(5_000);
    await store.commit();

    // Batch 1 at 10,250 ms: timers k0..k2 are due, the 10 TTL'd values expired; then it aborts.
    store = noScan(await p.open<unknown>(id, 1));
    state = new KeyedState(store, 10_250);
    expect(state.expiredAtStart.sort()).toEqual(Array.from({ length: 10 }, (_, i) => stateKeys.value('v', `k${i}`)).sort());
    const due = state.expiredTimers(10_250);
    expect(due.map((t) => t.key)).toEqual(['k0', 'k1', 'k2']);
    for (const t of due) state.deleteTimer(t.key, t.expiryMs);
    state.registerTimer('k50', ['k50'], 9_000);
    expect(state.expiredTimers(10_250).map((t) => t.key)).toEqual(['k50']);
    expect(state.listTimers('k50')).toEqual([9_000, 15_000]);
    expect(state.timerCount()).toBe(98);
    store.abort();

    // The same batch again: the abort left the index as committed.
    store = noScan(await p.open<unknown>(id, 1));
    state = new KeyedState(store, 10_250);
    expect(state.expiredTimers(10_250).map((t) => t.key)).toEqual(['k0', 'k1', 'k2']);
    expect(state.listTimers('k50')).toEqual([15_000]);
    for (const t of state.expiredTimers(10_250)) state.deleteTimer(t.key, t.expiryMs);
    expect(state.removeExpired()).toBe(10);
    expect(state.earliestExpiryMs()).toBe(null);
    await store.commit();

    // Batch 2: what batch 1 committed is in the index.
    store = noScan(await p.open<unknown>(id, 2));
    state = new KeyedState(store, 10_400);
    expect(state.expiredTimers(10_400).map((t) => t.key)).toEqual(['k3', 'k4']);
    expect(state.earliestTimerMs()).toBe(10_300);
    expect(state.timerCount()).toBe(97);
    expect(state.expiredAtStart).toEqual([]);
  });
});
