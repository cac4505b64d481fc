/**
 * The faults the chaos harness injects, where they strike, and the seeded plan of which
 * occurrence each one hits.
 *
 * Every fault is tied to a countable point of a run ("the 7th state-table write", "the 3rd
 * invocation"): a fault-free run counts how often each point occurs, and a plan picks, from the
 * seed, which occurrence each fault hits. The same seed gives the same plan; which shard and batch
 * that occurrence belongs to can differ between runs, as shards run concurrently.
 */
import { pick, randomInt } from '../sample-events.js';
import { RetryLedger } from './retry-ledger.js';

export const FAULT_KINDS = [
  /** The process dies right after the sink's write returned (stage 1: PutRecords to the internal stream), before state and commit. */
  'kill-after-sink-write',
  /**
   * The process dies inside a sink write: S3 files staged but not their manifest entry, or some of a
   * committed batch's files revealed but not all; some DynamoDB upserts done.
   */
  'kill-mid-sink-write',
  /** The process dies between two state writes: a snapshot chunk written, not its marker (nor the commit). */
  'kill-between-state-writes',
  /** The process dies after the state version was written, before the commit-log write. */
  'kill-after-state-commit',
  /** The process dies after the batch was planned (offset log), before it ran. */
  'kill-after-plan',
  /** The process dies right after the commit-log transaction, before the watermark publish and the response. */
  'kill-after-commit',
  /** The invocation finished, then the process died before Lambda got the response (redelivery, cold container). */
  'kill-before-response',
  /** The response was lost on the way back (redelivery, warm container). */
  'response-lost',
  /** A DynamoDB request fails with ProvisionedThroughputExceeded / Throttling / RequestLimitExceeded. */
  'throttle-dynamodb',
  /** An S3 request fails with SlowDown (503). */
  'throttle-s3',
  /** A Kinesis request of the function (PutRecords to the internal stream, GetRecords) fails with ProvisionedThroughputExceeded. */
  'throttle-kinesis',
  /** The same event is delivered twice in a row. */
  'duplicate-delivery',
  /** The same event runs at the same time in a second container (a zombie invocation). */
  'concurrent-duplicate',
  /** The function crashes before running (a function error): Lambda bisects the batch and retries the halves. */
  'crash-before-run',
  /** Lambda's timeout strikes inside the sink write (some items or the data object written): the runtime is reset. */
  'timeout-mid-write',
  /** The function runs out of memory inside the sink write: the runtime is killed (a cold container follows). */
  'out-of-memory-mid-write',
  /**
   * A conditional write (offset log, commit, state, sink upsert) is applied but its response is
   * lost: a transient network error inside the SDK's retry loop, so the SDK sends it again.
   */
  'ambiguous-write',
  /** The commit transaction is cancelled with TransactionConflict (a concurrent transaction on its items). */
  'transaction-conflict',
  /** BatchWriteItem (state and log purges) applies part of the request and returns the rest as UnprocessedItems. */
  'batch-write-unprocessed',
  /** PutRecords to the internal stream applies a random subset and fails the rest (the retry lands after: reordering). */
  'put-records-partial',
  /** An S3 request fails with InternalError (500). */
  's3-5xx',
  /** The function's own GetRecords (re-reading a planned batch) returns a short page (Limit 1–3). */
  'short-get-records',
  /**
   * The invocation freezes just before its sink write: Lambda times it out and retries in a new
   * container, newer batches commit, then the frozen one wakes and carries on writing (a zombie).
   */
  'zombie-wakes-late',
  /** The container's clock is off by one to three hours (either way) for the rest of its life. */
  'clock-skew',
  /**
   * Before the invocation runs, the stream the function reads is resharded (a split, or a merge
   * once it has more shards than it started with): the children must start from their parents'
   * state, after them (lib/aws/reshard-guard.ts).
   */
  'reshard-mid-run',
  /**
   * A source function fails on this invocation's records every time (an outage that outlasts the
   * mapping's retries): the mapping gives the batch up, the on-failure function records the range,
   * and the records expire from the stream before `sluice redrive --skipped` reads them. Lost to
   * retention, which Sluice cannot prevent: the harness checks the loss is reported (status
   * unhealthy, the re-drive's expired count and sequence range), never silent, and nothing else lost.
   */
  'skipped-then-expired',
  /**
   * A source function plans a batch (offset log written), then dies, and an outage outlasts the
   * mapping's retries on the batch's first records, which then leave the stream's retention while
   * the planned batch still needs them: later deliveries must re-run that batch, and the function's
   * own GetRecords no longer returns them. Retention loss is outside Sluice's control: the loss
   * must be reported (as for 'skipped-then-expired'), and the shard must move on.
   */
  'planned-then-expired',
] as const;

