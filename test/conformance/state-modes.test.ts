import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import type { StateStore, StateStoreId } from '../../lib/state/state-store.js';
import { MemoryDynamoDb } from './memory-dynamodb.js';
import { runScenario } from './scenario-runner.js';
import { keyValueMode, ownTableMode, type StateMode } from './state-modes.js';

const scenario = (id: string): unknown => JSON.parse(readFileSync(new URL(`./scenarios/${id}.json`, import.meta.url), 'utf8'));
/** Stateful, with a restart in the middle and four batches (a snapshot at version 3). */
const WITH_RESTART = 'agg-complete-simple-count';

/** `mode`, recording every store the operators are given. */
function observed(mode: StateMode, stores: StateStore[]): StateMode {
  return {
    name: mode.name,
    checkpointFor(checkpoint) {
      const inner = mode.checkpointFor(checkpoint);
      return {
        offsetLog: inner.offsetLog,
        commitLog: inner.commitLog,
        readQueryMetadata: () => inner.readQueryMetadata(),
        writeQueryMetadata: (metadata) => inner.writeQueryMetadata(metadata),
        stateStore: {
          open: async <V>(id: StateStoreId, version: number): Promise<StateStore<V>> => {
            const store = await inner.stateStore.open<V>(id, version);
            stores.push(store as StateStore);
            return store;
          },
        },
      };
    },
  };
}

/** Loses every write: a store that kept state only in memory would not notice. */
class ForgetfulDynamoDb extends MemoryDynamoDb {
  override async send(command: unknown): Promise<unknown> {
    if (command instanceof PutItemCommand) return {};
    return super.send(command);
  }
}

describe('conformance state modes', () => {
  it('own-table mode gives the operators their own table', async () => {
    const stores: StateStore[] = [];
    expect(await runScenario(scenario(WITH_RESTART), observed(ownTableMode, stores))).toEqual({ id: WITH_RESTART, passed: true });
    expect(stores.length).toBeGreaterThan(0);
    expect(stores.every((s) => typeof s.ownTable === 'function')).toBe(true);
  });

  it('key-value mode runs the DynamoDB store: no own table, deltas and snapshots written', async () => {
    const db = new MemoryDynamoDb();
    const stores: StateStore[] = [];
    const result = await runScenario(scenario(WITH_RESTART), observed(keyValueMode({ client: db.asClient(), table: 't' }), stores));
    expect(result).toEqual({ id: WITH_RESTART, passed: true });
    expect(stores.length).toBeGreaterThan(0);
    expect(stores.every((s) => s.ownTable === undefined)).toBe(true);
    const kinds = new Set(db.items('t').map((i) => i.sk!.S![0]));
    expect([...kinds].sort()).toEqual(['d', 'm', 's']);
  });

  it('key-value mode reloads state from the table after a restart', async () => {
    const result = await runScenario(scenario(WITH_RESTART), keyValueMode({ client: new ForgetfulDynamoDb().asClient(), table: 't' }));
    expect(result.passed).toBe(false);
    expect(result.reason).toMatch(/State version \d+ of .* (was never committed|cannot be rebuilt)/);
  });
});
