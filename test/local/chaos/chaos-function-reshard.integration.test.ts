/**
 * The chaos harness's functions must run the handler as deployed, reshard guard included. They
 * inject their own partition backends (a per-container state cache, a skewed clock), and with
 * injected backends the handler used to build no guard: after a split, the children ran with empty
 * state and overwrote the parent's update-mode rows with partial counts (`npm run chaos -- --reshard`
 * reported mismatched rows on the repartitioned query). Fault-free here: one split between phases.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scanDynamoDbSink } from '../../../lib/aws/sink-readers.js';
import { createQuietObservability } from '../../../lib/aws/observability.js';
import { ChaosFunction } from '../../../lib/local/chaos/chaos-function.js';
import { FaultController } from '../../../lib/local/chaos/faults.js';
import { startEmulators, type EmulatorSet } from '../../../lib/local/emulators.js';
import { LocalEventSourceMapping } from '../../../lib/local/event-source-mapping.js';
import { reshardStream } from '../../../lib/local/kinesis-admin.js';
import { col, count, sum, window } from '../../../lib/plan/functions.js';
import { defineQuery, type StreamingQueryDefinition } from '../../../lib/query/query-definition.js';
import { deploy, type Deployment } from '../../support/aws-pipeline.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

const stores = ['north', 'south', 'east', 'west', 'central', 'harbor'];
/** Six stores, every order in the 14:00 window: nothing is late, every count needs both phases. */
const sales = Array.from({ length: 24 }, (_, i) => ({
  store_id: stores[i % stores.length]!, amount: 1 + i, ts: new Date(Date.UTC(2024, 4, 1, 14, i)).toISOString(),
}));

function query(repartition: boolean): StreamingQueryDefinition {
  return defineQuery({
    name: `chaos-reshard-${repartition ? 'rp' : 'one'}`,
    source: { schema: 'store_id string, amount long, ts timestamp', ...(repartition ? {} : { partitionKey: 'store_id' }) },
    transform: (df) => df.withWatermark('ts', '15 minutes').groupBy(window(col('ts'), '1 hour'), col('store_id')).agg(sum('amount').as('revenue'), count('*').as('orders')),
    outputMode: 'update',
    sink: { kind: 'dynamodb' },
  });
}

async function runThroughChaosFunctions(d: Deployment, definition: StreamingQueryDefinition, resharded: string): Promise<void> {
  const functions = [{ kind: 'source' as const, stream: d.config.streamName }, ...(d.config.repartitionStreamName ? [{ kind: 'repartition' as const, stream: d.config.repartitionStreamName }] : [])];
  const mappings = functions.map((f) => {
    const fn = new ChaosFunction({
      definition, kind: f.kind, config: d.config, clientOptions: emulators.clientOptions, controller: new FaultController([]),
      observability: createQuietObservability(definition.name),
    });
    return new LocalEventSourceMapping({ kinesis: d.clients.kinesis, streamName: f.stream, handler: fn.handler, batchSize: 5, pollIntervalMs: 25, shardDiscoveryIntervalMs: 100 });
  });
  const drain = async (): Promise<void> => {
    for (let i = 0; i < 2; i++) await Promise.all(mappings.map((m) => m.drain({ idleMs: 400, timeoutMs: 60_000 })));
  };
  await d.put(sales.slice(0, 12).map((s) => ({ data: JSON.stringify(s), partitionKey: s.store_id })));
  await drain();
  await reshardStream(d.clients.kinesis, resharded, [{ split: 'first-open' }]);
  await d.put(sales.slice(12).map((s) => ({ data: JSON.stringify(s), partitionKey: s.store_id })));
  await drain();
  await Promise.all(mappings.map((m) => m.stop()));
}

let emulators: EmulatorSet;
beforeAll(async () => { emulators = await startEmulators(); });
afterAll(async () => { await emulators?.stop(); });

describe('chaos functions after a split: children start from their parent\'s state', () => {
  const expected = stores.map((store) => {
    const mine = sales.filter((s) => s.store_id === store);
    return { store_id: store, orders: mine.length, revenue: mine.reduce((n, s) => n + s.amount, 0) };
  });
  const sinkRows = async (d: Deployment) => (await scanDynamoDbSink(d.clients.dynamodb, d.config.sinkTable!))
    .map((r) => ({ store_id: String(r.store_id), orders: Number(r.orders), revenue: Number(r.revenue) }))
    .sort((a, b) => a.store_id.localeCompare(b.store_id));

  it('the internal stream of a repartition stage split between two phases (stage 2)', async () => {
    const definition = query(true);
    const d = await deploy(emulators, definition, 1, { repartitionShards: 1, expectedShardCount: undefined });
    await runThroughChaosFunctions(d, definition, d.config.repartitionStreamName!);
    expect(await sinkRows(d)).toEqual([...expected].sort((a, b) => a.store_id.localeCompare(b.store_id)));
  }, 120_000);

  it('the source stream of a one-stage query split between two phases', async () => {
    const definition = query(false);
    const d = await deploy(emulators, definition, 1);
    await runThroughChaosFunctions(d, definition, d.config.streamName);
    expect(await sinkRows(d)).toEqual([...expected].sort((a, b) => a.store_id.localeCompare(b.store_id)));
  }, 120_000);
});