/**
 * Faults planned only when asked for: a reshard (`--reshard`) changes the stream itself, for every
 * query reading it; a planned batch whose records expire (each shard trimmed oldest-first, under
 * the retention timeline of retention-timeline.ts) with `--expire-planned`, opt-in until seeds 1
 * and 2 are measured passing with the engine's kept records.
 */
export const OPT_IN_KINDS: readonly FaultKind[] = ['reshard-mid-run', 'planned-then-expired'];

export type FaultKind = (typeof FAULT_KINDS)[number];

/** The countable point each fault kind hits. */
export type FaultPoint =
  | 'sink-write'
  | 'sink-partial-write'
  | 'state-snapshot-chunk-write'
  | 'state-version-write'
  | 'offset-write'
  | 'commit-write'
  | 'response'
  | 'dynamodb-request'
  | 's3-request'
  | 'kinesis-request'
  | 'invocation'
  | 'conditional-write'
  | 'transaction'
  | 'batch-write'
  | 'put-records'
  | 'get-records'
  | 'sink-attempt';

export const FAULT_POINT: Record<FaultKind, FaultPoint> = {
  'kill-after-sink-write': 'sink-write',
  'kill-mid-sink-write': 'sink-partial-write',
  'kill-between-state-writes': 'state-snapshot-chunk-write',
  'kill-after-state-commit': 'state-version-write',
  'kill-after-plan': 'offset-write',
  'kill-after-commit': 'commit-write',
  'kill-before-response': 'response',
  'response-lost': 'response',
  'throttle-dynamodb': 'dynamodb-request',
  'throttle-s3': 's3-request',
  'throttle-kinesis': 'kinesis-request',
  'duplicate-delivery': 'invocation',
  'concurrent-duplicate': 'invocation',
  'crash-before-run': 'invocation',
  'timeout-mid-write': 'sink-partial-write',
  'out-of-memory-mid-write': 'sink-partial-write',
  'ambiguous-write': 'conditional-write',
  'transaction-conflict': 'transaction',
  'batch-write-unprocessed': 'batch-write',
  'put-records-partial': 'put-records',
  's3-5xx': 's3-request',
  'short-get-records': 'get-records',
  'zombie-wakes-late': 'sink-attempt',
  'clock-skew': 'invocation',
  'reshard-mid-run': 'invocation',
  'skipped-then-expired': 'invocation',
  'planned-then-expired': 'offset-write',
};

/** Kinds a source stream's function only can meet (a stage reading an internal stream cannot be re-driven). */
export const SOURCE_ONLY_KINDS: readonly FaultKind[] = ['skipped-then-expired', 'planned-then-expired'];

export const isKill = (kind: FaultKind): boolean => kind.startsWith('kill-') || kind.endsWith('-mid-write');

/** Occurrences a point needs in the fault-free run before faults are planned at it. */
export const MIN_OCCURRENCES = 3;

export interface PlannedFault {
  readonly kind: FaultKind;
  /** 0-based occurrence of the fault's point that it hits. */
  readonly at: number;
}

export type PointCounts = Partial<Record<FaultPoint, number>>;

/**
 * A run's faults: every kind whose point occurs at least MIN_OCCURRENCES times (in the fault-free run's counts), once,
 * plus `extra` more of random kinds, each at a random occurrence. Two faults never share an
 * occurrence of one point.
 */
export function planFaults(
  rnd: () => number, counts: PointCounts, extra = 2, optIn: readonly FaultKind[] = [], excluded: readonly FaultKind[] = [], within = 0.7,
): PlannedFault[] {
  // A point met once or twice without faults (a snapshot the scheduled function happened to
  // write) may not come at all once faults move work elsewhere: a fault planned there would be
  // missed by chance, not by a bug.
  const usable = FAULT_KINDS.filter((k) => (counts[FAULT_POINT[k]] ?? 0) >= MIN_OCCURRENCES
    && (!OPT_IN_KINDS.includes(k) || optIn.includes(k)) && !excluded.includes(k));
  const kinds = [...usable];
  for (let i = 0; i < extra && usable.length > 0; i++) kinds.push(pick(rnd, usable));
  const taken = new Set<string>();
  const plan: PlannedFault[] = [];
  for (const kind of kinds) {
    const point = FAULT_POINT[kind];
    const n = counts[point]!;
    // Uniform over the first 70% of the occurrences the fault-free run met: a run with faults
    // retries and splits batches, so it meets at least those (a fault whose occurrence never
    // comes fails the run), and the early ones are hit as often as the late ones.
    const last = Math.max(0, Math.floor((n - 1) * within));
    for (let attempt = 0; attempt < 8; attempt++) {
      const at = randomInt(rnd, 0, last);
      if (taken.has(`${point}#${at}`)) continue;
      taken.add(`${point}#${at}`);
      plan.push({ kind, at });
      break;
    }
  }
  return plan;
}

