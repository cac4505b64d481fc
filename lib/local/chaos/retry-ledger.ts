/**
 * The fail-safe defences: faults that never change an answer, only add retries (a throttle, a
 * 5xx, a TransactionConflict, a short GetRecords page). A run cannot tell a defence that works
 * from one that is missing by its results, so each such fault is followed until its request is
 * sent again, and the harness checks how:
 * - every one must be sent again (a request given up in silence would be a lost write or read);
 * - where the engine claims to retry in place, it must be sent again by the same container in
 *   the same invocation: the commit transaction after a TransactionConflict (dynamodb-checkpoint),
 *   a sink upsert after a throttle (the adaptive writer). Elsewhere a failed invocation (the
 *   event source mapping's retry, the scheduled function's next tick) is the defence.
 *   Sent again only later is right there too when the invocation ended for another reason before
 *   the retry came (a kill or timeout, another item's error aborting the batch): so each
 *   invocation's end and errors are told to the ledger, and only an invocation that ended by the
 *   fault's own error (the retry is missing) or succeeded without the retry (swallowed) fails.
 *   While the fault's invocation still runs, another container sending the same request (a
 *   concurrent duplicate writing the same key) is not its retry.
 * A short page is followed by reading on from its NextShardIterator (in place) or not at all: a
 * reader call that returned after one while it still lacked records it was asked for is a broken
 * defence (judged at the call's end by short-pages.ts, which knows what the call was asked for).
 */
export const FAIL_SAFE_KINDS = ['transaction-conflict', 'throttle-dynamodb', 'throttle-s3', 'throttle-kinesis', 's3-5xx', 'short-get-records'] as const;
export type FailSafeKind = (typeof FAIL_SAFE_KINDS)[number];

/** A container as the ledger sees it: which one, and which of its invocations is running. */
export interface RetryContainer { readonly id: number; readonly invocation?: number }

interface Followed {
  readonly kind: FailSafeKind;
  readonly at: number;
  readonly detail: string;
  /** What a resend of the request looks like (command, table or stream, key). */
  readonly signature: string;
  readonly container: number;
  readonly invocation: number | undefined;
  /** The engine claims to retry this one within the invocation. */
  readonly inPlace: boolean;
  /** The error the fault threw (to tell whether it is what ended the invocation). */
  readonly error: unknown;
  /** Another container sent it while the fault's invocation still ran (a concurrent duplicate). */
  sentMeanwhile?: boolean;
  /** A put-if-absent whose item was written before the fault struck: a resend would be refused. */
  readonly writtenBefore?: boolean;
  /**
   * A best-effort cleanup: deletes of items no read needs any more (a committed batch's kept copy
   * or blame entry, obsolete state), left to their TTL or a later purge when a delete fails.
   */
  readonly cleanup?: boolean;
  retried?: 'in place' | 'later';
}

/** How an invocation ended: the errors it met (none: it succeeded). */
interface Ending { readonly errors: readonly unknown[] }

const invocationKey = (container: number, invocation: number | undefined): string => `${container}#${invocation ?? '-'}`;

/** Whether `error` is `target` or was caused by it (a wrapper's `cause`, an aggregate's `errors`). */
function causedBy(error: unknown, target: unknown, seen = new Set<unknown>()): boolean {
  if (error === target) return true;
  if (typeof error !== 'object' || error === null || seen.has(error)) return false;
  seen.add(error);
  const e = error as { cause?: unknown; errors?: unknown };
  return causedBy(e.cause, target, seen) || (Array.isArray(e.errors) && e.errors.some((x) => causedBy(x, target, seen)));
}

export interface RetryFigures {
  readonly faults: number;
  readonly inPlace: number;
  readonly later: number;
  readonly never: number;
}

/**
 * A read never sent again is not a lost request: the invocation that retries may no longer need
 * it (the next tick reads other keys, a re-plan reads another page). Writes must be sent again.
 */
const READ_COMMAND = /^(GetItem|Query|Scan|BatchGetItem|GetObject|HeadObject|ListObjects|GetRecords|GetShardIterator|DescribeStream|ListShards)/;
export const isRead = (detail: string): boolean => READ_COMMAND.test(detail);

export class RetryLedger {
  private readonly followed: Followed[] = [];
  private readonly endings = new Map<string, Ending>();
  /** Short pages that ended a reader call which still lacked records (see short-pages.ts). */
  private readonly cutShort: string[] = [];
  /** Put-if-absent requests whose item exists (written, or refused for existing). */
  private readonly written = new Set<string>();

  /** A fail-safe fault struck the request `signature` of `container`, throwing `error`. */
  failed(kind: FailSafeKind, at: number, detail: string, signature: string, container: RetryContainer, inPlace: boolean, error?: unknown, cleanup = false): void {
    this.followed.push({
      kind, at, detail, signature, container: container.id, invocation: container.invocation, inPlace, error,
      ...(this.written.has(signature) ? { writtenBefore: true } : {}), ...(cleanup ? { cleanup } : {}),
    });
  }

