import { randomUUID } from 'node:crypto';
import { MemoryStateStoreProvider } from '../state/memory-state-store.js';
import { MemoryBatchBlameLog } from './batch-blame-log.js';
import type { Checkpoint, CommitEntry, MetadataLog, OffsetSeq, QueryMetadata } from './checkpoint.js';
import { copyPlainData } from './plain-data-copy.js';

/** Entries are copied in and out: neither the writer nor a reader can change what the log holds. */
export class MemoryMetadataLog<T> implements MetadataLog<T> {
  private readonly entries = new Map<number, T>();

  async add(batchId: number, entry: T): Promise<boolean> {
    if (this.entries.has(batchId)) return false;
    this.entries.set(batchId, copyPlainData(entry));
    return true;
  }

  async get(batchId: number): Promise<T | undefined> {
    const e = this.entries.get(batchId);
    return e === undefined ? undefined : copyPlainData(e);
  }

  async getLatest(): Promise<[number, T] | undefined> {
    if (this.entries.size === 0) return undefined;
    const id = Math.max(...this.entries.keys());
    return [id, copyPlainData(this.entries.get(id)!)];
  }

  async purge(beforeBatchId: number): Promise<void> {
    for (const id of [...this.entries.keys()]) if (id < beforeBatchId) this.entries.delete(id);
  }
}

/** A checkpoint that lives as long as the object: restart a query by passing the same one. */
export class MemoryCheckpoint implements Checkpoint {
  readonly offsetLog = new MemoryMetadataLog<OffsetSeq>();
  readonly commitLog = new MemoryMetadataLog<CommitEntry>();
  readonly stateStore = new MemoryStateStoreProvider();
  readonly blameLog = new MemoryBatchBlameLog();
  private metadata: QueryMetadata | undefined;

  constructor(readonly name: string = `memory-checkpoint-${randomUUID()}`) {}

  async readQueryMetadata(): Promise<QueryMetadata | undefined> {
    return this.metadata;
  }

  async writeQueryMetadata(metadata: QueryMetadata): Promise<void> {
    this.metadata = metadata;
  }

  async replaceQueryMetadata(expected: QueryMetadata, metadata: QueryMetadata): Promise<boolean> {
    if (JSON.stringify(this.metadata) !== JSON.stringify(expected)) return false;
    this.metadata = metadata;
    return true;
  }
}
