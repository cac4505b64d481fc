/**
 * Lambda entry point for the Kinesis event source mapping. The CDK construct bundles a tiny entry
 * that imports the user's query module and exports `createKinesisTriggerHandler(query)`; all the
 * work is in lib/aws/kinesis-trigger-handler.ts.
 */
export { createKinesisTriggerHandler } from '../lib/aws/kinesis-trigger-handler.js';
export type { KinesisTriggerHandler, KinesisTriggerOptions } from '../lib/aws/kinesis-trigger-handler.js';
export { createRepartitionTriggerHandler } from '../lib/aws/kinesis-trigger-handler.js';
