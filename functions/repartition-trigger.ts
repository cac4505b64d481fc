/**
 * Lambda entry point for the internal repartition stream's event source mapping (stage 2 of a
 * query whose state keys the source stream is not partitioned by). The CDK construct bundles an
 * entry that imports the query module and exports `createRepartitionTriggerHandler(query)`.
 */
export { createRepartitionTriggerHandler } from '../lib/aws/kinesis-trigger-handler.js';
export type { KinesisTriggerHandler, KinesisTriggerOptions } from '../lib/aws/kinesis-trigger-handler.js';
