/**
 * The CDK app (`cdk.json`: `npx tsx cdk/app.ts`): the example stack, checked by cdk-nag's
 * AwsSolutions pack. A violation that is not acknowledged (with a reason) fails `cdk synth`.
 *
 * Context: `-c shardCount=4`, `-c removalPolicy=destroy` (for throwaway environments, LocalStack).
 */
import { App, RemovalPolicy, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { SluiceExampleStack } from './sluice-example-stack.js';

const app = new App();
const shardCount = app.node.tryGetContext('shardCount');
const removalPolicy = app.node.tryGetContext('removalPolicy');
new SluiceExampleStack(app, 'SluiceExampleStack', {
  description: 'Sluice example: hourly sales per store, written three ways (S3 files, DynamoDB, S3 snapshot), and per product through a repartition stage',
  shardCount: shardCount === undefined ? undefined : Number(shardCount),
  removalPolicy: removalPolicy === 'destroy' ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN,
  env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
app.synth();