  /**
   * A put-if-absent (`signature`) found its item in place: it wrote it, or was refused because it
   * exists. A later one that a fault fails need not be sent again: it could only be refused. (Two
   * containers planning the same batch, a concurrent duplicate's, read the log before either wrote.)
   */
  itemExists(signature: string): void {
    this.written.add(signature);
  }

  /** The short page `at` ended a reader call that still lacked records: `why`. */
  readEndedShort(at: number, why: string): void {
    this.cutShort.push(`short-get-records @${at} ${why}`);
  }

  /** `container` sends `signature`: a resend of every fault still waiting for it. */
  sent(signature: string, container: RetryContainer): void {
    for (const f of this.followed) {
      if (f.retried || f.signature !== signature) continue;
      if (f.container === container.id && f.invocation === container.invocation) f.retried = 'in place';
      // Another container's send while the fault's invocation still runs may be its own retry's rival, not its retry.
      // (A container whose invocations are not followed, the scheduled function's, has no such rival.)
      else if (!f.inPlace || f.invocation === undefined || this.endings.has(invocationKey(f.container, f.invocation))) f.retried = 'later';
      else f.sentMeanwhile = true;
    }
  }

  /**
   * `container`'s current invocation ended, having met `errors` (none: it succeeded; a kill or
   * timeout is one of them). Several calls for one invocation add up.
   */
  ended(container: RetryContainer, errors: readonly unknown[]): void {
    const key = invocationKey(container.id, container.invocation);
    this.endings.set(key, { errors: [...(this.endings.get(key)?.errors ?? []), ...errors] });
    // Its own retry can no longer come: a concurrent send of the request was its resend after all.
    for (const f of this.followed) {
      if (!f.retried && f.sentMeanwhile && invocationKey(f.container, f.invocation) === key) f.retried = 'later';
    }
  }

  /**
   * Why an in-place fault not retried in place is no broken defence, or undefined if it is: its
   * invocation ended by another error first, or by its own once an earlier fault of the same
   * request in that invocation was retried in place (the retry is there; its budget ran out).
   */
  private excuse(f: Followed): string | undefined {
    const ending = this.endings.get(invocationKey(f.container, f.invocation));
    if (!ending || ending.errors.length === 0) return undefined;
    if (ending.errors.some((e) => !causedBy(e, f.error))) return `its invocation ended by another error first: ${messageOf(ending.errors.find((e) => !causedBy(e, f.error)))}`;
    const retriedBefore = this.followed.some((g) => g !== f && g.signature === f.signature && g.container === f.container
      && g.invocation === f.invocation && g.at < f.at && g.retried === 'in place');
    return retriedBefore ? 'retried in place before, then given up (its retries ran out)' : undefined;
  }

  /** Per kind: faults followed, sent again in place, sent again later, never sent again. */
  figures(): Partial<Record<FailSafeKind, RetryFigures>> {
    const out: Partial<Record<FailSafeKind, { faults: number; inPlace: number; later: number; never: number }>> = {};
    for (const f of this.followed) {
      const k = (out[f.kind] ??= { faults: 0, inPlace: 0, later: 0, never: 0 });
      k.faults++;
      if (f.retried === 'in place') k.inPlace++;
      else if (f.retried === 'later') k.later++;
      else k.never++;
    }
    return out;
  }

  /**
   * Faults whose defence did not act as it must: never sent again, or not in place where claimed
   * (unless their invocation ended for another reason first: see `excused`).
   */
  get broken(): string[] {
    return this.followed.filter((f) => f.kind !== 'short-get-records'
      && ((!f.retried && !isRead(f.detail) && !f.writtenBefore && !f.cleanup) || (f.inPlace && f.retried !== 'in place' && this.excuse(f) === undefined)))
      .map((f) => `${f.kind} @${f.at} (${f.detail}) ${f.retried ? `sent again only ${f.retried}, where the engine retries it in place (${this.endingOf(f)})` : 'never sent again'}`)
      .concat(this.cutShort);
  }

  /**
   * In-place faults sent again only later because their invocation ended for another reason first,
   * and put-if-absent writes never sent again whose item was written before: and why.
   */
  get excused(): string[] {
    const unsent = this.followed.filter((f) => !f.retried && !f.inPlace && (f.writtenBefore || f.cleanup))
      .map((f) => `${f.kind} @${f.at} (${f.detail}) never sent again: ${f.writtenBefore
        ? 'its item was written before the fault (a resend could only be refused)'
        : 'a best-effort cleanup delete (its items are read no more; a TTL or a later purge removes them)'}`);
    return unsent.concat(this.followed.filter((f) => f.inPlace && f.retried === 'later').flatMap((f) => {
      const why = this.excuse(f);
      return why ? [`${f.kind} @${f.at} (${f.detail}) sent again later: ${why}`] : [];
    }));
  }

  private endingOf(f: Followed): string {
    const ending = this.endings.get(invocationKey(f.container, f.invocation));
    if (!ending) return 'its invocation\'s end unknown';
    return ending.errors.length === 0 ? 'its invocation succeeded without the retry' : 'its invocation ended by the fault\'s own error';
  }
}

