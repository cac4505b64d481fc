/**
 * Spark's versioned state store, per stateful operator and store name. Version N is the state
 * after batch N-1 committed, so batch N loads version N and, on commit, writes version N+1. A
 * re-executed batch loads the same version again and gets the same state.
 *
 * Opening and committing are asynchronous (a remote store loads and writes there); reads and
 * writes during a batch are synchronous against the loaded state, so operators stay plain loops.
 *
 * Values are immutable once put: operators replace a value instead of mutating it, which lets a
 * store keep older versions by sharing values.
 */
export interface StateStore<V = unknown> {
  readonly version: number;
  get(key: string): V | undefined;
  put(key: string, value: V): void;
  remove(key: string): void;
  /** Live entries including uncommitted changes. */
  entries(): IterableIterator<[string, V]>;
  readonly size: number;
  /** Makes the changes version `version + 1`. */
  commit(): Promise<number>;
  /** Drops the uncommitted changes. */
  abort(): void;
  /**
   * For stores that live in this process (the memory store): the operator's own versioned
   * structure, created by `create` on first use and kept by the store across batches and query
   * restarts. The store then versions it along with itself: commits, aborts and rolls it back. An
   * operator that uses it keeps its state there and writes nothing through put/remove. Stores that
   * persist key-value deltas (DynamoDB) do not offer it.
   */
  ownTable?<T extends VersionedTable>(create: () => T): T;
  /**
   * An index the operator derives from the store's committed entries (timers by time, entries by
   * key), kept by the store with its committed state across batches: `build` runs once (on the
   * committed entries, without this batch's writes), then the store tells the view every committed
   * change. A reload, abort or rollback drops it (built again on next use). Stores without it leave
   * the operator to build its index from `entries()` each batch.
   */
  view?<T extends StateView>(name: string, build: (committed: Iterable<[string, V]>) => T): T;
}

/** See `StateStore.view`. */
export interface StateView {
  /** A committed put (`value`) or removal (undefined) of `key`. */
  apply(key: string, value: unknown): void;
  /** After the changes of one commit were applied. */
  committed?(): void;
}

/** An operator's in-memory state structure, versioned by the state store that holds it. */
export interface VersionedTable {
  /** Its changes since the last commit become version `version`. */
  commit(version: number): void;
  /** Undoes its changes since the last commit. */
  abort(): void;
  /** Undoes committed versions after `version` (a re-executed batch). */
  rollBackTo(version: number): void;
  /** Drops what `rollBackTo` would need to go back to versions before `version`. */
  forgetBefore(version: number): void;
  /** Its state as the key-value pairs a key-value store would hold (for inspection and tests). */
  entries(): IterableIterator<[string, unknown]>;
  readonly size: number;
}

export interface StateStoreId {
  readonly operatorId: number;
  readonly storeName: string;
}

export interface StateStoreProvider {
  /** Opens the store at `version` (0 = empty). Throws if that version was never committed. */
  open<V>(id: StateStoreId, version: number): Promise<StateStore<V>>;
}
