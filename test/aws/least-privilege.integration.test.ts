/**
 * The grants cover the calls: each function of a query runs on the emulators (which enforce no
 * IAM) while a middleware records every SDK command it sends; each command's IAM action must be
 * allowed, on that resource, by the synthesized policy of the matching function of the same query
 * module (cdk/grants.ts). A new SDK call without its grant fails here before a real deploy does.
 */
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { SluiceQuery } from '../../cdk/sluice-query.js';
import { deadLetterObjectPrefix } from '../../cdk/grants.js';
import { sinkPrefixOf } from '../../lib/aws/aws-backends.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { reshardStream } from '../../lib/local/kinesis-admin.js';
import type { StreamingQueryDefinition } from '../../lib/query/query-definition.js';
import { deploy, type Deployment, type FunctionRole } from '../support/aws-pipeline.js';
import { asFunction, clearSent, sentBy, type NeededAccess } from '../support/sent-commands.js';
import { asArray, example, fixture, statementsOfRole, testStack } from '../cdk/support.js';

vi.mock('../../lib/aws/clients.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../lib/aws/clients.js')>();
  const { recordCommands } = await import('../support/sent-commands.js');
  return { ...original, createAwsClients: (...args: Parameters<typeof original.createAwsClients>) => recordCommands(original.createAwsClients(...args)) };
});
// The handlers build their own clients (S3 deferred to its first use): recorded the same way, built at once.
vi.mock('../../lib/aws/function-clients.js', async () => {
  const { createAwsClients } = await import('../../lib/aws/clients.js');
  return { createFunctionClients: createAwsClients };
});

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); }, 120_000);
afterAll(async () => { await emulators?.stop(); });
beforeEach(() => { clearSent(); });

/** What each function's role allows: actions by a name of the resource, and the ListBucket prefixes. */
interface Allowed { actions: Map<string, string[]>; listPrefixes: string[] }

function synthesizedGrants(modulePath: string, props: { shardCount?: number } = {}): { query: SluiceQuery; allowed: Record<FunctionRole, Allowed> } {
  const stack = testStack();
  const query = new SluiceQuery(stack, 'Q', { queryModule: modulePath, ...props });
  const template = Template.fromStack(stack);
  const arn = (c: unknown) => JSON.stringify({ 'Fn::GetAtt': [stack.getLogicalId((c as { node: { defaultChild: never } }).node.defaultChild), 'Arn'] });
  const named = new Map<string, string>([
    [arn(query.checkpointTable), 'checkpoint'], [arn(query.stateTable), 'state'], [arn(query.stream), 'stream'],
    [JSON.stringify({ 'Fn::Join': ['', [JSON.parse(arn(query.deadLetterBucket)), `/${deadLetterObjectPrefix(query.deadLetterPrefix, query.queryName)}*`]] }), 'dead-letters'],
    [arn(query.deadLetterBucket), 'dead-letter-bucket'],
  ]);
  if (query.sinkTable) named.set(arn(query.sinkTable), 'sink-table');
  if (query.sinkBucket) {
    named.set(arn(query.sinkBucket), 'sink-bucket');
    named.set(JSON.stringify({ 'Fn::Join': ['', [JSON.parse(arn(query.sinkBucket)), `/${query.sinkPrefix}*`]] }), 'sink-objects');
    named.set(JSON.stringify({ 'Fn::Join': ['', [JSON.parse(arn(query.sinkBucket)), `/${query.sinkPrefix}_sluice_spill/*`]] }), 'spill-objects');
    named.set(JSON.stringify({ 'Fn::Join': ['', [JSON.parse(arn(query.sinkBucket)), `/${query.sinkPrefix}_sluice_spill_tombstones/*`]] }), 'spill-tombstones');
  }
  if (query.repartitionStream) named.set(arn(query.repartitionStream), 'internal');
  const of = (fn: SluiceQuery['kinesisTriggerFunction'] | undefined): Allowed => {
    const allowed: Allowed = { actions: new Map(), listPrefixes: [] };
    if (!fn) return allowed;
    for (const s of statementsOfRole(template, stack.getLogicalId(fn.role!.node.defaultChild as never))) {
      if (s.Effect !== 'Allow') continue;
      for (const resource of asArray(s.Resource)) {
        const name = named.get(JSON.stringify(resource)) ?? `other ${JSON.stringify(resource)}`;
        allowed.actions.set(name, [...(allowed.actions.get(name) ?? []), ...asArray(s.Action) as string[]]);
        if (name === 'sink-bucket' && asArray(s.Action).includes('s3:ListBucket')) {
          const condition = s.Condition as { StringLike?: { 's3:prefix'?: string[] } } | undefined;
          allowed.listPrefixes.push(...(condition ? condition.StringLike?.['s3:prefix'] ?? ['<unsupported condition>'] : ['*']));
        }
      }
    }
    return allowed;
  };
  return {
    query,
    allowed: { kinesisTrigger: of(query.kinesisTriggerFunction), scheduled: of(query.scheduledTriggerFunction), repartition: of(query.repartitionFunction) },
  };
}

