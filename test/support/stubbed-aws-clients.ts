/**
 * SDK clients whose requests never leave the process: `answer` plays the service, by command
 * name, where the SDK would send the request (after every middleware a test adds).
 */
import { createAwsClients, type AwsClients } from '../../lib/aws/clients.js';

export function stubbedClients(answer: (command: string, input: Record<string, unknown>) => unknown = () => ({})): AwsClients {
  const clients = createAwsClients({ region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'x' }, maxAttempts: 1 });
  for (const client of [clients.dynamodb, clients.kinesis]) {
    (client.middlewareStack as unknown as { add: (m: unknown, o: unknown) => void }).add(
      (_next: unknown, context: { commandName?: string }) => async (args: { input: Record<string, unknown> }) => (
        { output: { $metadata: {}, ...(answer(context.commandName ?? '?', args.input) as object) }, response: {} }),
      { step: 'serialize', name: 'stubService' },
    );
  }
  return clients;
}
