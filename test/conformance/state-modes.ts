/**
 * The two ways state reaches the operators, and the conformance runs each scenario under both:
 *
 * - own-table: the in-process memory store (lib/state/memory-state-store.ts) hands operators that
 *   ask for it their own versioned structure (`StateStore.ownTable`); this is what tests and
 *   `sluice dev` use.
 * - key-value: the deployed store, lib/aws/dynamodb-state-store.ts itself, over an in-memory item
 *   table (./memory-dynamodb.ts) or DynamoDB Local. No ownTable: operators read and write every
 *   change through get/put/remove, commits write deltas and snapshots, and each (re)start of the
 *   query gets a new provider with an empty cache, as a cold Lambda container does, so state after
 *   a restart is what was written to the table. Snapshots every 3 versions (20 deployed) so that the
 *   scenarios' few batches cover snapshots, their markers and purging too.
 */
import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDbStateStoreProvider, StateCache } from '../../lib/aws/dynamodb-state-store.js';
import type { Checkpoint } from '../../lib/checkpoint/checkpoint.js';
import type { MemoryCheckpoint } from '../../lib/checkpoint/memory-checkpoint.js';
import { MemoryDynamoDb } from './memory-dynamodb.js';

export type StateModeName = 'own-table' | 'key-value';
export const STATE_MODES: readonly StateModeName[] = ['own-table', 'key-value'];

/** Snapshot interval in key-value mode: small, so that few batches reach a snapshot. */
export const KEY_VALUE_SNAPSHOT_EVERY = 3;

/** Where key-value mode keeps its items: one in-memory table per scenario, or a real endpoint. */
export interface KeyValueBackend {
  readonly client: DynamoDBClient;
  readonly table: string;
}

/** Per scenario: the checkpoint a (re)started query is given, from the scenario's memory checkpoint. */
export interface StateMode {
  readonly name: StateModeName;
  checkpointFor(checkpoint: MemoryCheckpoint): Checkpoint;
}

export const ownTableMode: StateMode = { name: 'own-table', checkpointFor: (checkpoint) => checkpoint };

export function keyValueMode(backend?: KeyValueBackend): StateMode {
  const { client, table } = backend ?? { client: new MemoryDynamoDb().asClient(), table: 'state' };
  // A fresh query name per scenario keeps scenarios apart on a shared table.
  const run = randomUUID().slice(0, 8);
  return {
    name: 'key-value',
    checkpointFor(checkpoint) {
      const stateStore = new DynamoDbStateStoreProvider({
        client, table, queryName: `${run}-${checkpoint.name}`, partitionId: 'p0',
        snapshotEvery: KEY_VALUE_SNAPSHOT_EVERY, cache: new StateCache(),
      });
      return {
        offsetLog: checkpoint.offsetLog,
        commitLog: checkpoint.commitLog,
        stateStore,
        readQueryMetadata: () => checkpoint.readQueryMetadata(),
        writeQueryMetadata: (metadata) => checkpoint.writeQueryMetadata(metadata),
      };
    },
  };
}