/** The synthesized resource name an emulated call touches (the deployment's names differ, the roles do not). */
function resourceOf(access: NeededAccess, deployment: Deployment, definition: StreamingQueryDefinition): string {
  const { config } = deployment;
  if (access.table !== undefined) {
    return { [config.checkpointTable]: 'checkpoint', [config.stateTable]: 'state', [config.sinkTable!]: 'sink-table' }[access.table] ?? `table ${access.table}`;
  }
  if (access.stream !== undefined || access.action.startsWith('kinesis:')) {
    return access.stream === config.streamName ? 'stream' : access.stream === config.repartitionStreamName ? 'internal' : `stream ${access.stream}`;
  }
  const key = access.key ?? '';
  if (access.bucket === config.sinkBucket) {
    if (access.action === 's3:ListBucket') return key.startsWith(sinkPrefixOf(definition, config)) ? 'sink-bucket' : `sink bucket listed at '${key}'`;
    // A spilling DynamoDB sink is granted its two folders, not the whole prefix.
    if (definition.sink.kind === 'dynamodb') {
      const spill = `${sinkPrefixOf(definition, config)}_sluice_spill`;
      return key.startsWith(`${spill}/`) ? 'spill-objects' : key.startsWith(`${spill}_tombstones/`) ? 'spill-tombstones' : `sink bucket key '${key}'`;
    }
    return key.startsWith(sinkPrefixOf(definition, config)) ? 'sink-objects' : `sink bucket key '${key}'`;
  }
  if (access.bucket === config.deadLetterBucket) {
    if (access.action === 's3:ListBucket') return 'dead-letter-bucket';
    return key.startsWith(deadLetterObjectPrefix(config.deadLetterPrefix, definition.name)) ? 'dead-letters' : `dead-letter key '${key}'`;
  }
  return `bucket ${access.bucket}`;
}

const actionMatches = (granted: string, action: string): boolean =>
  new RegExp(`^${granted.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`).test(action);

/** Every recorded call its function's policy does not allow, as readable lines. */
function denied(role: FunctionRole, allowed: Allowed, deployment: Deployment, definition: StreamingQueryDefinition): string[] {
  const out = new Set<string>();
  for (const access of sentBy(role)) {
    const resource = resourceOf(access, deployment, definition);
    const ok = (allowed.actions.get(resource) ?? []).some((g) => actionMatches(g, access.action))
      // The list condition is on the construct's prefix; the run's listing is under the run's prefix.
      && (access.action !== 's3:ListBucket' || resource !== 'sink-bucket' || allowed.listPrefixes.length > 0);
    if (!ok) out.add(`${role}: ${access.action} on ${resource} (${access.command})`);
  }
  return [...out].sort();
}

/** Granted actions no recorded call used (informational: a run does not take every path). */
function unused(role: FunctionRole, allowed: Allowed, deployment: Deployment, definition: StreamingQueryDefinition): string[] {
  const used = new Set(sentBy(role).map((a) => `${a.action} on ${resourceOf(a, deployment, definition)}`));
  return [...allowed.actions].flatMap(([resource, actions]) => actions.map((a) => `${a} on ${resource}`)).filter((g) => !used.has(g));
}

async function loadDefinition(modulePath: string): Promise<StreamingQueryDefinition> {
  return ((await import(modulePath)) as { default: StreamingQueryDefinition }).default;
}

const at = (minute: number): string => new Date(Date.UTC(2026, 11, 1, 10, minute)).toISOString();
const sale = (i: number, extra: Record<string, unknown> = {}) => ({
  data: JSON.stringify({ store_id: `s${i % 3}`, product: `p${i % 4}`, amount: i + 0.5, ts: at(i), ...extra }),
  partitionKey: `s${i % 3}`,
});
/**
 * Sales over two hours with one undecodable record (a dead letter); then a split of each stream
 * (the reshard guard, the children seeded from their parents) and more sales, some two hours
 * later so the watermark passes the first windows; then ticks, whose no-data batches emit them.
 */
