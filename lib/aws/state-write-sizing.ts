/**
 * A state store provider for `sluice cost` that keeps state in memory and counts, per commit, the
 * write units the deployed DynamoDB store (dynamodb-state-store.ts, `snapshotByBytes` as the
 * runtime configures it) would spend: a delta's chunks, or, once `snapshotEvery` versions passed and
 * the deltas since the last snapshot outweigh a new one, the snapshot's chunks, its marker (listing
 * what it makes obsolete) and the deletes of what the previous snapshot made obsolete.
 */
import { gzipSync } from 'node:zlib';
import { MemoryStateStoreProvider } from '../state/memory-state-store.js';
import type { StateStore, StateStoreId, StateStoreProvider } from '../state/state-store.js';
import { chunkWriteUnits, deltaMeasuringStore } from './cost-estimate.js';
import { encodeStateJson } from './dynamodb-state-store.js';
import { itemSize, writeUnitsFor, type Item } from './dynamodb-cost.js';

const CHUNK_BYTES = 350 * 1024;

interface StoreLog {
  version: number;
  base: { version: number; bytes: number; entries: number; obsolete: number } | null;
  /** Chunk items of each delta since the base. */
  deltas: number[];
  deltaBytes: number;
  deltaEntries: number;
}

const byKey = (a: [string, unknown], b: [string, unknown]): number => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);

export class DeployedStateSizer implements StateStoreProvider {
  private readonly memory = new MemoryStateStoreProvider();
  private readonly logs = new Map<string, StoreLog>();
  readonly openStores = new Map<string, StateStore<unknown>>();
  /** Write units of every commit so far. */
  units = 0;
  commits = 0;

  constructor(private readonly pkPrefix: string, private readonly snapshotEvery: number) {}

  async open<V>(id: StateStoreId, version: number): Promise<StateStore<V>> {
    const inner = await this.memory.open<V>(id, version);
    const name = `${id.operatorId}/${id.storeName}`;
    const log = this.logs.get(name) ?? { version: 0, base: null, deltas: [], deltaBytes: 0, deltaEntries: 0 };
    this.logs.set(name, log);
    const store = deltaMeasuringStore(inner, (payloadBytes, changedKeys, committed) => {
      this.commits++;
      this.units += this.commitUnits(`${this.pkPrefix}#${name}`, log, payloadBytes, changedKeys, committed as StateStore<unknown>);
    });
    this.openStores.set(name, store as StateStore<unknown>);
    return store;
  }

  private commitUnits(pk: string, log: StoreLog, deltaBytes: number, deltaEntries: number, store: StateStore<unknown>): number {
    log.version++;
    const held = store.size;
    const bytes = log.deltaBytes + deltaBytes;
    const bytesPerEntry = log.base && log.base.entries > 0 ? log.base.bytes / log.base.entries : bytes / Math.max(1, log.deltaEntries + deltaEntries);
    const due = log.version - (log.base?.version ?? 0) >= this.snapshotEvery && bytes >= held * bytesPerEntry;
    if (!due) {
      log.deltas.push(Math.max(1, Math.ceil(deltaBytes / CHUNK_BYTES)));
      log.deltaBytes = bytes;
      log.deltaEntries += deltaEntries;
      return chunkWriteUnits(pk, 'd#', deltaBytes);
    }
    const snapshot = snapshotBytes(store);
    const chunks = Math.max(1, Math.ceil(snapshot / CHUNK_BYTES));
    const obsolete = (log.base ? 1 + Math.max(1, Math.ceil(log.base.bytes / CHUNK_BYTES)) : 0) + log.deltas.reduce((a, b) => a + b, 0);
    const marker: Item = {
      pk: { S: pk }, sk: { S: 'm#000000000001' }, fmt: { N: '1' }, v: { N: '1' }, n: { N: String(chunks) }, h: { S: '0'.repeat(32) },
      entries: { N: String(held) }, bytes: { N: String(snapshot) }, o: { S: JSON.stringify(Array.from({ length: obsolete }, () => 'd#000000000001#0000')) },
    };
    // The previous snapshot's marker listed what this one deletes, one unit per item.
    const purged = log.base?.obsolete ?? 0;
    log.base = { version: log.version, bytes: snapshot, entries: held, obsolete };
    log.deltas = [];
    log.deltaBytes = 0;
    log.deltaEntries = 0;
    return chunkWriteUnits(pk, 's#', snapshot) + writeUnitsFor(itemSize(marker)) + purged;
  }

  /** The gzip'd bytes of every store as it stands (what DynamoDB holds, about). */
  heldBytes(): number {
    return [...this.openStores.values()].reduce((a, s) => a + snapshotBytes(s), 0);
  }
}

function snapshotBytes(store: StateStore<unknown>): number {
  const entries = [...store.entries()].sort(byKey);
  return gzipSync(encodeStateJson({ e: entries }, entries.map((e) => e[1]))).byteLength;
}
