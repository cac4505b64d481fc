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
 * A short page is followed by reading on from its NextShardIterator (in place) or not at all
 * (the read may have had all it needed): reported, not checked.
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
  retried?: 'in place' | 'later';
}

export interface RetryFigures {
  readonly faults: number;
  readonly inPlace: number;
  readonly later: number;
  readonly never: number;
}

export class RetryLedger {
  private readonly followed: Followed[] = [];

  /** A fail-safe fault struck the request `signature` of `container`. */
  failed(kind: FailSafeKind, at: number, detail: string, signature: string, container: RetryContainer, inPlace: boolean): void {
    this.followed.push({ kind, at, detail, signature, container: container.id, invocation: container.invocation, inPlace });
  }

  /** `container` sends `signature`: a resend of every fault still waiting for it. */
  sent(signature: string, container: RetryContainer): void {
    for (const f of this.followed) {
      if (f.retried || f.signature !== signature) continue;
      f.retried = f.container === container.id && f.invocation === container.invocation ? 'in place' : 'later';
    }
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

  /** Faults whose defence did not act as it must: never sent again, or not in place where claimed. */
  get broken(): string[] {
    return this.followed.filter((f) => f.kind !== 'short-get-records' && (!f.retried || (f.inPlace && f.retried !== 'in place')))
      .map((f) => `${f.kind} @${f.at} (${f.detail}) ${f.retried ? `sent again only ${f.retried}, where the engine retries it in place` : 'never sent again'}`);
  }
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
  figures: Partial<Record<FailSafeKind, RetryFigures>>; broken: string[];
} {
  return { figures: totalRetries(functions.map((f) => f.ledger.figures())), broken: functions.flatMap((f) => f.ledger.broken.map((b) => `${f.id}: ${b}`)) };
}

export function formatRetryFigures(all: Partial<Record<FailSafeKind, RetryFigures>>): string {
  return FAIL_SAFE_KINDS.filter((k) => all[k]).map((k) => {
    const f = all[k]!;
    if (k === 'short-get-records') return `${k} ${f.faults}: ${f.inPlace} read on in place, ${f.later + f.never} not (the read may have had all it needed)`;
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
    const [t, requests] = Object.entries((input.RequestItems ?? {}) as Record<string, unknown>)[0] ?? ['', []];
    type Request = { PutRequest?: { Item?: unknown }; DeleteRequest?: { Key?: unknown } };
    const r = Array.isArray(requests) ? requests[0] as Request | undefined : undefined;
    const key = r ? r.PutRequest?.Item ?? r.DeleteRequest?.Key : (requests as { Keys?: unknown[] }).Keys?.[0];
    return `${command} ${t} ${keyOf(key)}`;
  }
  if (input.Key || input.Item) return `${command} ${table} ${keyOf(input.Key ?? input.Item)}`;
  return `${command} ${table} ${JSON.stringify(input.ExpressionAttributeValues ?? {})} ${JSON.stringify(input.ExclusiveStartKey ?? {})} ${String(input.Segment ?? '')}`;
}
