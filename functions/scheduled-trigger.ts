/**
 * Lambda entry point for the EventBridge schedule: no-data batches, idle shards, draining. The
 * CDK construct bundles an entry that imports the query module and exports
 * `createScheduledTriggerHandler(query)`; the work is in lib/aws/scheduled-trigger-handler.ts.
 */
export { createScheduledTriggerHandler } from '../lib/aws/scheduled-trigger-handler.js';
export type { ScheduledTriggerHandler, ScheduledTriggerOptions, ScheduledTriggerEvent } from '../lib/aws/scheduled-trigger-handler.js';
