/**
 * `sluice/lambda`: the Lambda handler factories, for users who wire their own functions. The
 * SluiceQuery construct bundles an entry per function that does exactly this:
 *
 *   import query from './my-query.js';
 *   import { createKinesisTriggerHandler } from 'sluice/lambda';
 *   export const handler = createKinesisTriggerHandler(query);
 *
 * The functions read their configuration (tables, buckets, stream) from the environment variables
 * in RUNTIME_ENV, which the construct sets.
 *
 * @packageDocumentation
 * @module sluice/lambda
 */
export {
  createKinesisTriggerHandler, createRepartitionTriggerHandler, type KinesisTriggerHandler, type KinesisTriggerOptions,
} from '../lib/aws/kinesis-trigger-handler.js';
export {
  createScheduledTriggerHandler, type ScheduledTriggerHandler, type ScheduledTriggerOptions, type ScheduledTriggerEvent,
} from '../lib/aws/scheduled-trigger-handler.js';
export { RUNTIME_ENV, DEPLOYMENT_DEFAULTS, TABLE_KEYS, readRuntimeConfig, type RuntimeConfig } from '../lib/runtime/runtime-config.js';
