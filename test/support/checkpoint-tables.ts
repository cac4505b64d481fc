/**
 * DynamoDB Local with a checkpoint table and a state table for one test file: started and created
 * before its tests (the file's beforeAll), deleted and stopped after them.
 */
import { afterAll, beforeAll } from 'vitest';
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';
import { ensureTables } from '../../lib/aws/tables.js';
import { startEmulators, type EmulatorSet } from '../../lib/local/emulators.js';
import { deleteResources } from './cleanup.js';

export interface CheckpointTables {
  readonly checkpointTable: string;
  readonly stateTable: string;
  /** The clients, once the file's beforeAll ran. */
  readonly aws: AwsClients;
}

/** Call at the top of a test file: `<name>` is the checkpoint table, `<name>-state` the state table. */
export function checkpointTablesForFile(name: string): CheckpointTables {
  let emulators: EmulatorSet | undefined;
  let clients: AwsClients | undefined;
  const tables = { checkpointTable: name, stateTable: `${name}-state` };
  beforeAll(async () => {
    emulators = await startEmulators({ kinesis: false, s3: false });
    clients = createAwsClients(emulators.clientOptions);
    await ensureTables(clients.dynamodb, tables);
  });
  afterAll(async () => {
    if (clients) await deleteResources(clients, { tables: [tables.checkpointTable, tables.stateTable] });
    clients?.destroy();
    await emulators?.stop();
  });
  return {
    ...tables,
    get aws(): AwsClients {
      if (!clients) throw new Error('checkpointTablesForFile: the clients exist once the file\'s beforeAll ran');
      return clients;
    },
  };
}
