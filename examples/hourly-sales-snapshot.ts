/** Complete mode → S3 snapshot: the whole result table, replaced atomically every batch. */
import { hourlySalesQuery } from './hourly-sales.js';

export default hourlySalesQuery('hourly-sales-snapshot', 'complete', { kind: 's3-snapshot', prefix: 'hourly-sales/snapshot/' });