async function run(deployment: Deployment): Promise<void> {
  const { clients, config } = deployment;
  await deployment.put([...Array.from({ length: 12 }, (_, i) => sale(i)), { data: '{not json', partitionKey: 's0' }]);
  await deployment.drain();
  await reshardStream(clients.kinesis, config.streamName, [{ split: 'first-open' }]);
  if (config.repartitionStreamName) await reshardStream(clients.kinesis, config.repartitionStreamName, [{ split: 'first-open' }]);
  await deployment.put([...Array.from({ length: 12 }, (_, i) => sale(i + 60)), ...Array.from({ length: 3 }, (_, i) => sale(i + 180))]);
  await deployment.drain();
  await deployment.tick(Date.UTC(2026, 11, 1, 13));
  await deployment.tick(Date.UTC(2026, 11, 1, 14), 'drain');
}

async function checkGrants(modulePath: string, shards: number, options: { repartitionShards?: number } = {}): Promise<Record<FunctionRole, string[]>> {
  const definition = await loadDefinition(modulePath);
  const { allowed } = synthesizedGrants(modulePath, { shardCount: shards });
  const deployment = await deploy(emulators, definition, shards, { ...options, asFunction });
  await run(deployment);
  const roles: FunctionRole[] = options.repartitionShards ? ['kinesisTrigger', 'scheduled', 'repartition'] : ['kinesisTrigger', 'scheduled'];
  for (const role of roles) {
    expect(sentBy(role).length, `${role} sent nothing: the run did not exercise it`).toBeGreaterThan(0);
    if (process.env.SLUICE_SHOW_GRANT_USE) {
      const used = [...new Set(sentBy(role).map((a) => `${a.command} → ${a.action} on ${resourceOf(a, deployment, definition)}`))].sort();
      console.log(`${definition.name} ${role}\n  sent: ${used.join('\n        ')}\n  unused grants: ${unused(role, allowed[role], deployment, definition).join(', ')}`);
    }
  }
  return Object.fromEntries(roles.map((role) => [role, denied(role, allowed[role], deployment, definition)])) as Record<FunctionRole, string[]>;
}

describe('every SDK call a function sends is allowed by its synthesized policy', () => {
  it('one stateful stage (update → DynamoDB)', async () => {
    expect(await checkGrants(example('hourly-sales-live.ts'), 1)).toEqual({ kinesisTrigger: [], scheduled: [] });
  }, 120_000);

  it('a repartitioned query: stage 1 on the source, stage 2 on the internal stream, the scheduled function over both', async () => {
    expect(await checkGrants(example('hourly-sales-per-product.ts'), 2, { repartitionShards: 2 })).toEqual({ kinesisTrigger: [], scheduled: [], repartition: [] });
  }, 180_000);

  it("update → DynamoDB with onUnwritableRow: 'spill' (an item over 400 KB: its value PUT under the query's prefix)", async () => {
    const modulePath = fixture('notes-spill.ts');
    const definition = await loadDefinition(modulePath);
    const { allowed } = synthesizedGrants(modulePath, { shardCount: 1 });
    const deployment = await deploy(emulators, definition, 1, { asFunction });
    const note = (i: number, text: string) => ({ data: JSON.stringify({ store_id: 's1', note: text, ts: at(i) }), partitionKey: 's1' });
    await deployment.put([note(0, 'short'), note(1, 'x'.repeat(450 * 1024)), note(2, 'short too')]);
    await deployment.drain();
    await deployment.tick(Date.UTC(2026, 11, 1, 13), 'drain');
    expect(sentBy('kinesisTrigger').some((a) => a.command === 'PutObjectCommand' && a.bucket === deployment.config.sinkBucket)).toBe(true);
    // The writer looked up its object's tombstone; the scheduled function ran the spill collector.
    expect(sentBy('kinesisTrigger').some((a) => a.command === 'HeadObjectCommand' && (a.key ?? '').includes('_sluice_spill_tombstones/'))).toBe(true);
    expect(sentBy('scheduled').some((a) => a.command === 'ScanCommand' && a.table === deployment.config.sinkTable)).toBe(true);
    expect({ kinesisTrigger: denied('kinesisTrigger', allowed.kinesisTrigger, deployment, definition), scheduled: denied('scheduled', allowed.scheduled, deployment, definition) })
      .toEqual({ kinesisTrigger: [], scheduled: [] });
  }, 120_000);

  it('append → Parquet files (staged, copied into place, the staged copies swept by the scheduled function)', async () => {
    expect(await checkGrants(fixture('lake-parquet.ts'), 1)).toEqual({ kinesisTrigger: [], scheduled: [] });
  }, 120_000);
});
