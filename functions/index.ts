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
 */
export { createKinesisTriggerHandler, createRepartitionTriggerHandler } from './kinesis-trigger.js';
export type { KinesisTriggerHandler, KinesisTriggerOptions } from './kinesis-trigger.js';
export { createScheduledTriggerHandler } from './scheduled-trigger.js';
export type { ScheduledTriggerHandler, ScheduledTriggerOptions, ScheduledTriggerEvent } from './scheduled-trigger.js';
export { RUNTIME_ENV, DEPLOYMENT_DEFAULTS, TABLE_KEYS, readRuntimeConfig, type RuntimeConfig } from '../lib/runtime/runtime-config.js';