export interface InjectedFault {
  readonly kind: FaultKind;
  readonly at: number;
  /** Where it struck (shard, command, key). */
  readonly detail: string;
}

/** A process death: thrown where the kill strikes, and by every later request of the dead container. */
export class ChaosKill extends Error {
  override readonly name = 'ChaosKill';
}

/**
 * Counts the points of one query's run and says when a planned fault strikes. The counting runs
 * in fault-free runs too (no plan), which is how the plan's ranges are known.
 */
export class FaultController {
  readonly counts: Record<FaultPoint, number> = {
    'sink-write': 0, 'sink-partial-write': 0, 'state-snapshot-chunk-write': 0, 'state-version-write': 0,
    'offset-write': 0, 'commit-write': 0, response: 0, 'dynamodb-request': 0, 's3-request': 0, 'kinesis-request': 0, invocation: 0,
    'conditional-write': 0, transaction: 0, 'batch-write': 0, 'put-records': 0, 'get-records': 0, 'sink-attempt': 0,
  };
  readonly injected: InjectedFault[] = [];
  /** The fail-safe faults, followed until their request is sent again (retry-ledger.ts). */
  readonly retries = new RetryLedger();
  private readonly pending: Map<string, PlannedFault>;
  private readonly held = new Map<string, InjectedFault>();
  /** BatchWriteItem requests handed back as UnprocessedItems and not sent again since, per container. */
  private readonly handedBack = new Map<string, { readonly container: { readonly dead: boolean }; readonly detail: string }>();

  constructor(readonly plan: readonly PlannedFault[] = [], private readonly rnd: () => number = Math.random) {
    this.pending = new Map(plan.map((f) => [`${FAULT_POINT[f.kind]}#${f.at}`, f]));
  }

  /** Counts one occurrence of `point`; returns the fault planned for it, if any (recorded as injected). */
  hit(point: FaultPoint, detail: () => string): PlannedFault | undefined {
    const index = this.counts[point]++;
    const fault = this.pending.get(`${point}#${index}`);
    if (!fault) return undefined;
    this.pending.delete(`${point}#${index}`);
    this.injected.push({ kind: fault.kind, at: fault.at, detail: detail() });
    return fault;
  }

  /**
   * A fault that struck where it cannot act (a zombie freeze in a container no timeout governs):
   * no longer counted as injected, it strikes the next occurrence of its point instead.
   */
  postpone(fault: PlannedFault): void {
    const i = this.injected.findIndex((f) => f.kind === fault.kind && f.at === fault.at);
    if (i >= 0) this.injected.splice(i, 1);
    const point = FAULT_POINT[fault.kind];
    let next = this.counts[point];
    while (this.pending.has(`${point}#${next}`)) next++;
    this.pending.set(`${point}#${next}`, { kind: fault.kind, at: fault.at });
  }

  /**
   * A fault that struck but only happens once a later step comes (a deferred trim, see
   * retention-timeline.ts): not counted as injected until `confirm`, missed if it never is.
   */
  hold(fault: PlannedFault): void {
    const i = this.injected.findIndex((f) => f.kind === fault.kind && f.at === fault.at);
    if (i < 0) return;
    this.held.set(`${FAULT_POINT[fault.kind]}#${fault.at}`, this.injected[i]!);
    this.injected.splice(i, 1);
  }

  /** The held fault happened (with what it did). */
  confirm(fault: PlannedFault, detail: string): void {
    const key = `${FAULT_POINT[fault.kind]}#${fault.at}`;
    const held = this.held.get(key);
    if (!held) return;
    this.held.delete(key);
    this.injected.push({ ...held, detail: `${held.detail}; ${detail}` });
  }

  /** Planned faults whose occurrence never came (the run took another path), and held ones that never happened. */
  get missed(): PlannedFault[] {
    return [...this.pending.values(), ...[...this.held.values()].map((f) => ({ kind: f.kind, at: f.at }))];
  }

  random(): number {
    return this.rnd();
  }

  /** A BatchWriteItem answered these requests (`keys`) as unprocessed to `container`. */
  handBack(container: { readonly id: number; readonly dead: boolean }, keys: readonly string[], detail: string): void {
    for (const key of keys) this.handedBack.set(`${container.id}|${key}`, { container, detail: `${detail}: ${key}` });
  }

  /** `container` sent a BatchWriteItem with these requests (a handed-back one sent again). */
  sent(container: { readonly id: number }, keys: readonly string[]): void {
    for (const key of keys) this.handedBack.delete(`${container.id}|${key}`);
  }

  /**
   * Handed-back requests their container never sent again although it lived on: the caller
   * dropped UnprocessedItems (a purge that silently leaves items behind). A container that died
   * first is excused: its retry died with it.
   */
  get neverResent(): string[] {
    return [...this.handedBack.values()].filter((h) => !h.container.dead).map((h) => h.detail);
  }
}
