/**
 * Where a re-drive batch of a one-stage stateful query runs, per record. Its state lives in the
 * partition of the shard the record came from, until that shard is closed by a reshard: then its
 * children were seeded from its final state (lib/checkpoint/reshard-seed.ts), each with the
 * entries whose partition-key value hashes into its range (a split) or the union (a merge). Kinesis
 * put the record by the MD5 of its partition key, and the source dead-letters a record whose key
 * contradicts its partition-key column, so the record's own partition key says which child holds
 * the state its rows touch: follow the children whose hash-key range holds it down to the open one.
 *
 * Not possible when a split is crossed and the stage's state cannot be divided by key (a global
 * aggregation, a key without the stream's partition key): then the split children were refused
 * (RESHARD_WITH_STATE), and the records are refused with that reason too.
 */
import type { Shard } from '@aws-sdk/client-kinesis';
import { inHashKeyRange, kinesisHashKey, type HashKeyRange, type StoreRouting } from '../state/state-routing.js';

export type RedriveTarget =
  | { readonly shardId: string }
  | { readonly refused: string };

const rangeOf = (shard: Shard): HashKeyRange => ({ start: BigInt(shard.HashKeyRange!.StartingHashKey!), end: BigInt(shard.HashKeyRange!.EndingHashKey!) });
const isOpen = (shard: Shard): boolean => shard.SequenceNumberRange?.EndingSequenceNumber === undefined;

/** Why a stage's state cannot follow its keys through a split, or null when it can. */
export function indivisibleState(stores: readonly StoreRouting[]): string | null {
  const store = stores.find((s) => s.routingKey === null);
  return store ? `the state of stateful operator ${store.id.operatorId} cannot be divided by key (${store.unroutable ?? 'no routing key'})` : null;
}

/**
 * The open shard whose partition holds the state of a record of `originShardId` with
 * `partitionKey`: the origin itself while open, else its descendant by hash key.
 */
export function redriveTargetOf(shards: readonly Shard[], originShardId: string, partitionKey: string, indivisible: string | null): RedriveTarget {
  const byId = new Map(shards.map((s) => [s.ShardId!, s]));
  let current = byId.get(originShardId);
  if (!current) return { refused: `shard ${originShardId} is no longer listed by the stream` };
  const hash = kinesisHashKey(partitionKey);
  while (!isOpen(current)) {
    const parentId: string = current.ShardId!;
    const parentRange = rangeOf(current);
    const child = shards.find((s) => (s.ParentShardId === parentId || s.AdjacentParentShardId === parentId) && inHashKeyRange(hash, rangeOf(s)));
    if (!child) return { refused: `no child of the closed shard ${parentId} holds the record's hash key` };
    const range = rangeOf(child);
    const split = range.start > parentRange.start || range.end < parentRange.end;
    if (split && indivisible !== null) return { refused: `shard ${parentId} was split, and ${indivisible}` };
    current = child;
  }
  return { shardId: current.ShardId! };
}