/** An error's first line, and its causes' (a wrapper's message rarely says what struck). */
function messageOf(error: unknown, depth = 0): string {
  const line = (error instanceof Error ? error.message : String(error)).split('\n')[0]!.slice(0, 160);
  const cause = (error as { cause?: unknown } | undefined)?.cause;
  return cause !== undefined && depth < 3 ? `${line} ← ${messageOf(cause, depth + 1)}` : line;
}

/** The figures of several ledgers added up. */
export function totalRetries(all: readonly Partial<Record<FailSafeKind, RetryFigures>>[]): Partial<Record<FailSafeKind, RetryFigures>> {
  const a: Partial<Record<FailSafeKind, RetryFigures>> = {};
  for (const b of all) {
    for (const [kind, f] of Object.entries(b) as [FailSafeKind, RetryFigures][]) {
      const t = a[kind] ?? { faults: 0, inPlace: 0, later: 0, never: 0 };
      a[kind] = { faults: t.faults + f.faults, inPlace: t.inPlace + f.inPlace, later: t.later + f.later, never: t.never + f.never };
    }
  }
  return a;
}

/** A query's functions' ledgers: figures added up, broken defences named by function. */
export function retriesOf(functions: readonly { readonly id: string; readonly ledger: RetryLedger }[]): {
  figures: Partial<Record<FailSafeKind, RetryFigures>>; broken: string[]; excused: string[];
} {
  return {
    figures: totalRetries(functions.map((f) => f.ledger.figures())),
    broken: functions.flatMap((f) => f.ledger.broken.map((b) => `${f.id}: ${b}`)),
    excused: functions.flatMap((f) => f.ledger.excused.map((b) => `${f.id}: ${b}`)),
  };
}

export function formatRetryFigures(all: Partial<Record<FailSafeKind, RetryFigures>>): string {
  return FAIL_SAFE_KINDS.filter((k) => all[k]).map((k) => {
    const f = all[k]!;
    if (k === 'short-get-records') return `${k} ${f.faults}: ${f.inPlace} read on in place, ${f.later + f.never} not (its reader call had what it asked for, or failed)`;
    return `${k} ${f.faults}: ${f.inPlace} in place, ${f.later} by a later invocation${f.never > 0 ? `, ${f.never} never` : ''}`;
  }).join('; ');
}

/** A request's identity for matching its resend: DynamoDB's table and key, S3's key, a Kinesis shard. */
export function dynamoDbSignature(command: string, input: Record<string, unknown>): string {
  const keyOf = (k: unknown): string => {
    const o = (k ?? {}) as Record<string, { S?: string; N?: string }>;
    return `${o.pk?.S ?? o.pk?.N ?? ''}|${o.sk?.S ?? o.sk?.N ?? ''}`;
  };
  const table = String(input.TableName ?? '');
  if (command === 'TransactWriteItemsCommand') {
    // A commit's retry may change its items (a condition dropped), never its partition.
    const ops = ((input.TransactItems as Record<string, Record<string, unknown>>[] | undefined) ?? []).map((t) => t.Put ?? t.Update ?? t.ConditionCheck ?? t.Delete ?? {});
    const keys = ops.map((op) => keyOf(op.Item ?? op.Key));
    const commit = keys.find((k) => k.includes('|commit#'));
    return `${command} ${String(ops[0]?.TableName ?? '')} ${commit ? `${commit.split('|')[0]!}|commit#` : keys[0] ?? ''}`;
  }
  if (command === 'BatchWriteItemCommand' || command === 'BatchGetItemCommand') {
    // A resend may regroup the requests: the fault follows its first request (see dynamoDbSentSignatures).
    const [t, requests] = Object.entries((input.RequestItems ?? {}) as Record<string, unknown>)[0] ?? ['', []];
    type Request = { PutRequest?: { Item?: unknown }; DeleteRequest?: { Key?: unknown } };
    const r = Array.isArray(requests) ? requests[0] as Request | undefined : undefined;
    const key = r ? r.PutRequest?.Item ?? r.DeleteRequest?.Key : (requests as { Keys?: unknown[] }).Keys?.[0];
    return `${command} ${t} ${keyOf(key)}`;
  }
  if (input.Key || input.Item) return `${command} ${table} ${keyOf(input.Key ?? input.Item)}`;
  return `${command} ${table} ${JSON.stringify(input.ExpressionAttributeValues ?? {})} ${JSON.stringify(input.ExclusiveStartKey ?? {})} ${String(input.Segment ?? '')}`;
}

/**
 * The signatures a request counts as sending: a BatchWriteItem sends each of its requests (a
 * handed-back or throttled batch is often sent again regrouped), anything else its one signature.
 */
export function dynamoDbSentSignatures(command: string, input: Record<string, unknown>): string[] {
  if (command !== 'BatchWriteItemCommand') return [dynamoDbSignature(command, input)];
  return Object.entries((input.RequestItems ?? {}) as Record<string, unknown[]>).flatMap(([table, requests]) =>
    requests.map((request) => dynamoDbSignature(command, { RequestItems: { [table]: [request] } })));
}
