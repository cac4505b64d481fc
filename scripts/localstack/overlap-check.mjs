// Run by overlap-check.sh inside with-localstack.sh: DynamoDB writes before and after a second
// LocalStack starts and stops on the same checkout. Exits 1 if any call fails.
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { existsSync, writeFileSync } from 'node:fs';

const client = new DynamoDBClient({ endpoint: process.env.AWS_ENDPOINT_URL, region: process.env.AWS_REGION, maxAttempts: 1 });
const table = (name) => ({
  TableName: name, BillingMode: 'PAY_PER_REQUEST',
  AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }], KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
});
let failed = false;
async function step(what, call) {
  try {
    await call();
    console.log(`${what}: ok`);
  } catch (error) {
    failed = true;
    console.log(`${what}: ${error.name} ${error.$metadata?.httpStatusCode ?? ''} ${error.message}`);
  }
}

await step('CreateTable overlap-one', () => client.send(new CreateTableCommand(table('overlap-one'))));
await step('PutItem overlap-one', () => client.send(new PutItemCommand({ TableName: 'overlap-one', Item: { pk: { S: 'a' } } })));
const [written, secondDone] = process.argv.slice(2);
writeFileSync(written, '');
console.log('waiting for the second LocalStack to start and stop');
while (!existsSync(secondDone)) await new Promise((resolve) => setTimeout(resolve, 500));
await step('DescribeTable overlap-one', () => client.send(new DescribeTableCommand({ TableName: 'overlap-one' })));
await step('PutItem overlap-one again', () => client.send(new PutItemCommand({ TableName: 'overlap-one', Item: { pk: { S: 'b' } } })));
await step('CreateTable overlap-two', () => client.send(new CreateTableCommand(table('overlap-two'))));
client.destroy();
process.exit(failed ? 1 : 0);
