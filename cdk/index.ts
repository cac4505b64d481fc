/**
 * `sluice/cdk`: the SluiceQuery construct, one query deployed as a serverless pipeline.
 *
 * @packageDocumentation
 * @module sluice/cdk
 */
export { SluiceQuery, type SluiceQueryProps, type SluiceQueryAlarms } from './sluice-query.js';
export { SluiceLakeTable, type LakeTableOptions, type LakeProjection } from './lake-table.js';
export { type SinkCompactionOptions } from './compaction.js';
export { DEFAULT_DASHBOARD_PRICES, dashboardPricesFrom, type DashboardPrices } from './dashboard.js';
